#include "train_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/timing.hpp"
#include "gpuscout/train/train_cost.hpp"
#include "train_step.hpp"

namespace gpuscout::cuda::train {

namespace core = gpuscout::train;

namespace {

constexpr double kGradientTolerance = 3e-2;
constexpr double kOutputTolerance = 1e-2;
constexpr double kLossTolerance = 1e-2;
constexpr double kRepeatTolerance = 1e-5;
constexpr int kE4m3MantissaBits = 3, kE5m2MantissaBits = 2;
constexpr double kFp8ToleranceFactor = 3;  // several GEMMs between the loss and a gradient (train_check.hpp)

struct Tolerances {
  double gradient, output, loss;
};

Tolerances tolerances(TrainPrecision precision) {
  if (precision == TrainPrecision::bf16) return {kGradientTolerance, kOutputTolerance, kLossTolerance};
  const double e4m3 = fp8_rounding_rms(kE4m3MantissaBits), e5m2 = fp8_rounding_rms(kE5m2MantissaBits);
  const double forward_gemm = std::sqrt(2 * e4m3 * e4m3), backward_gemm = std::hypot(e4m3, e5m2);
  return {kFp8ToleranceFactor * backward_gemm, kFp8ToleranceFactor * forward_gemm, kFp8ToleranceFactor * forward_gemm};
}

template <typename Reference>
double relative_l2(const std::vector<float>& gpu, const Reference& cpu) {
  if (gpu.size() != cpu.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double d = static_cast<double>(gpu[i]) - static_cast<double>(cpu[i]);
    diff += d * d;
    norm += static_cast<double>(cpu[i]) * static_cast<double>(cpu[i]);
  }
  return norm > 0 ? std::sqrt(diff / norm) : INFINITY;  // an all-zero reference is itself a failure
}

std::vector<std::vector<float>> gradients(const TrainStep& step, const core::TrainShape& s) {
  std::vector<std::vector<float>> out;
  for (int l = 0; l < s.layers; ++l) {
    for (core::LayerTensor t : core::kAllLayerTensors) out.push_back(step.layer_gradient(l, t));
  }
  out.push_back(step.input_gradient());
  return out;
}

}  // namespace

bool TrainCheck::passed() const {
  return allocation_matches && std::all_of(checks.begin(), checks.end(), [](const auto& c) { return c.passed(); });
}

const TensorCheck& TrainCheck::worst() const {
  return *std::max_element(checks.begin(), checks.end(), [](const TensorCheck& a, const TensorCheck& b) {
    const double ra = std::isnan(a.error) ? INFINITY : a.error / a.tolerance;
    const double rb = std::isnan(b.error) ? INFINITY : b.error / b.tolerance;
    return ra < rb;
  });
}

double fp8_rounding_rms(int mantissa_bits) {
  return std::ldexp(1.0, -(mantissa_bits + 1)) / std::sqrt(3.0);
}

core::TrainShape tiny_check_shape() {
  core::TrainShape s;
  s.model = infer::TransformerConfig::tiny();
  s.layers = 2;
  s.micro_batch = 2;
  s.seq = 64;
  return s;
}

TrainCheck check_train_step(const core::TrainShape& s, TrainPrecision precision, TrainAttention attention) {
  const core::TrainInputs inputs = core::make_train_inputs(s);
  const core::TrainGradients ref = core::reference_gradients(s, inputs);
  TrainStep step(s, precision, attention);
  TrainCheck result;
  const Tolerances tol = tolerances(precision);
  result.allocation_matches =
      step.allocated_bytes() ==
      core::train_step_memory(s, attention).total() + (precision == TrainPrecision::fp8 ? fp8_buffer_bytes(s) : 0);
  Stream stream;
  std::vector<std::vector<float>> first;
  for (int round = 0; round < 2; ++round) {  // the second step must repeat the first
    step.forward(stream.get());
    step.backward(stream.get());
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    if (round == 0) first = gradients(step, s);
  }
  const auto second = gradients(step, s);
  result.gpu_loss = step.loss();
  result.cpu_loss = ref.loss;
  double loss_scale = 0;
  for (std::size_t i = 0; i < ref.output.size(); ++i) loss_scale += std::abs(ref.output[i] * inputs.loss_projection[i]);
  result.checks.push_back({"loss", std::abs(result.gpu_loss - ref.loss) / loss_scale, tol.loss});
  result.checks.push_back({"output", relative_l2(step.output(), ref.output), tol.output});
  std::size_t at = 0;
  double repeat = 0;
  for (int l = 0; l < s.layers; ++l) {
    for (core::LayerTensor t : core::kAllLayerTensors) {
      result.checks.push_back({fmt::format("layer {} d{}", l, core::to_string(t)),
                               relative_l2(second[at], core::tensor_of(ref.layers[l], t)), tol.gradient});
      repeat = std::max(repeat, relative_l2(second[at], first[at]));
      ++at;
    }
  }
  result.checks.push_back({"input", relative_l2(second[at], ref.input), tol.gradient});
  repeat = std::max(repeat, relative_l2(second[at], first[at]));
  result.checks.push_back({"step 2 vs step 1", repeat, kRepeatTolerance});
  return result;
}

}  // namespace gpuscout::cuda::train
