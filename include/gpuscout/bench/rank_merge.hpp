#pragma once
// Rank 0 of an MPI run gathers every rank's records into one result (pure C++, tested in CI).
// Records a benchmark marks extra["distributed"] = true (one collective measured by all ranks
// together) are merged by key the way nccl-tests reports them: the time is the mean over ranks
// and algbw/busbw are recomputed from it (params "bus_bytes" and "busbw_factor"); wrong values are
// summed, the worst outcome wins. Other records (single-GPU benchmarks each rank ran) are kept,
// with "rank<r>/" before their key when there are several ranks.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/report/table.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::bench {

struct RankInfo {
  int rank = 0;
  int local_rank = 0;
  std::string host;
  long pid = 0;
  int gpu = -1;  // local CUDA index this rank drives
  std::string gpu_name, pci_bus_id, uuid;
};

nlohmann::ordered_json to_json(const RankInfo& info);
RankInfo rank_info_from_json(const nlohmann::ordered_json& j);
// Columns: rank, host, pid, local rank, GPU, name, PCI bus id.
report::Table rank_table(const std::vector<RankInfo>& ranks);

// More severe first: timeout, failed, incorrect, not_supported, skipped, passed.
int outcome_severity(results::Outcome outcome);

// by_rank[r]: the records rank r produced, in its order. The result keeps rank 0's order, then
// records only other ranks produced.
std::vector<results::Record> merge_rank_records(const std::vector<std::vector<results::Record>>& by_rank);

}  // namespace gpuscout::bench
