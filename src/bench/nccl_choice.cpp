#include "gpuscout/bench/nccl_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace gpuscout::bench {

std::string nccl_function_name(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "AllReduce";
    case Collective::all_gather:
      return "AllGather";
    case Collective::reduce_scatter:
      return "ReduceScatter";
    case Collective::broadcast:
      return "Broadcast";
    case Collective::alltoall:
    case Collective::sendrecv:
      return "Send";
  }
  return "Invalid";
}

std::string nccl_datatype_name(const std::string& dtype) {
  static const std::pair<const char*, const char*> names[] = {
      {"float", "ncclFloat32"},  {"half", "ncclFloat16"}, {"bf16", "ncclBfloat16"},
      {"double", "ncclFloat64"}, {"int8", "ncclInt8"},    {"int32", "ncclInt32"},
      {"uint32", "ncclUint32"},  {"int64", "ncclInt64"},  {"uint64", "ncclUint64"}};
  for (const auto& [ours, nccl] : names) {
    if (dtype == ours) return nccl;
  }
  return "Unknown";
}

bool nccl_has_algorithm(Collective c) {
  return c != Collective::alltoall && c != Collective::sendrecv;
}

NcclCallKey nccl_event_key(Collective c, int rank, std::uint64_t count, const DataType& type) {
  if (c == Collective::all_gather || c == Collective::broadcast) {
    return {rank, nccl_function_name(c), count * type.size, "ncclInt8"};
  }
  return {rank, nccl_function_name(c), count, nccl_datatype_name(type.name)};
}

nlohmann::ordered_json nccl_rank_choice(int rank, const std::optional<NcclChoice>& choice, bool has_algorithm,
                                        const std::string& unknown_reason) {
  nlohmann::ordered_json e = {{"rank", rank}};
  if (!choice) {
    e["algorithm"] = e["protocol"] = e["channels"] = "unknown";
    e["reason"] = unknown_reason;
    return e;
  }
  auto or_unknown = [](const std::string& v) { return v.empty() ? std::string("unknown") : v; };
  e["algorithm"] = or_unknown(choice->algorithm);
  e["protocol"] = or_unknown(choice->protocol);
  if (choice->channels > 0) {
    e["channels"] = choice->channels;
  } else {
    e["channels"] = "unknown";
  }
  if (!has_algorithm) {
    e["reason"] = "send/recv: NCCL chooses no algorithm or protocol for point-to-point transfers";
  } else if (choice->algorithm.empty() || choice->protocol.empty()) {
    e["reason"] = "NCCL's profiler event carried no algorithm or protocol name";
  }
  return e;
}

namespace {

bool is_unknown(const nlohmann::ordered_json& v) {
  return v.is_null() || (v.is_string() && v == "unknown");
}

std::string text(const nlohmann::ordered_json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

void summarize_nccl_choice(nlohmann::ordered_json& extra) {
  if (!extra.contains("nccl_choice_by_rank") || !extra["nccl_choice_by_rank"].is_array()) return;
  // A copy: setting extra's fields below may move its (vector-backed) members.
  const nlohmann::ordered_json ranks = extra["nccl_choice_by_rank"];
  for (const char* field : {"algorithm", "protocol", "channels"}) {
    bool all_same = true, any_known = false;
    for (const auto& e : ranks) {
      const auto v = e.value(field, nlohmann::ordered_json());
      any_known = any_known || !is_unknown(v);
      all_same = all_same && v == ranks.front().value(field, nlohmann::ordered_json());
    }
    if (ranks.empty() || !any_known) {
      extra[field] = "unknown";
    } else if (all_same) {
      extra[field] = ranks.front()[field];
    } else {
      std::string mixed;
      for (const auto& e : ranks) {
        mixed += fmt::format("{}rank {}: {}", mixed.empty() ? "" : "; ", e.value("rank", -1),
                             text(e.value(field, nlohmann::ordered_json("unknown"))));
      }
      extra[field] = "mixed (" + mixed + ")";
    }
  }
  std::vector<std::string> reasons;
  for (const auto& e : ranks) {
    if (!e.contains("reason")) continue;
    const std::string r = text(e["reason"]);
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  }
  if (reasons.empty()) {
    extra.erase("nccl_choice_unknown_reason");
  } else {
    std::string joined;
    for (const auto& r : reasons) joined += (joined.empty() ? "" : "; ") + r;
    extra["nccl_choice_unknown_reason"] = joined;
  }
}

}  // namespace gpuscout::bench
