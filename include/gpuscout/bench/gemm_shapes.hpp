#pragma once
// Pure logic of the GEMM benchmark (backends/cuda/benchmarks/gemm.cu), kept here so CI tests it
// without a GPU: precisions and what each needs, FLOP and byte accounting, the shape lists that
// the list-valued flags (--gemm-sizes, --gemm-m, --gemm-shapes, --precisions) select, the buffer
// rotation count and the verification tolerance per precision.
//
// Shape convention (PyTorch's nn.Linear): Y[m x n] = X[m x k] * W[n x k]^T, so m is the token
// count of an LLM layer, n its output features and k its input features. FLOPs = 2 m n k.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuscout::specs {
struct GpuSpec;
}

namespace gpuscout::bench::gemm {

enum class GemmPrecision { fp64, fp32, tf32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8 };

inline constexpr GemmPrecision kAllGemmPrecisions[] = {
    GemmPrecision::fp64, GemmPrecision::fp32,     GemmPrecision::tf32,     GemmPrecision::fp16,
    GemmPrecision::bf16, GemmPrecision::fp8_e4m3, GemmPrecision::fp8_e5m2, GemmPrecision::int8};

struct PrecisionInfo {
  std::string_view key;          // in record keys and --precisions: "bf16", "fp8", "fp8_e5m2"
  std::string_view description;  // "BF16 x BF16 -> BF16, FP32 accumulate"
  int a_bytes = 0, b_bytes = 0;  // bytes per element of X and W
  int d_bytes = 0;               // bytes per element of Y
  int min_cc_major = 0, min_cc_minor = 0;
  bool integer = false;       // TOP/s instead of TFLOP/s, exact verification
  bool requires_tn = false;   // cuBLASLt accepts only the TN layout (FP8, INT8)
  std::string_view spec_key;  // the spec DB's peak_dense key it is compared with ("fp64_tensor", "bf16", ...)
  double tolerance = 0;       // max |y - ref| / rms(ref) over the checked elements
};

const PrecisionInfo& info(GemmPrecision precision);
std::string_view to_string(GemmPrecision precision);
// Case-insensitive; also accepts aliases ("fp8_e4m3", "e4m3", "float16", "half", "float32" ...).
std::optional<GemmPrecision> parse_precision(std::string_view text);
// nullopt when a GPU of this compute capability runs the precision on its tensor cores (or, for
// FP32/FP64, at all); otherwise why not, e.g. "FP8 needs compute capability 8.9+".
std::optional<std::string> unsupported_reason(GemmPrecision precision, int cc_major, int cc_minor);
// The spec database's dense peak this precision's throughput is compared with (PrecisionInfo::
// spec_key; FP64 falls back from the tensor-core to the plain FP64 figure); nullopt when `spec`
// is null or lacks the figure.
std::optional<double> dense_peak(const specs::GpuSpec* spec, GemmPrecision precision);
// "TOP/s" for INT8, else "TFLOP/s".
std::string_view rate_unit(GemmPrecision precision);

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::string model;  // empty for plain sizes
  std::string layer;  // "qkv", "o", "gate_up", "gate", "up", "down"; empty for plain sizes
  // Spelled out: this header is shared with .cu files, which build as C++17.
  bool operator==(const GemmShape& o) const {
    return m == o.m && n == o.n && k == o.k && model == o.model && layer == o.layer;
  }
};

// 2 m n k (a multiply-add counts as two operations).
double flops(const GemmShape& shape);
// Bytes of X, W and Y once each at this precision: the fewest any implementation must move.
std::int64_t operand_bytes(const GemmShape& shape, GemmPrecision precision);
// "gemm/bf16/m8192_n8192_k8192", "gemm/fp8/llama-3.1-8b.qkv/m128_n6144_k4096".
std::string record_key(GemmPrecision precision, const GemmShape& shape);

// The dimensions of a dense transformer layer that its GEMMs depend on.
struct TransformerDims {
  std::string model;  // "llama-3.1-8b"
  std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn_hidden = 0;
  std::int64_t vocab = 0;  // rows of the LM head (0: unknown)
  bool gated_mlp = true;   // gate + up + down (SwiGLU) vs up + down
  std::string source;      // where the figures come from
};

