// Pins the memory formulas of include/gpuscout/model/memory.hpp to their published forms:
// Korthikanti et al. 2022 activations, the ZeRO paper's model-state figures, KV-cache sizes.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/memory.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::model {
namespace {

class MemoryModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    specs_ = new specs::SpecDb(specs::SpecDb::load(data::DataSource::embedded()));
    models_ = new workloads::ModelCatalog(workloads::ModelCatalog::load(data::DataSource::embedded()));
  }
  static void TearDownTestSuite() {
    delete specs_;
    delete models_;
  }
  static const workloads::ModelArch& arch(const char* name) { return models_->get(name).arch; }
  static specs::SpecDb* specs_;
  static workloads::ModelCatalog* models_;
};
specs::SpecDb* MemoryModelTest::specs_ = nullptr;
workloads::ModelCatalog* MemoryModelTest::models_ = nullptr;

// GPT-3 175B as Korthikanti et al. model it: MHA, plain MLP of 4h, LayerNorm, dropout.
workloads::ModelArch gpt3_like() {
  workloads::ModelArch a;
  a.layers = 96;
  a.hidden = 12288;
  a.heads = 96;
  a.kv_heads = 96;
  a.head_dim = 128;
  a.ffn_hidden = 4 * 12288;
  a.gated_mlp = false;
  a.activation = "gelu";
  a.norm = workloads::NormType::layernorm;
  a.position = workloads::PositionType::learned;
  a.max_positions = 2048;
  a.vocab = 51200;
  return a;
}

TrainingConfig korthikanti(Recompute recompute, bool sp) {
  TrainingConfig c;
  c.seq = 2048;
  c.micro_batch = 1;
  c.recompute = recompute;
  c.sequence_parallel = sp;
  c.flash_attention = false;
  c.dropout = true;
  return c;
}

TEST(Korthikanti, NoParallelismIs34sbhPlus5as2b) {
  const auto a = gpt3_like();
  const double s = 2048, b = 1, h = 12288, heads = 96;
  const auto act = layer_activations(a, 1, korthikanti(Recompute::none, false));
  EXPECT_DOUBLE_EQ(act.stored, s * b * h * 34 + 5 * heads * s * s * b);
  EXPECT_DOUBLE_EQ(act.stored, s * b * h * (34 + 5 * heads * s / h));
}

TEST(Korthikanti, TensorParallelWithoutSequenceParallel) {
  const auto a = gpt3_like();
  const double s = 2048, b = 1, h = 12288, heads = 96, t = 8;
  const auto act = layer_activations(a, 8, korthikanti(Recompute::none, false));
  EXPECT_NEAR(act.stored, s * b * h * (10 + 24 / t + 5 * heads * s / (h * t)), 1e-3);
}

TEST(Korthikanti, SequenceParallelDividesEverythingByT) {
  const auto a = gpt3_like();
  const double s = 2048, b = 1, h = 12288, heads = 96, t = 8;
  EXPECT_NEAR(layer_activations(a, 8, korthikanti(Recompute::none, true)).stored,
              s * b * h * (34 + 5 * heads * s / h) / t, 1e-3);
  // Selective recompute drops the attention-score terms: 34·s·b·h/t.
  EXPECT_NEAR(layer_activations(a, 8, korthikanti(Recompute::selective, true)).stored, 34 * s * b * h / t, 1e-3);
  // Full recompute keeps the layer input only: 2·s·b·h/t.
  EXPECT_NEAR(layer_activations(a, 8, korthikanti(Recompute::full, true)).stored, 2 * s * b * h / t, 1e-3);
  // FlashAttention stores no s² tensors: none equals selective.
  auto flash = korthikanti(Recompute::none, true);
  flash.flash_attention = true;
  EXPECT_NEAR(layer_activations(a, 8, flash).stored, 34 * s * b * h / t, 1e-3);
}

