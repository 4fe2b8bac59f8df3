#pragma once
// The advisor (docs/advise.md): for one workload, enumerate GPU type x count x layout (TP/PP/DP, MIG
// slices for multi-tenant serving) x precision the GPU supports, size each with the memory model
// (model/memory.hpp) and the speed model (model/speed.hpp, calibrated), drop what does not fit or
// misses a bound (SLO, deadline, budget, power), price the rest own vs rent with the TCO model and
// rank them by cost per unit of work: serving USD per million output tokens at the required rate,
// training USD per run. Every option and every rejection carries its reasons in numbers. Nothing
// about a scenario is hard-coded: the decisions come out of the models and the data.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/advise/workload.hpp"
#include "gpuscout/model/calibration.hpp"
#include "gpuscout/model/memory.hpp"
#include "gpuscout/model/speed.hpp"
#include "gpuscout/results/result.hpp"
#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/tco/tco.hpp"
#include "gpuscout/workloads/model_arch.hpp"

namespace gpuscout::advise {

// Everything the advisor reads, resolved by the caller (the CLI loads it from the data source).
struct AdvisorInputs {
  std::string model_name;
  workloads::ModelArch arch;
  std::vector<const specs::GpuSpec*> gpus;          // candidate GPU types (constraints applied here too)
  std::vector<model::Calibration> calibrations;     // measured tables; calibration_for() picks per GPU
  std::vector<model::FrameworkProfile> frameworks;  // data/frameworks.toml
  const tco::TcoDefaults* tco = nullptr;            // data/tco.toml
  std::vector<std::string> tco_overrides;           // "key=value", applied to every GPU's inputs
};

// One partition of a GPU into equal slices: NVIDIA MIG (`instances` slices, each with compute_share of
// the SMs and memory_share of the memory: the 1g/2g/3g profiles of the MIG user guide) or AMD compute
// partitions (CPX/QPX/DPX: 1/N of the XCDs and, in the matching NPS mode, of the memory).
struct MigProfile {
  std::string name;  // "1g.10gb", "CPX"; "" for the whole GPU
  int instances = 1;
  double compute_share = 1;
  double memory_share = 1;
};
// The whole GPU plus, when the spec lists MIG instances, the partitions it allows: NVIDIA 7-, 3- and 2-way
// (1g, 2g, 3g), AMD 8-, 4- and 2-way (CPX, QPX, DPX).
std::vector<MigProfile> mig_profiles(const specs::GpuSpec& gpu);
// The spec of one slice: peaks and bandwidth x compute share, memory x memory share (an assumption:
// a slice gets its share of bandwidth with its memory controllers, as the MIG guide describes).
specs::GpuSpec slice_spec(const specs::GpuSpec& gpu, const MigProfile& profile);

// Whether `gpu` runs `precision` (bf16, fp16, fp8, int8, int4) natively: its spec has a dense peak for
// the compute precision (int4 is weight-only: bf16 or fp16 compute). Empty when it does, else why not.
std::string precision_unsupported(const specs::GpuSpec& gpu, const std::string& precision);

// Costs of one option per hour of use and per unit of work, each way of paying.
struct CostTerms {
  double capital = 0, energy = 0, colocation = 0, opex = 0;  // owner, USD per GPU-hour (TCO model)
};
struct Pricing {
  std::string way;            // "own", "rent on-demand", "rent reserved"
  double usd_per_gpu_hr = 0;  // as paid
  double usd_per_unit = 0;    // serve: USD per M output tokens; train: USD per run
  double usd_total = 0;       // serve: over the horizon; train: one run
  std::string source;
};

struct Option {
  std::string tier;  // serving tier name; "train" for training
  int rank = 0;      // 1 = cheapest; 0 for rejected
  const specs::GpuSpec* gpu = nullptr;
  std::string mig;  // MIG profile ("" whole GPUs)
  int instances_per_gpu = 1;
  std::string precision;
  model::Parallelism par;        // of one replica (serve) or of the whole job (train)
  std::int64_t replicas = 1;     // serve: per tenant
  std::int64_t micro_batch = 1;  // train: sequences per micro-batch
  std::int64_t gpus = 0;         // total, all tenants
  // Serve.
  double batch = 0, ttft_ms = 0, tpot_ms = 0;
  double replica_tokens_per_s = 0;  // output tokens/s of one replica within the bounds
  double kv_tokens = 0;             // KV-cache room per replica
  // Train.
  double step_s = 0, mfu = 0, train_tokens_per_s = 0, days = 0;
  // Both.
  double memory_gib = 0;  // per GPU (instance)
  double capacity_gib = 0;
  double power_kw = 0;  // IT power of the deployment (TCO's kW per GPU incl. server share)
  std::vector<Pricing> pricing;
  std::size_t best_pricing = 0;  // index into pricing used for the ranking
  CostTerms own_terms;
  std::string unit;  // "USD/Mtok output" or "USD/run"
  double cost = 0;   // ranking figure, in `unit`
  std::string calibration_tier, calibration_source;
  double error_band = 0;  // fraction
  std::vector<std::string> reasons;
  bool feasible = false;
  std::string rejected_by;  // "memory", "slo", "deadline", "budget", "power", "count", "price", "precision"
};

struct Advice {
  Workload workload;
  std::vector<Option> options;     // per GPU type x precision the cheapest layout, ranked per tier (rank 1 first)
  std::vector<Option> rejections;  // one per GPU type x precision whose every layout failed
  std::vector<std::string> assumptions;
  std::vector<std::string> notes;
  std::size_t evaluated = 0;  // layouts sized
};

// Runs the enumeration. Throws UsageError when the workload does not suit the model (e.g. an encoder
// served) and DataError for bad data.
Advice advise(const Workload& workload, const AdvisorInputs& inputs);

// The advice as a result set of kind "advise": one record per option (outcome passed, params rank,
// gpu, count, layout, precision; metrics with units) and per rejection (outcome skipped, the reason).
results::ResultSet to_result_set(const Advice& advice);

// Cheapest option of each tier (mixed clusters: the tiers may pick different GPU types).
std::vector<const Option*> best_per_tier(const Advice& advice);

}  // namespace gpuscout::advise
