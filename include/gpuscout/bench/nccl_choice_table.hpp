#pragma once
// What NCCL chose for one collective call (algorithm, protocol, channels), keyed the way its profiler
// plugin interface names the call. Header-only standard C++ (no NCCL, no JSON, C++17-clean): the
// profiler plugin library (backends/cuda/nccl_profiler) fills it, and CI tests it without NCCL.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

namespace gpuscout::bench {

// One call as NCCL's profiler describes it: the communicator rank, NCCL's function name
// ("AllReduce", "Send", ...), the count argument of the API call and NCCL's datatype name
// ("ncclFloat32", ...).
struct NcclCallKey {
  int rank = 0;
  std::string func;
  std::uint64_t count = 0;
  std::string datatype;
  friend bool operator<(const NcclCallKey& a, const NcclCallKey& b) {
    return std::tie(a.rank, a.func, a.count, a.datatype) < std::tie(b.rank, b.func, b.count, b.datatype);
  }
};

struct NcclChoice {
  std::string algorithm;  // "RING", "TREE", "NVLS", ...; empty for send/recv, which have none
  std::string protocol;   // "LL", "LL128", "SIMPLE"; empty for send/recv
  int channels = 0;       // the most seen for this key (one send/recv event per peer)
  int calls = 0;          // events seen for this key
};

class NcclChoiceTable {
 public:
  // `algorithm`/`protocol` may be null (send/recv events carry none).
  void add(const NcclCallKey& key, const char* algorithm, const char* protocol, int channels) {
    NcclChoice& c = table_[key];
    if (algorithm != nullptr) c.algorithm = algorithm;
    if (protocol != nullptr) c.protocol = protocol;
    if (channels > c.channels) c.channels = channels;
    ++c.calls;
  }
  std::optional<NcclChoice> find(const NcclCallKey& key) const {
    const auto it = table_.find(key);
    if (it == table_.end()) return std::nullopt;
    return it->second;
  }
  // The one call of `rank` with this function and datatype, whatever its count: NCCL may count
  // differently from the API (nullopt when there are none or several).
  std::optional<NcclChoice> find_any_count(int rank, const std::string& func, const std::string& datatype) const {
    std::optional<NcclChoice> found;
    for (const auto& [key, choice] : table_) {
      if (key.rank != rank || key.func != func || key.datatype != datatype) continue;
      if (found) return std::nullopt;
      found = choice;
    }
    return found;
  }
  void clear() { table_.clear(); }
  std::size_t size() const { return table_.size(); }

 private:
  std::map<NcclCallKey, NcclChoice> table_;
};

}  // namespace gpuscout::bench