TEST(Korthikanti, PipelineFirstStageHoldsPMicroBatchesOfItsLayers) {
  const auto a = gpt3_like();
  auto c = korthikanti(Recompute::selective, true);
  const Parallelism par{8, 8, 1, 1};
  const auto mem = training_memory(a, par, c, 80 * kGiB);
  const double per_layer = 34.0 * 2048 * 12288 / 8;
  // 96 / 8 = 12 layers x 8 micro-batches in flight = the whole model's layers (Korthikanti §4.2.3).
  EXPECT_EQ(mem.breakdown.stage, "first stage");
  EXPECT_NEAR(mem.breakdown.bytes_of("activations"), 96 * per_layer, 1);
  c.schedule = PipelineSchedule::interleaved;
  c.virtual_stages = 2;
  const auto inter = training_memory(a, par, c, 80 * kGiB);
  EXPECT_NEAR(inter.breakdown.bytes_of("activations"), 96 * per_layer * (1 + 7.0 / 16), 1);
}

TEST_F(MemoryModelTest, ZeroStagesShardModelStates) {
  const auto& llama = arch("llama-2-7b");
  TrainingConfig c;
  const Parallelism par{1, 1, 64, 1};
  auto states = [&](int stage, bool dist_opt = false) {
    c.zero_stage = stage;
    c.distributed_optimizer = dist_opt;
    const auto m = training_memory(llama, par, c, 80 * kGiB);
    const double psi = m.params_per_gpu;
    return std::array<double, 3>{m.breakdown.bytes_of("weights") / psi, m.breakdown.bytes_of("gradients") / psi,
                                 m.breakdown.bytes_of("optimizer") / psi};
  };
  using A = std::array<double, 3>;
  auto near = [](A got, A want) {
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << i;
  };
  near(states(0), A{2, 2, 12});                       // 16Ψ
  near(states(1), A{2, 2, 12.0 / 64});                // 2Ψ + 2Ψ + 12Ψ/d
  near(states(2), A{2, 2.0 / 64, 12.0 / 64});         // 2Ψ + 14Ψ/d
  near(states(3), A{2.0 / 64, 2.0 / 64, 12.0 / 64});  // 16Ψ/d
  near(states(0, true), A{2, 4, 12.0 / 64});          // Megatron distributed optimizer: 6Ψ + 12Ψ/d
}

TEST_F(MemoryModelTest, ZeroPaperFigureOneFor7Point5BOn64Gpus) {
  // Rajbhandari et al. 2019, Figure 1: Ψ = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
  const auto& llama = arch("llama-2-7b");
  TrainingConfig c;
  const Parallelism par{1, 1, 64, 1};
  const double psi_paper = 7.5e9;
  const double expected[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    c.zero_stage = stage;
    const auto m = training_memory(llama, par, c, 80 * kGiB);
    const double per_param =
        (m.breakdown.bytes_of("weights") + m.breakdown.bytes_of("gradients") + m.breakdown.bytes_of("optimizer")) /
        m.params_per_gpu;
    EXPECT_NEAR(per_param * psi_paper / 1e9, expected[stage], 0.1) << "ZeRO-" << stage;
  }
}

TEST_F(MemoryModelTest, Llama2_70BWithZero3On64Gpus) {
  // 16Ψ/64 of model states per GPU: 16 x 68.98e9 / 64 = 17.2 GB (DeepSpeed's estimate_zero3 formula).
  const auto& llama = arch("llama-2-70b");
  TrainingConfig c;
  c.zero_stage = 3;
  c.seq = 4096;
  c.recompute = Recompute::full;  // FSDP recipes for 70B checkpoint every layer
  const auto m = training_memory(llama, Parallelism{1, 1, 64, 1}, c, 80 * kGiB);
  const double total_params = static_cast<double>(workloads::count_params(llama).total);
  const double states =
      m.breakdown.bytes_of("weights") + m.breakdown.bytes_of("gradients") + m.breakdown.bytes_of("optimizer");
  EXPECT_NEAR(states, 16 * total_params / 64, 1);
  EXPECT_NEAR(states / 1e9, 17.2, 0.1);
  // Two layers gathered for the forward pass: 2 x 2 B x 0.856B params per layer = 3.4 GB.
  EXPECT_NEAR(m.breakdown.bytes_of("zero3_prefetch") / 1e9, 3.43, 0.05);
  // Full recompute keeps 2·s·b·h per layer: 80 x 2 x 4096 x 8192 = 5.4 GB; the total fits 80 GB.
  EXPECT_NEAR(m.breakdown.bytes_of("activations"), 80.0 * 2 * 4096 * 8192, 1);
  EXPECT_TRUE(m.breakdown.fits()) << m.breakdown.total_bytes / kGiB;
  // Without recompute (selective + FlashAttention) the same run needs 90 GB of activations: no fit.
  c.recompute = Recompute::selective;
  EXPECT_FALSE(training_memory(llama, Parallelism{1, 1, 64, 1}, c, 80 * kGiB).breakdown.fits());
}

