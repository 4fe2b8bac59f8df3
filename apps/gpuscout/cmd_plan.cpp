// gpuscout plan: what fits where. For a model and a task (serve or train), the smallest GPU count and
// parallel layout whose per-GPU memory fits, on one GPU type or on every GPU of the spec database,
// with the per-GPU breakdown term by term and, for each rejected layout, why it does not fit (numbers).
// The memory model is include/gpuscout/model/memory.hpp; this file only enumerates and prints.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/advise/advisor.hpp"
#include "gpuscout/model/memory.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::cli {
namespace {

using model::kGiB;
using model::MemoryBreakdown;
using model::Parallelism;
using report::Align;
using report::Cell;
using report::Table;

struct PlanOptions {
  std::string model;
  std::string task;
  std::string gpu;
  std::string precision = "bf16";
  std::optional<std::int64_t> tp, pp, dp, ep;
  std::int64_t max_gpus = 0;  // 0: 64 for serving, 4096 for training
  // serve
  std::int64_t context = 4096;
  std::int64_t batch = 1;
  std::string kv_precision = "bf16";
  std::int64_t kv_block = 16;
  std::int64_t prefill_chunk = 0;
  double memory_fraction = 0.9;
  // train
  std::int64_t seq = 4096;
  std::int64_t micro_batch = 1;
  std::int64_t micro_batches = 0;
  std::string recompute = "selective";
  int zero = 0;
  bool distributed_optimizer = false;
  bool no_sequence_parallel = false;
  std::int64_t interleave = 1;
  std::string finetune = "full";
  std::int64_t lora_rank = 16;
};

// One evaluated layout.
struct Candidate {
  Parallelism par;
  std::optional<MemoryBreakdown> memory;  // absent when the layout is impossible for the model
  std::string reason;                     // why it does not fit, or why it is impossible
  double kv_capacity_tokens = 0;
  std::int64_t max_batch = 0;
  bool fits() const { return memory && memory->fits(); }
};

double to_gib(double bytes) {
  return std::round(bytes / kGiB * 100) / 100;
}

std::string layout(const Parallelism& p) {
  std::string out = fmt::format("TP{}", p.tp);
  if (p.pp > 1) out += fmt::format(" x PP{}", p.pp);
  if (p.dp > 1) out += fmt::format(" x DP{}", p.dp);
  if (p.ep > 1) out += fmt::format(" EP{}", p.ep);
  return out;
}

std::vector<std::int64_t> powers_of_two(std::int64_t max) {
  std::vector<std::int64_t> out;
  for (std::int64_t v = 1; v <= max; v *= 2) out.push_back(v);
  return out;
}

void positive(std::int64_t value, const char* flag) {
  if (value < 1) throw UsageError(fmt::format("{}: must be at least 1, got {}", flag, value));
}

class Planner {
 public:
  Planner(const PlanOptions& o, const workloads::ModelInfo& model) : o_(o), model_(model), arch_(model.arch) {
    serve_ = o.task == "serve";
    if (serve_) {
      infer_.weights = model::parse_quantization(o.precision, "--precision");
      if (o.kv_precision == "bf16" || o.kv_precision == "fp16") {
        infer_.kv_bytes_per_element = 2;
      } else if (o.kv_precision == "fp8") {
        infer_.kv_bytes_per_element = 1;
      } else {
        throw UsageError(fmt::format("--kv-precision: '{}' is not bf16, fp16 or fp8", o.kv_precision));
      }
      infer_.context = o.context;
      infer_.batch = o.batch;
      infer_.kv_block = o.kv_block;
      infer_.prefill_chunk = o.prefill_chunk;
      infer_.runtime.memory_fraction = o.memory_fraction;
    } else {
      if (o.precision != "bf16" && o.precision != "fp8") {
        throw UsageError(
            fmt::format("--precision: '{}' is not a training precision; expected bf16 or fp8", o.precision));
      }
      train_.precision = o.precision;
      train_.seq = o.seq;
      train_.micro_batch = o.micro_batch;
      train_.micro_batches = o.micro_batches;
      train_.recompute = model::parse_recompute(o.recompute, "--recompute");
      train_.zero_stage = o.zero;
      train_.distributed_optimizer = o.distributed_optimizer;
      train_.sequence_parallel = !o.no_sequence_parallel;
      if (o.interleave > 1) {
        train_.schedule = model::PipelineSchedule::interleaved;
        train_.virtual_stages = o.interleave;
      }
      if (o.finetune == "full") {
        train_.fine_tune = model::FineTune::full;
      } else if (o.finetune == "lora") {
        train_.fine_tune = model::FineTune::lora;
      } else if (o.finetune == "qlora") {
        train_.fine_tune = model::FineTune::qlora;
      } else {
        throw UsageError(fmt::format("--finetune: '{}' is not full, lora or qlora", o.finetune));
      }
      train_.lora_rank = o.lora_rank;
      if (o.zero < 0 || o.zero > 3) throw UsageError(fmt::format("--zero: stage must be 0-3, got {}", o.zero));
      if (o.distributed_optimizer && o.zero > 0) {
        throw UsageError("--distributed-optimizer: Megatron's distributed optimizer replaces ZeRO; use --zero 0");
      }
    }
    // Values given on the command line must be possible for this model, whatever the GPU.
    Parallelism given;
    given.tp = o.tp.value_or(1);
    given.pp = o.pp.value_or(1);
    given.ep = 1;
    model::check_parallelism(arch_, given);
    if (o.ep) {
      given.ep = *o.ep;
      given.dp = o.dp.value_or(*o.ep);
      if (!o.tp && !o.dp) given.tp = 1;
      model::check_parallelism(arch_, given);
    }
  }

