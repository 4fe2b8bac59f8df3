// gpuscout's NCCL profiler plugin (libgpuscout_nccl_profiler.so, beside the gpuscout binary): NCCL
// (>= 2.23 has the profiler interface; this exports versions 5 and 4) loads it when
// NCCL_PROFILER_PLUGIN names it and describes every collective it enqueues, with the algorithm,
// protocol and channel count its tuner chose. The plugin keeps NCCL's activation mask at 0 (NCCL
// then creates no events at all) except while gpuscout records, around the untimed verification
// call of each case, so timed collectives run as without a plugin. Events are stored per
// communicator rank in a NcclChoiceTable that gpuscout queries through the C functions below.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "gpuscout/bench/nccl_choice_table.hpp"
#include "nccl_profiler_abi.hpp"

#define GPUSCOUT_EXPORT __attribute__((visibility("default")))

namespace {

namespace nccl_abi = gpuscout::nccl_profiler_abi;

struct Context {
  int rank = 0;
};

std::mutex table_mutex;
gpuscout::bench::NcclChoiceTable table;  // guarded by table_mutex
std::atomic<int*> activation_mask{nullptr};
std::atomic<bool> recording{false};
std::atomic<int> communicators{0};
std::atomic<int> interface_version{0};

constexpr int kRecordMask = nccl_abi::kEventColl | nccl_abi::kEventP2p;
constexpr unsigned long long kAnyCount = ~0ull;

// NCCL reads the mask with relaxed atomic loads when a group starts; it is one int for the process.
void apply_mask() {
  if (int* mask = activation_mask.load()) __atomic_store_n(mask, recording.load() ? kRecordMask : 0, __ATOMIC_RELAXED);
}

int init_common(void** context, int* mask, int rank, int version) {
  *context = new Context{rank};
  if (mask != nullptr) activation_mask.store(mask);
  interface_version.store(version);
  communicators.fetch_add(1);
  apply_mask();
  return 0;
}

const char* or_empty(const char* s) {
  return s != nullptr ? s : "";
}

// The v4 members of a descriptor's collective/p2p part (v5 keeps them first, then parentGroup).
const nccl_abi::CollV4& coll_of(const nccl_abi::EventDescrV4& d) {
  return d.coll;
}
const nccl_abi::CollV4& coll_of(const nccl_abi::EventDescrV5& d) {
  return d.coll.v4;
}
const nccl_abi::P2pV4& p2p_of(const nccl_abi::EventDescrV4& d) {
  return d.p2p;
}
const nccl_abi::P2pV4& p2p_of(const nccl_abi::EventDescrV5& d) {
  return d.p2p.v4;
}

template <typename Descr>
int start_common(void* context, void** handle, const Descr* d) {
  *handle = nullptr;  // no event object: NCCL then never calls stopEvent/recordEventState for it
  if (!recording.load() || d == nullptr) return 0;
  const int rank = context != nullptr ? static_cast<const Context*>(context)->rank : d->rank;
  if (d->type == nccl_abi::kEventColl) {
    const auto& c = coll_of(*d);
    std::lock_guard<std::mutex> lock(table_mutex);
    table.add({rank, or_empty(c.func), c.count, or_empty(c.datatype)}, or_empty(c.algo), or_empty(c.proto),
              c.nChannels);
  } else if (d->type == nccl_abi::kEventP2p) {
    const auto& p = p2p_of(*d);
    std::lock_guard<std::mutex> lock(table_mutex);
    table.add({rank, or_empty(p.func), p.count, or_empty(p.datatype)}, nullptr, nullptr, p.nChannels);
  }
  return 0;
}

int stop_event(void*) {
  return 0;
}
int record_event_state(void*, int, void*) {
  return 0;
}
int finalize(void* context) {
  delete static_cast<Context*>(context);
  return 0;
}

int init_v5(void** context, std::uint64_t, int* mask, const char*, int, int, int rank, nccl_abi::Logger) {
  return init_common(context, mask, rank, 5);
}
int start_v5(void* context, void** handle, nccl_abi::EventDescrV5* d) {
  return start_common(context, handle, d);
}
int init_v4(void** context, int* mask, const char*, std::uint64_t, int, int, int rank, nccl_abi::Logger) {
  return init_common(context, mask, rank, 4);
}
int start_v4(void* context, void** handle, nccl_abi::EventDescrV4* d) {
  return start_common(context, handle, d);
}

void copy_text(const std::string& from, char* to, int size) {
  if (to == nullptr || size <= 0) return;
  const std::size_t n = std::min(from.size(), static_cast<std::size_t>(size - 1));
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

}  // namespace

extern "C" {

GPUSCOUT_EXPORT nccl_abi::ProfilerV5 ncclProfiler_v5 = {"gpuscout",         init_v5, start_v5, stop_event,
                                                        record_event_state, finalize};
GPUSCOUT_EXPORT nccl_abi::ProfilerV4 ncclProfiler_v4 = {"gpuscout",         init_v4, start_v4, stop_event,
                                                        record_event_state, finalize};

GPUSCOUT_EXPORT void gpuscout_nccl_profiler_set_recording(int on) {
  recording.store(on != 0);
  apply_mask();
}

GPUSCOUT_EXPORT void gpuscout_nccl_profiler_clear(void) {
  std::lock_guard<std::mutex> lock(table_mutex);
  table.clear();
}

GPUSCOUT_EXPORT int gpuscout_nccl_profiler_communicators(void) {
  return communicators.load();
}

GPUSCOUT_EXPORT int gpuscout_nccl_profiler_interface(void) {
  return interface_version.load();
}

GPUSCOUT_EXPORT int gpuscout_nccl_profiler_lookup(int rank, const char* func, unsigned long long count,
                                                  const char* datatype, char* algorithm, int algorithm_size,
                                                  char* protocol, int protocol_size, int* channels) {
  std::lock_guard<std::mutex> lock(table_mutex);
  const auto found = count == kAnyCount ? table.find_any_count(rank, or_empty(func), or_empty(datatype))
                                        : table.find({rank, or_empty(func), count, or_empty(datatype)});
  if (!found) return 0;
  copy_text(found->algorithm, algorithm, algorithm_size);
  copy_text(found->protocol, protocol, protocol_size);
  if (channels != nullptr) *channels = found->channels;
  return 1;
}

}  // extern "C"