TEST_F(MemoryModelTest, Llama2_7BKvCacheIs512KiBPerTokenAtFp16) {
  const auto& llama = arch("llama-2-7b");
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(llama, Parallelism{}, 2), 512 * 1024);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(llama, Parallelism{2, 1, 1, 1}, 2), 256 * 1024);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(llama, Parallelism{1, 2, 1, 1}, 2), 256 * 1024);
}

TEST_F(MemoryModelTest, GqaReplicatesKvHeadsBeyondTheirCountAndMlaNeverSplits) {
  const auto& l70 = arch("llama-3.1-70b");  // 80 layers, 8 KV heads of 128
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(l70, Parallelism{8, 1, 1, 1}, 2), 80 * 2 * 1 * 128 * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(l70, Parallelism{16, 1, 1, 1}, 2), 80 * 2 * 1 * 128 * 2);
  const auto& ds = arch("deepseek-v3");  // 61 layers x (512 + 64)
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(ds, Parallelism{1, 1, 1, 1}, 2), 61 * 576 * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(ds, Parallelism{8, 1, 1, 1}, 2), 61 * 576 * 2);
}

TEST_F(MemoryModelTest, InferenceBreakdownOfLlama2_7BOnH100) {
  const auto& llama = arch("llama-2-7b");
  InferenceConfig c;
  c.weights = parse_quantization("bf16", "--precision");
  c.context = 1000;  // rounds up to 63 blocks of 16 = 1008 tokens
  c.batch = 4;
  const double cap = gpu_capacity_bytes(specs_->get("h100"));
  EXPECT_DOUBLE_EQ(cap, 80 * kGiB);
  const auto m = inference_memory(llama, Parallelism{}, c, cap);
  const double params = static_cast<double>(workloads::count_params(llama).total);
  EXPECT_NEAR(m.breakdown.bytes_of("weights_linear") + m.breakdown.bytes_of("weights_other"), 2 * params, 1);
  EXPECT_DOUBLE_EQ(m.breakdown.bytes_of("kv_cache"), 4 * 1008 * 512.0 * 1024);
  EXPECT_EQ(m.breakdown.bytes_of("nccl_buffers"), 0);  // one GPU talks to nobody
  EXPECT_TRUE(m.breakdown.fits());
  EXPECT_DOUBLE_EQ(m.breakdown.usable_bytes, 0.9 * cap);
  // Everything but the KV cache, and what is left becomes KV capacity.
  const double rest = m.breakdown.total_bytes - m.breakdown.bytes_of("kv_cache");
  EXPECT_NEAR(m.kv_tokens_capacity, (0.9 * cap - rest) / (512 * 1024), 1e-6);
  EXPECT_EQ(m.max_batch_at_context, static_cast<std::int64_t>(std::floor(m.kv_tokens_capacity / 1008)));
}

TEST_F(MemoryModelTest, Int4KeepsGroupScalesAndSixteenBitEmbeddings) {
  const auto q = parse_quantization("int4", "--precision");
  EXPECT_DOUBLE_EQ(q.bytes_per_weight(), (4 + 20.0 / 128) / 8);
  const auto& l70 = arch("llama-3.1-70b");
  InferenceConfig c;
  c.weights = q;
  const auto m = inference_memory(l70, Parallelism{}, c, 80 * kGiB);
  const auto s = stage_params(l70, Parallelism{}, true, true);
  EXPECT_NEAR(m.breakdown.bytes_of("weights_linear"), s.linear * 0.51953125, 1);
  EXPECT_NEAR(m.breakdown.bytes_of("weights_other"), s.other * 2, 1);
  // 70B at ~4.16 bits: about 37 GB of linear weights plus 2.1 GB of embeddings and head.
  EXPECT_NEAR(m.breakdown.bytes_of("weights_linear") / 1e9, 35.2, 0.5);
}