  bool serve() const { return serve_; }

  // Layouts to try, smallest GPU count first; at equal count fewer pipeline stages, then less TP.
  std::vector<Parallelism> layouts() const {
    const std::int64_t max_gpus = o_.max_gpus > 0 ? o_.max_gpus : (serve_ ? 64 : 4096);
    const auto tps = o_.tp ? std::vector<std::int64_t>{*o_.tp} : powers_of_two(std::min<std::int64_t>(8, max_gpus));
    const auto pps = o_.pp ? std::vector<std::int64_t>{*o_.pp} : powers_of_two(std::min(arch_.layers, max_gpus));
    // Without ZeRO or a distributed optimizer, data parallelism copies everything: it never helps memory.
    const bool dp_helps = !serve_ && (o_.zero > 0 || o_.distributed_optimizer);
    std::vector<std::int64_t> dps{1};
    if (o_.dp) {
      dps = {*o_.dp};
    } else if (dp_helps) {
      dps = powers_of_two(max_gpus);
    }
    std::vector<Parallelism> out;
    for (auto tp : tps) {
      for (auto pp : pps) {
        for (auto dp : dps) {
          Parallelism p{tp, pp, dp, o_.ep.value_or(1)};
          if (p.gpus() > max_gpus && !(o_.tp && o_.pp && (o_.dp || !dp_helps))) continue;
          out.push_back(p);
        }
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const Parallelism& a, const Parallelism& b) {
      if (a.gpus() != b.gpus()) return a.gpus() < b.gpus();
      if (a.pp != b.pp) return a.pp < b.pp;
      return a.tp < b.tp;
    });
    return out;
  }

