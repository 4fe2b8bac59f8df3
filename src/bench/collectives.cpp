#include "gpuscout/bench/collectives.hpp"

#include <algorithm>
#include <cctype>

namespace gpuscout::bench {

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> kAll = {Collective::all_reduce,     Collective::all_gather,
                                               Collective::reduce_scatter, Collective::broadcast,
                                               Collective::alltoall,       Collective::sendrecv};
  return kAll;
}

std::string to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::all_gather:
      return "all_gather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::broadcast:
      return "broadcast";
    case Collective::alltoall:
      return "alltoall";
    case Collective::sendrecv:
      return "sendrecv";
  }
  return "unknown";
}

std::optional<Collective> collective_from_string(const std::string& name) {
  std::string n;
  for (char ch : name) {
    if (ch != '_' && ch != '-') n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  for (Collective c : all_collectives()) {
    std::string k = to_string(c);
    std::erase(k, '_');
    if (n == k) return c;
  }
  return std::nullopt;
}

CollCounts coll_counts(Collective c, std::uint64_t size_bytes, std::size_t element_size, int nranks) {
  CollCounts k;
  const std::size_t count = element_size > 0 ? static_cast<std::size_t>(size_bytes / element_size) : 0;
  const std::size_t n = static_cast<std::size_t>(std::max(nranks, 1));
  switch (c) {
    case Collective::all_reduce:
    case Collective::broadcast:
    case Collective::sendrecv:
      k.send_count = k.recv_count = k.param_count = count;
      k.bus_bytes = static_cast<std::uint64_t>(count) * element_size;
      break;
    case Collective::all_gather:
      k.send_count = k.param_count = count / n;
      k.recv_count = k.send_count * n;
      k.send_inplace_offset = count / n;  // times the rank
      k.bus_bytes = static_cast<std::uint64_t>(k.param_count) * element_size * n;
      break;
    case Collective::reduce_scatter:
      k.recv_count = k.param_count = count / n;
      k.send_count = k.recv_count * n;
      k.recv_inplace_offset = count / n;  // times the rank
      k.bus_bytes = static_cast<std::uint64_t>(k.param_count) * element_size * n;
      break;
    case Collective::alltoall:
      k.param_count = count / n;
      k.send_count = k.recv_count = k.param_count * n;
      k.bus_bytes = static_cast<std::uint64_t>(k.param_count) * element_size * n;
      break;
  }
  return k;
}

double busbw_factor(Collective c, int nranks) {
  const double n = std::max(nranks, 1);
  switch (c) {
    case Collective::all_reduce:
      return 2.0 * (n - 1) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
      return (n - 1) / n;
    case Collective::broadcast:
    case Collective::sendrecv:
      return 1.0;
  }
  return 1.0;
}

std::string size_meaning(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "count x type size (the buffer each rank holds)";
    case Collective::all_gather:
      return "total output = ranks x per-rank send";
    case Collective::reduce_scatter:
      return "total input = ranks x per-rank output";
    case Collective::alltoall:
      return "per-rank send buffer = ranks x per-peer count x type size";
    case Collective::broadcast:
    case Collective::sendrecv:
      return "count x type size";
  }
  return "";
}

bool in_place_defined(Collective c) {
  return c != Collective::alltoall && c != Collective::sendrecv;
}

std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes, double factor) {
  std::vector<std::uint64_t> sizes;
  if (min_bytes == 0 || max_bytes < min_bytes || factor <= 1.0) return sizes;
  for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes) * (1 + 1e-12); s *= factor) {
    const auto v = static_cast<std::uint64_t>(s);
    if (sizes.empty() || v != sizes.back()) sizes.push_back(v);
  }
  return sizes;
}

std::vector<std::uint64_t> default_coll_sizes(bool quick) {
  if (quick) return {8, 1ull << 20, 64ull << 20, 1ull << 30};
  return sweep_sizes(8, 8ull << 30, 2.0);
}

std::optional<DataType> data_type_from_string(const std::string& name) {
  std::string n;
  for (char ch : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  struct Alias {
    const char* alias;
    DataType type;
  };
  static const Alias kTypes[] = {
      {"float", {"float", 4, true}},    {"fp32", {"float", 4, true}},     {"float32", {"float", 4, true}},
      {"half", {"half", 2, true}},      {"fp16", {"half", 2, true}},      {"float16", {"half", 2, true}},
      {"bf16", {"bf16", 2, true}},      {"bfloat16", {"bf16", 2, true}},  {"double", {"double", 8, true}},
      {"fp64", {"double", 8, true}},    {"float64", {"double", 8, true}}, {"int8", {"int8", 1, false}},
      {"uint8", {"uint8", 1, false}},   {"int32", {"int32", 4, false}},   {"int", {"int32", 4, false}},
      {"uint32", {"uint32", 4, false}}, {"int64", {"int64", 8, false}},   {"uint64", {"uint64", 8, false}},
  };
  for (const auto& a : kTypes) {
    if (n == a.alias) return a.type;
  }
  return std::nullopt;
}

std::size_t checked_elements(Collective c, const CollCounts& counts) {
  (void)c;
  return counts.recv_count;
}

}  // namespace gpuscout::bench