TEST_F(MemoryModelTest, SeventyBInBf16NeedsMoreThanOneH100) {
  const auto& l70 = arch("llama-3.1-70b");
  InferenceConfig c;
  c.weights = parse_quantization("bf16", "--precision");
  const double cap = gpu_capacity_bytes(specs_->get("h100"));
  EXPECT_FALSE(inference_memory(l70, Parallelism{}, c, cap).breakdown.fits());
  // TP2: 70.6 GB (65.7 GiB) of weights per GPU fit 72 GiB usable, leaving a few GiB of KV cache.
  const auto tp2 = inference_memory(l70, Parallelism{2, 1, 1, 1}, c, cap);
  EXPECT_TRUE(tp2.breakdown.fits());
  EXPECT_GT(tp2.kv_tokens_capacity, 4096);
  EXPECT_LT(tp2.kv_tokens_capacity, 64 * 1024);
  const auto tp4 = inference_memory(l70, Parallelism{4, 1, 1, 1}, c, cap);
  EXPECT_TRUE(tp4.breakdown.fits());
  EXPECT_GT(tp4.breakdown.bytes_of("nccl_buffers"), 0);
}

TEST_F(MemoryModelTest, MoeExpertsSpreadOverEp) {
  const auto& mix = arch("mixtral-8x7b");
  const auto tp8 = stage_params(mix, Parallelism{8, 1, 1, 1}, true, true);
  const auto ep8 = stage_params(mix, Parallelism{8, 1, 1, 8}, true, true);
  EXPECT_NEAR(tp8.routed_experts, ep8.routed_experts, 1);  // 8 experts over 8 GPUs either way
  const auto ep2 = stage_params(mix, Parallelism{1, 1, 2, 2}, true, true);
  EXPECT_NEAR(ep2.routed_experts * 2, stage_params(mix, Parallelism{}, true, true).routed_experts, 1);
}

TEST_F(MemoryModelTest, LoraAndQloraTrainOnlyAdapters) {
  const auto& llama = arch("llama-2-7b");
  TrainingConfig c;
  c.fine_tune = FineTune::qlora;
  c.lora_rank = 64;
  c.seq = 512;
  const auto q = training_memory(llama, Parallelism{}, c, 24e9);
  // 7B in NF4 (4.127 bits) + 16-bit embeddings: about 3.6 + 0.5 GB.
  EXPECT_NEAR(q.breakdown.bytes_of("weights") / 1e9, 3.9, 0.3);
  EXPECT_EQ(q.breakdown.bytes_of("optimizer"), 0);
  // rank 64 on q,k,v,o,gate,up,down of 32 layers: 64 x (4 x 8192 + 3 x 15104) x 32 = 160M adapter params.
  EXPECT_NEAR(q.trainable_params_per_gpu, 64.0 * (4 * 8192 + 3 * 15104) * 32, 1);
  EXPECT_NEAR(q.breakdown.bytes_of("adapters"), 16 * q.trainable_params_per_gpu, 1);
  c.fine_tune = FineTune::lora;
  EXPECT_NEAR(training_memory(llama, Parallelism{}, c, 24e9).breakdown.bytes_of("weights"),
              2.0 * static_cast<double>(workloads::count_params(llama).total), 1);
}

TEST_F(MemoryModelTest, ImpossibleLayoutsNameTheFlag) {
  const auto& llama = arch("llama-2-7b");
  EXPECT_THROW(check_parallelism(llama, Parallelism{3, 1, 1, 1}), UsageError);
  try {
    check_parallelism(llama, Parallelism{3, 1, 1, 1});
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--tp 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("32 heads"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_parallelism(llama, Parallelism{1, 33, 1, 1}), UsageError);
  EXPECT_THROW(check_parallelism(llama, Parallelism{1, 1, 1, 2}), UsageError);  // no experts
  EXPECT_THROW(check_parallelism(llama, Parallelism{0, 1, 1, 1}), UsageError);
  EXPECT_THROW(parse_quantization("int3", "--precision"), UsageError);
  EXPECT_THROW(parse_recompute("some", "--recompute"), UsageError);
  TrainingConfig c;
  c.zero_stage = 4;
  EXPECT_THROW(training_memory(llama, Parallelism{}, c, 80e9), UsageError);
}

}  // namespace
}  // namespace gpuscout::model
