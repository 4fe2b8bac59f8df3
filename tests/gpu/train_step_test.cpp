// The CUDA train step (backends/cuda/train) against the FP64 CPU reference (train_reference.hpp):
// loss, output and the gradient of every weight and of the input, within the tolerances stated in
// train_check.hpp (gradients: relative L2 error <= 3%); then the same in FP8 mode (E4M3/E5M2 linear
// GEMMs, gradients <= 24%, derived there from the formats' mantissa bits) on compute capability
// 8.9+. Attention is the default flash kernels (train_attention.hpp) in every case; the BF16 cases
// run once more with the materialized attention (the A/B alternative). A third shape (head_dim 128,
// sequence 200) reaches the flash kernels' partial last tiles: 200 = 3 x 64 + 8 queries and keys in
// the backward, 128 + 72 queries in the forward. Exit 77 without a GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>

#include "train_check.hpp"

namespace {

using gpuscout::cuda::train::TrainAttention;
using gpuscout::cuda::train::TrainPrecision;
using gpuscout::train::TrainShape;

bool run_case(const char* name, const TrainShape& s, TrainPrecision precision,
              TrainAttention attention = TrainAttention::flash) {
  std::printf("%s (%s attention): %d layers, hidden %d, %d/%d heads of %d, FFN %d, %d x %d tokens\n", name,
              gpuscout::train::to_string(attention), s.layers, s.model.hidden, s.model.heads, s.model.kv_heads,
              s.model.head_dim, s.model.ffn_hidden, s.micro_batch, s.seq);
  const auto result = gpuscout::cuda::train::check_train_step(s, precision, attention);
  std::printf("  loss: GPU %.6f, CPU %.6f; allocation %s train_step_memory\n", result.gpu_loss, result.cpu_loss,
              result.allocation_matches ? "matches" : "DIFFERS FROM");
  for (const auto& c : result.checks) {
    std::printf("  %-22s %.2e (<= %.2e) %s\n", c.what.c_str(), c.error, c.tolerance, c.passed() ? "ok" : "FAIL");
  }
  return result.passed();
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  try {
    const TrainShape tiny = gpuscout::cuda::train::tiny_check_shape();  // 4 query / 2 KV heads of 32
    // One KV head for four query heads of 64 and a sequence of 96 (row strides that give cuBLASLt
    // less than 256-byte alignment).
    TrainShape wide = tiny;
    wide.model.hidden = 256;
    wide.model.kv_heads = 1;
    wide.model.head_dim = 64;
    wide.model.ffn_hidden = 512;
    wide.layers = 1;
    wide.micro_batch = 1;
    wide.seq = 96;
    // Two query heads per KV head of 128, two sequences of 200.
    TrainShape long_heads = tiny;
    long_heads.model.hidden = 512;
    long_heads.model.heads = 4;
    long_heads.model.kv_heads = 2;
    long_heads.model.head_dim = 128;
    long_heads.model.ffn_hidden = 512;
    long_heads.layers = 1;
    long_heads.micro_batch = 2;
    long_heads.seq = 200;
    bool ok = true;
    for (const TrainPrecision p : {TrainPrecision::bf16, TrainPrecision::fp8}) {
      const bool fp8 = p == TrainPrecision::fp8;
      if (fp8) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major * 10 + prop.minor < 89) {
          std::puts("FP8: compute capability below 8.9, skipped");
          break;
        }
      }
      ok = run_case(fp8 ? "tiny fp8" : "tiny", tiny, p) && ok;
      ok = run_case(fp8 ? "gqa-4:1 fp8" : "gqa-4:1", wide, p) && ok;
      if (!fp8) {
        ok = run_case("d128-s200", long_heads, p) && ok;
        ok = run_case("tiny", tiny, p, TrainAttention::materialized) && ok;
        ok = run_case("gqa-4:1", wide, p, TrainAttention::materialized) && ok;
      }
    }
    std::puts(ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_test: %s\n", e.what());
    return 1;
  }
}
