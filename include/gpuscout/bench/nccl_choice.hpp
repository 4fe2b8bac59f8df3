#pragma once
// The algorithm, protocol and channel count NCCL used for a collectives record, as extra fields
// built from the per-rank answers of gpuscout's NCCL profiler plugin (backends/cuda/nccl_profiler);
// pure C++, tested in CI. C++17-clean: collectives.cu includes it.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpuscout/bench/collectives.hpp"
#include "gpuscout/bench/nccl_choice_table.hpp"

namespace gpuscout::bench {

// NCCL's own names (its ncclFuncToString / ncclDatatypeToString) for what the benchmark calls:
// alltoall and sendrecv are grouped ncclSend/ncclRecv, so their events are "Send" and "Recv".
std::string nccl_function_name(Collective c);
// "float" -> "ncclFloat32", ...; "uint8" -> "Unknown": NCCL's ncclDatatypeToString has no ncclUint8 case.
std::string nccl_datatype_name(const std::string& dtype);
// Whether NCCL picks an algorithm and protocol for it (not for send/recv-based ones).
bool nccl_has_algorithm(Collective c);
// The key NCCL's profiler event of `rank`'s call carries: NCCL's function and datatype names and the
// API count, except that NCCL turns all_gather and broadcast into bytes (ncclInt8, count x element
// size: collTaskAppend in its enqueue.cc) before describing them.
NcclCallKey nccl_event_key(Collective c, int rank, std::uint64_t count, const DataType& type);

// One entry of extra["nccl_choice_by_rank"]: {"rank", "algorithm", "protocol", "channels"}, each
// "unknown" when not reported, with "reason" saying why whenever one is unknown. `unknown_reason`
// explains a missing `choice` (plugin not loaded, no event seen).
nlohmann::ordered_json nccl_rank_choice(int rank, const std::optional<NcclChoice>& choice, bool has_algorithm,
                                        const std::string& unknown_reason);

// Sets extra["algorithm"], ["protocol"] and ["channels"] from extra["nccl_choice_by_rank"]: the
// value every rank reported, "unknown" when none did, "mixed (rank 0: RING; rank 1: TREE)" when they
// differ; extra["nccl_choice_unknown_reason"] gathers the ranks' distinct reasons. Rank 0 of an MPI
// run calls it again after concatenating the ranks' lists.
void summarize_nccl_choice(nlohmann::ordered_json& extra);

}  // namespace gpuscout::bench
