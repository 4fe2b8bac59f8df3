#pragma once
// A workload the advisor answers for (data/workloads/*.toml, schema in docs/advise.md): what to run
// (train or serve one model), at which precisions, under which bounds (latency SLO, request rate,
// deadline) and constraints (budget, power, GPU types, count, horizon). Plain data plus a loader that
// names the file, entry and field of every error.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/data/data_source.hpp"

namespace gpuscout::advise {

enum class Task { train, serve };
std::string to_string(Task task);

// One serving demand. A workload has one, or several named tiers ([[tier]]: e.g. an interactive tier
// under a tight SLO beside a batch tier), each advised on its own.
struct ServeDemand {
  std::string name;  // tier name; "serve" for the single demand
  std::int64_t isl = 0, osl = 0;
  // Demand: requests per second, or output tokens per day (one of them; per tenant).
  std::optional<double> requests_per_s;
  std::optional<double> output_tokens_per_day;
  double ttft_ms = 0;  // 0: no bound
  double tpot_ms = 0;  // 0: no bound
  std::string kv_precision = "bf16";
  std::int64_t tenants = 1;  // independent copies of the model, each with this demand (multi-tenant)

  // Output tokens per second one tenant needs.
  double output_tokens_per_s() const;
};

struct TrainDemand {
  double tokens = 0;         // tokens to train on
  double deadline_days = 0;  // 0: no deadline
  std::int64_t global_batch = 0;
  std::int64_t seq = 0;
  std::string recompute = "selective";
  std::string fine_tune = "full";  // full, lora, qlora
  int zero_stage = 1;
};

struct Constraints {
  std::vector<std::string> gpus;          // allowed GPU types (empty: every type with a price)
  std::vector<std::string> exclude_gpus;  // never these
  std::int64_t max_gpus = 64;             // per option (all tenants and replicas)
  std::optional<double> budget_usd;       // serve: total over the horizon; train: one run
  std::optional<double> power_kw;         // IT power of the whole deployment
  std::optional<double> rack_power_kw;    // power one rack supplies: a server must fit in one
  double years = 3;                       // horizon for buy vs rent
  std::optional<double> utilization;      // overrides the TCO default (owner's busy fraction)
  std::string pricing = "cheapest";       // rank by: own, rent, cheapest (of own and rent)
  bool mig = true;                        // consider MIG slices (serve, GPUs that have MIG)
};

struct Workload {
  std::string name;
  std::string description;
  std::string origin;  // file it came from
  Task task = Task::serve;
  std::string model;
  std::vector<std::string> precisions;  // allowed: bf16, fp16, fp8, int8, int4 (serve); bf16, fp8 (train)
  std::string framework;                // profile key; default tensorrt-llm (serve), megatron (train)
  std::vector<ServeDemand> tiers;       // serve
  TrainDemand train;                    // train
  Constraints constraints;
};

// Parses and validates one workload file; DataError names the file, the field and what was expected.
Workload parse_workload(const data::DataFile& file);
// Checks the values (also after flag overrides); `where` names the file or "flags" in the message.
void validate_workload(const Workload& workload, const std::string& where);
// data/workloads/*.toml of the source (embedded by default), in file-name order.
std::vector<Workload> load_workloads(const data::DataSource& source);
// One by name (case-insensitive); NotFoundError with suggestions otherwise.
Workload find_workload(const data::DataSource& source, const std::string& name);

}  // namespace gpuscout::advise