  Candidate evaluate(const Parallelism& par, double capacity) const {
    Candidate c;
    c.par = par;
    try {
      if (serve_) {
        auto m = model::inference_memory(arch_, par, infer_, capacity);
        c.kv_capacity_tokens = m.kv_tokens_capacity;
        c.max_batch = m.max_batch_at_context;
        c.memory = std::move(m.breakdown);
      } else {
        c.memory = model::training_memory(arch_, par, train_, capacity).breakdown;
      }
    } catch (const UsageError& e) {
      c.reason = e.what();
      return c;
    }
    const auto& m = *c.memory;
    if (!m.fits()) {
      // The largest term is named: it is what to change (precision, TP, ZeRO, recompute, ...).
      const auto largest = std::max_element(m.terms.begin(), m.terms.end(),
                                            [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
      c.reason = fmt::format("{}: needs {:.1f} GiB per GPU > {:.1f} GiB usable (largest: {} {:.1f} GiB)", layout(par),
                             m.total_bytes / kGiB, m.usable_bytes / kGiB, largest->key, largest->bytes / kGiB);
    }
    return c;
  }

  std::vector<std::string> request_notes() const {
    std::vector<std::string> notes;
    if (serve_) {
      notes.push_back(fmt::format(
          "serve {}: weights {} ({:.4f} B per linear weight), KV cache {}, context {} tokens x "
          "batch {}",
          model_.name, infer_.weights.name, infer_.weights.bytes_per_weight(), o_.kv_precision, o_.context, o_.batch));
    } else {
      notes.push_back(fmt::format(
          "train {} ({}): seq {}, micro-batch {}, recompute {}, ZeRO {}{}, sequence parallel {}", model_.name,
          o_.finetune == "full" ? fmt::format("{} mixed precision", o_.precision)
                                : fmt::format("{} rank {}", o_.finetune, o_.lora_rank),
          o_.seq, o_.micro_batch, o_.recompute, o_.zero, o_.distributed_optimizer ? ", distributed optimizer" : "",
          o_.no_sequence_parallel ? "off" : "on (with TP > 1)"));
    }
    notes.push_back(
        "GiB = 2^30 bytes. Smallest GPU count first; at equal count fewer pipeline stages, then less TP (TP stays "
        "within 8 GPUs).");
    if (!serve_ && !o_.dp && o_.zero == 0 && !o_.distributed_optimizer) {
      notes.push_back(
          "DP 1: without ZeRO or a distributed optimizer, data parallelism replicates everything and "
          "does not lower memory per GPU.");
    }
    return notes;
  }

 private:
  const PlanOptions& o_;
  const workloads::ModelInfo& model_;
  const workloads::ModelArch& arch_;
  bool serve_ = true;
  model::InferenceConfig infer_;
  model::TrainingConfig train_;
};

struct GpuPlan {
  const specs::GpuSpec* gpu = nullptr;
  double capacity = 0;
  std::optional<Candidate> chosen;
  std::vector<Candidate> tried;  // in order, up to and including the chosen one
};

GpuPlan plan_gpu(const Planner& planner, const specs::GpuSpec& gpu, const std::vector<Parallelism>& layouts) {
  GpuPlan plan;
  plan.gpu = &gpu;
  plan.capacity = model::gpu_capacity_bytes(gpu);
  for (const auto& par : layouts) {
    Candidate c = planner.evaluate(par, plan.capacity);
    plan.tried.push_back(c);
    if (c.fits()) {
      plan.chosen = std::move(c);
      break;
    }
  }
  return plan;
}

// The last layout that was possible for the model (the largest tried), for a "does not fit" row.
const Candidate* largest_possible(const GpuPlan& plan) {
  for (auto it = plan.tried.rbegin(); it != plan.tried.rend(); ++it) {
    if (it->memory) return &*it;
  }
  return nullptr;
}

Table summary_table(const Planner& planner, const std::vector<GpuPlan>& plans) {
  const bool serve = planner.serve();
  Table t;
  t.key = "plan";
  t.title = "What fits where (memory per GPU)";
  t.add_column("gpu", "GPU");
  t.add_column("memory_gib", "Memory", "GiB", 1, Align::right);
  t.add_column("fits", "Fits");
  t.add_column("gpus", "GPUs", "", -1, Align::right);
  t.add_column("tp", "TP", "", -1, Align::right);
  t.add_column("pp", "PP", "", -1, Align::right);
  t.add_column("dp", "DP", "", -1, Align::right);
  t.add_column("weights_gib", "Weights", "GiB", 2, Align::right);
  if (serve) {
    t.add_column("kv_cache_gib", "KV cache", "GiB", 2, Align::right);
  } else {
    t.add_column("grads_optimizer_gib", "Grads+optim", "GiB", 2, Align::right);
  }
  t.add_column("activations_gib", "Activations", "GiB", 2, Align::right);
  t.add_column("other_gib", "Other", "GiB", 2, Align::right);
  t.add_column("total_gib", "Total", "GiB", 2, Align::right);
  t.add_column("usable_gib", "Usable", "GiB", 2, Align::right);
  if (serve) {
    t.add_column("kv_capacity_tokens", "KV room", "tokens", -1, Align::right);
    t.add_column("max_batch", "Max batch", "seq", -1, Align::right);
  }
  t.add_column("reason", "Why not");
  for (const auto& plan : plans) {
    const Candidate* c = plan.chosen ? &*plan.chosen : largest_possible(plan);
    std::vector<Cell> row{plan.gpu->name, to_gib(plan.capacity), plan.chosen.has_value()};
    if (!c) {
      for (int i = 0; i < 4; ++i) row.emplace_back();
      for (int i = 0; i < 6; ++i) row.emplace_back();
      if (serve) {
        row.emplace_back();
        row.emplace_back();
      }
      row.emplace_back(plan.tried.empty() ? std::string("no layout to try") : plan.tried.back().reason);
      t.add_row(std::move(row));
      continue;
    }
    const auto& m = *c->memory;
    double weights = 0, second = 0, act = 0;
    for (const auto& term : m.terms) {
      if (term.key.starts_with("weights") || term.key == "zero3_prefetch") {
        weights += term.bytes;
      } else if (serve ? term.key == "kv_cache"
                       : (term.key == "gradients" || term.key == "optimizer" || term.key == "adapters")) {
        second += term.bytes;
      } else if (term.key == "activations" || term.key == "recompute_working_set" || term.key == "logits" ||
                 term.key == "embedding_dropout") {
        act += term.bytes;
      }
    }
    const double other = m.total_bytes - weights - second - act;
    row.insert(row.end(), {Cell{c->par.gpus()}, Cell{c->par.tp}, Cell{c->par.pp}, Cell{c->par.dp}, to_gib(weights),
                           to_gib(second), to_gib(act), to_gib(other), to_gib(m.total_bytes), to_gib(m.usable_bytes)});
    if (serve) {
      row.emplace_back(static_cast<std::int64_t>(std::floor(c->kv_capacity_tokens)));
      row.emplace_back(c->max_batch);
    }
    row.emplace_back(plan.chosen ? std::string() : c->reason);
    t.add_row(std::move(row));
  }
  t.notes = planner.request_notes();
  t.notes.push_back(
      "Other: CUDA context, NCCL buffers, allocator fragmentation. A row that does not fit shows the largest layout "
      "tried; `--gpu NAME` prints the breakdown term by term and every layout tried.");
  return t;
}

Table breakdown_table(const GpuPlan& plan, const Candidate& c) {
  const auto& m = *c.memory;
  Table t;
  t.key = "breakdown";
  t.title = fmt::format("Per-GPU memory on {} at {} ({}{})", plan.gpu->name, layout(c.par), m.stage,
                        c.fits() ? "" : ", does not fit");
  t.add_column("term", "Term");
  t.add_column("label", "What");
  t.add_column("gib", "Memory", "GiB", 3, Align::right);
  t.add_column("bytes", "Bytes", "", 0, Align::right);
  t.add_column("formula", "Formula");
  for (const auto& term : m.terms) {
    t.add_row({term.key, term.label, to_gib(term.bytes * 10) / 10, std::round(term.bytes), term.formula});
  }
  t.add_row({std::string("total"), std::string("sum of the terms"), to_gib(m.total_bytes * 10) / 10,
             std::round(m.total_bytes), std::string()});
  t.add_row(
      {std::string("usable"), std::string("GPU memory the framework may use"), to_gib(m.usable_bytes * 10) / 10,
       std::round(m.usable_bytes),
       fmt::format("{:.2f} GiB capacity ({}) x memory fraction", m.capacity_bytes / kGiB,
                   plan.gpu->memory_type.starts_with("HBM") ? "HBM: memory_gb x 2^30" : "GDDR: memory_gb x 1e9")});
  t.add_row({std::string("headroom"), std::string("usable - total"), to_gib(m.headroom_bytes() * 10) / 10,
             std::round(m.headroom_bytes()), std::string()});
  for (const auto& a : m.assumptions) t.notes.push_back("assumption: " + a);
  return t;
}

Table candidates_table(const GpuPlan& plan) {
  Table t;
  t.key = "layouts";
  t.title = fmt::format("Layouts tried on {}", plan.gpu->name);
  t.add_column("gpus", "GPUs", "", -1, Align::right);
  t.add_column("tp", "TP", "", -1, Align::right);
  t.add_column("pp", "PP", "", -1, Align::right);
  t.add_column("dp", "DP", "", -1, Align::right);
  t.add_column("total_gib", "Needs", "GiB", 2, Align::right);
  t.add_column("usable_gib", "Usable", "GiB", 2, Align::right);
  t.add_column("fits", "Fits");
  t.add_column("reason", "Why not");
  for (const auto& c : plan.tried) {
    t.add_row({c.par.gpus(), c.par.tp, c.par.pp, c.par.dp, c.memory ? Cell{to_gib(c.memory->total_bytes)} : Cell{},
               c.memory ? Cell{to_gib(c.memory->usable_bytes)} : Cell{}, c.fits(), c.reason});
  }
  return t;
}

void run_plan(AppContext& ctx, const PlanOptions& o) {
  if (o.task != "serve" && o.task != "train") {
    throw UsageError(fmt::format("--task: '{}' is not serve or train", o.task));
  }
  for (auto [value, flag] :
       {std::pair{o.tp, "--tp"}, std::pair{o.pp, "--pp"}, std::pair{o.dp, "--dp"}, std::pair{o.ep, "--ep"}}) {
    if (value) positive(*value, flag);
  }
  positive(o.context, "--context");
  positive(o.batch, "--batch");
  positive(o.kv_block, "--kv-block");
  positive(o.seq, "--seq");
  positive(o.micro_batch, "--micro-batch");
  positive(o.interleave, "--interleave");
  positive(o.lora_rank, "--lora-rank");
  if (o.max_gpus < 0) throw UsageError(fmt::format("--max-gpus: must be at least 1, got {}", o.max_gpus));
  if (o.prefill_chunk < 0) throw UsageError(fmt::format("--prefill-chunk: must be >= 0, got {}", o.prefill_chunk));
  if (o.micro_batches < 0) throw UsageError(fmt::format("--micro-batches: must be >= 0, got {}", o.micro_batches));
  if (!(o.memory_fraction > 0 && o.memory_fraction <= 1)) {
    throw UsageError(fmt::format("--memory-fraction: must lie in (0, 1], got {}", o.memory_fraction));
  }
  const auto& model = ctx.models().get(o.model);
  if (model.arch.kind == workloads::ModelKind::encoder && o.task == "serve") {
    // Encoders keep no KV cache; the model still applies (weights, activations).
  }
  const Planner planner(o, model);
  const auto layouts = planner.layouts();
  std::vector<const specs::GpuSpec*> gpus;
  // A precision the GPU lacks (no dense peak in the spec DB, e.g. FP8 on A100) is no plan: memory alone
  // would call it a fit. 16-bit weights are checked by nothing: BF16 runs as FP16 (same bytes) on V100/T4.
  const bool check_precision = o.precision != "bf16" && o.precision != "fp16";
  std::vector<std::string> unsupported;
  if (!o.gpu.empty()) {
    gpus.push_back(&ctx.specs().get(o.gpu));
    if (const auto why = check_precision ? advise::precision_unsupported(*gpus.front(), o.precision) : "";
        !why.empty()) {
      throw UsageError("--precision: " + why);
    }
  } else {
    for (const auto& g : ctx.specs().all()) {
      if (const auto why = check_precision ? advise::precision_unsupported(g, o.precision) : ""; !why.empty()) {
        unsupported.push_back(g.name);
      } else {
        gpus.push_back(&g);
      }
    }
  }
  std::vector<GpuPlan> plans;
  for (const auto* g : gpus) plans.push_back(plan_gpu(planner, *g, layouts));
  if (o.gpu.empty()) {
    // Fewest GPUs first; what does not fit at the end.
    std::stable_sort(plans.begin(), plans.end(), [](const GpuPlan& a, const GpuPlan& b) {
      if (a.chosen.has_value() != b.chosen.has_value()) return a.chosen.has_value();
      if (a.chosen && b.chosen && a.chosen->par.gpus() != b.chosen->par.gpus()) {
        return a.chosen->par.gpus() < b.chosen->par.gpus();
      }
      return false;
    });
  }
  std::vector<Table> tables{summary_table(planner, plans)};
  if (!unsupported.empty()) {
    std::string names;
    for (const auto& n : unsupported) names += (names.empty() ? "" : ", ") + n;
    tables.front().notes.push_back(fmt::format("Not listed: no {} dense peak in the spec DB: {}", o.precision, names));
  }
  if (!o.gpu.empty()) {
    const GpuPlan& plan = plans.front();
    const Candidate* shown = plan.chosen ? &*plan.chosen : largest_possible(plan);
    if (shown) tables.push_back(breakdown_table(plan, *shown));
    tables.push_back(candidates_table(plan));
  }
  ctx.out << report::render(tables, ctx.format());
}

}  // namespace

void register_plan_command(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* plan = app.add_subcommand(
      "plan", "What fits where: the fewest GPUs and the parallel layout whose memory holds a model (serve or train)");
  plan->add_option("--model", o->model, "Model name or alias from the catalog (gpuscout models list)")->required();
  plan->add_option("--task", o->task, "serve or train")->required();
  plan->add_option("--gpu", o->gpu, "One GPU type (default: every GPU of the spec database)");
  plan->add_option("--precision", o->precision,
                   "Weights: bf16, fp16, fp32, fp8, int8, int4 (serve; int4 = group-128 GPTQ/AWQ); bf16 or fp8 "
                   "(train)");
  plan->add_option("--tp", o->tp, "Tensor-parallel degree (default: searched, 1-8)");
  plan->add_option("--pp", o->pp, "Pipeline-parallel degree (default: searched)");
  plan->add_option("--dp", o->dp, "Data-parallel degree (train; default: searched when ZeRO shards states, else 1)");
  plan->add_option("--ep", o->ep, "Expert-parallel degree for MoE models (default 1: experts split over TP)");
  plan->add_option("--max-gpus", o->max_gpus, "Largest GPU count to try (default 64 serve, 4096 train)");
  // Flags of one task, recorded as they are registered so that the check below knows every one.
  auto task_flags = std::make_shared<std::map<std::string, std::vector<std::string>>>();
  auto task_option = [&](const char* task, const char* flag, auto& value, const char* help) {
    plan->add_option(flag, value, fmt::format("{}: {}", task, help));
    (*task_flags)[task].emplace_back(flag);
  };
  auto task_flag = [&](const char* task, const char* flag, bool& value, const char* help) {
    plan->add_flag(flag, value, fmt::format("{}: {}", task, help));
    (*task_flags)[task].emplace_back(flag);
  };
  task_option("serve", "--context", o->context, "tokens per sequence, prompt + output");
  task_option("serve", "--batch", o->batch, "sequences resident at once");
  task_option("serve", "--kv-precision", o->kv_precision, "KV cache bf16, fp16 or fp8");
  task_option("serve", "--kv-block", o->kv_block, "paged KV block in tokens (1 = no paging)");
  task_option("serve", "--prefill-chunk", o->prefill_chunk,
              "largest prefill chunk in tokens (0 = min(ctx*batch, 8192))");
  task_option("serve", "--memory-fraction", o->memory_fraction, "share of GPU memory the engine may use");
  task_option("train", "--seq", o->seq, "sequence length");
  task_option("train", "--micro-batch", o->micro_batch, "micro-batch size per GPU");
  task_option("train", "--micro-batches", o->micro_batches, "micro-batches per step per pipeline (0 = PP)");
  task_option("train", "--recompute", o->recompute, "none, selective or full activation recompute");
  task_option("train", "--zero", o->zero, "DeepSpeed ZeRO stage 0-3");
  task_flag("train", "--distributed-optimizer", o->distributed_optimizer,
            "Megatron distributed optimizer (FP32 grads, optimizer sharded over DP)");
  task_flag("train", "--no-sequence-parallel", o->no_sequence_parallel, "no sequence parallelism with TP");
  task_option("train", "--interleave", o->interleave, "virtual pipeline stages per GPU (interleaved 1F1B)");
  task_option("train", "--finetune", o->finetune, "full, lora or qlora");
  task_option("train", "--lora-rank", o->lora_rank, "LoRA rank");
  plan->fallthrough();
  plan->callback([&ctx, o, plan, task_flags] {
    // A flag of the other task is a mistake worth saying rather than ignoring.
    if (o->task == "serve" || o->task == "train") {
      const std::string other = o->task == "serve" ? "train" : "serve";
      for (const std::string& flag : (*task_flags)[other]) {
        if (plan->count(flag) > 0) {
          throw UsageError(fmt::format("{} applies to --task {}, not --task {}", flag, other, o->task));
        }
      }
    }
    run_plan(ctx, *o);
  });
}

}  // namespace gpuscout::cli