// Llama-3.1-8B (hidden 4096, 32 heads, 8 KV heads, head_dim 128, FFN 14336, SwiGLU, vocab 128256), from
// meta-llama/Llama-3.1-8B config.json; the fallback when the model catalog cannot be read.
TransformerDims llama31_8b();
inline constexpr std::string_view kDefaultModel = "llama-3.1-8b";

// The layer dimensions of a model of the catalog (data/models, or $GPUSCOUT_DATA), looked up by
// name or alias. Throws NotFoundError for an unknown model, UsageError for one whose layers are
// not plain dense GQA/MHA blocks (MoE, MLA) or that is no decoder.
TransformerDims catalog_dims(std::string_view model);

// The layer names layer_shapes understands, and the default selection.
inline constexpr std::string_view kLayerNames[] = {"qkv", "o", "gate_up", "gate", "up", "down", "lm_head"};
std::vector<std::string> default_layers();
// One shape per (layer, token count): qkv N = (heads + 2 kv_heads) head_dim, K = hidden; o
// N = hidden, K = heads head_dim; gate_up (fused) N = 2 ffn, K = hidden; gate / up N = ffn;
// down N = hidden, K = ffn; lm_head N = vocab, K = hidden (the logits; not in the default selection,
// whose records older runs compare with). Throws UsageError for an unknown layer name, gate_up/gate on
// a model without a gated MLP, or lm_head without a vocabulary size.
std::vector<GemmShape> layer_shapes(const TransformerDims& dims, const std::vector<std::string>& layers,
                                    const std::vector<std::int64_t>& tokens);

enum class PlanMode { quick, standard, full };

// What one run of the benchmark measures.
struct GemmPlan {
  std::vector<GemmPrecision> precisions;      // for the square (and --gemm-sizes) shapes
  std::vector<GemmShape> sizes;               // plain sizes
  std::vector<GemmPrecision> llm_precisions;  // for the LLM layer shapes
  std::vector<GemmShape> llm_shapes;
};

// Parses "8192" (square) or "MxNxK" ("16x4096x4096"); throws UsageError.
GemmShape parse_size(std::string_view text);
// Parses positive integers ("1", "16", "4k" = 4096 is not accepted: plain digits only).
std::int64_t parse_positive(std::string_view text, std::string_view flag);

// Defaults per mode, overridden by the list-valued flags in `lists`:
//   gemm-sizes   plain sizes, "N" (square) or "MxNxK" (default quick: 4096, 8192; otherwise 4096,
//                8192, 16384; "none": skip)
//   gemm-shapes  layer names (qkv, o, gate_up, gate, up, down, lm_head; default qkv, o, gate_up, down)
//                and/or explicit "MxNxK" shapes; given alone, it replaces the default sizes, and
//                with no layer name (and no gemm-m) it skips the LLM shapes
//   gemm-m       token counts of the LLM shapes (default 1, 16, 128, 1024, 4096, 16384; quick:
//                1, 128, 4096; "none": skip the LLM shapes)
//   precisions   all listed precisions, squares and LLM shapes alike (default: every precision
//                for the sizes; bf16, fp8 for the LLM shapes unless the mode is full)
// Unknown names or malformed numbers throw UsageError. `dims` gives the model's layer sizes.
GemmPlan make_plan(PlanMode mode, const std::map<std::string, std::vector<std::string>>& lists,
                   const TransformerDims& dims);

// How many copies of (X, W, Y) to rotate through so that the rotation's bytes exceed `l2_bytes`
// `l2_multiple` times (so no timed call finds its operands in L2), but never more than
// `max_sets` copies nor more than `memory_budget_bytes` in all. At least 1.
int rotation_sets(std::int64_t set_bytes, std::int64_t l2_bytes, double l2_multiple, std::int64_t memory_budget_bytes,
                  int max_sets);

// Max of |y - ref| / rms(ref) over the checked elements: the error measure verification uses
// (robust where a reference element is near zero). NaN when any y is NaN or rms(ref) is 0.
double max_error_vs_rms(const std::vector<double>& values, const std::vector<double>& reference);

}  // namespace gpuscout::bench::gemm
