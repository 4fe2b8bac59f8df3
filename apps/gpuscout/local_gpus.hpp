#pragma once
// The local GPUs for `devices` and `bench`: the CUDA backend's listing, each GPU matched to its
// spec database entry, and the peak figures a measurement is compared with. Only meaningful in a
// build with CUDA (GPUSCOUT_HAVE_CUDA); see local_gpus.cpp.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/bench/summary.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::specs {
class SpecDb;
struct GpuSpec;
}  // namespace gpuscout::specs

namespace gpuscout::cli {

struct LocalGpus {
  std::vector<results::GpuInfo> gpus;        // spec_name filled when matched
  std::vector<const specs::GpuSpec*> specs;  // same order; nullptr when unmatched
  std::vector<nlohmann::ordered_json> details;
  std::map<std::string, std::string> software;
  std::string unavailable_reason;  // non-empty when no GPU can be used
};

// Never throws for a missing driver or GPU (unavailable_reason says why). A spec database that
// fails to load leaves GPUs unmatched (and is reported in software["spec_db"]).
LocalGpus discover_local_gpus(const specs::SpecDb* db);

// Figures for annotate_percent_of_peak: HBM bandwidth and dense peaks from the spec entry, host
// link from NVML's maximum PCIe generation and width.
bench::PeakFigures peak_figures(const specs::GpuSpec* spec, const nlohmann::ordered_json& detail);

}  // namespace gpuscout::cli
