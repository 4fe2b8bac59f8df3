#pragma once
// Deterministic random weights, identical on the CPU and the GPU: every element is a pure function
// of (seed, tensor, layer, element index), so the GPU engine generates its weights in place, any
// tensor-parallel shard takes exactly the elements of the full tensor it holds, and the CPU
// reference rebuilds the same model. Serving speed depends on shapes, not on weight values.
//
// Layout: every matrix is [out, in] row-major (PyTorch Linear), y = x W^T; element index =
// row * in + col of the FULL (unsharded) matrix. Embedding and LM head are [vocab, hidden].
// Values are rounded to BF16 (round to nearest even) where the engine stores BF16.
//
// C++17 and CUDA-clean: host and device functions.
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GPUSCOUT_HD __host__ __device__
#else
#define GPUSCOUT_HD
#endif

namespace gpuscout::infer {

enum class WeightKind : std::uint32_t {
  embedding = 0,
  attn_norm = 1,
  wq = 2,
  wk = 3,
  wv = 4,
  wo = 5,
  mlp_norm = 6,
  w_gate = 7,
  w_up = 8,
  w_down = 9,
  final_norm = 10,
  lm_head = 11,
  qkv_bias = 12,  // one vector per layer over the full [Q | K | V] output columns
};

GPUSCOUT_HD inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The stream one tensor's elements come from. `layer` is 0 for tensors outside the layers.
GPUSCOUT_HD inline std::uint64_t tensor_stream(std::uint64_t seed, WeightKind kind, std::uint32_t layer) {
  return splitmix64(seed ^ splitmix64((static_cast<std::uint64_t>(kind) << 32) | layer));
}

// Uniform in [-1, 1) with 24 random bits.
GPUSCOUT_HD inline float uniform_pm1(std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t bits = splitmix64(stream + index * 0xD1B54A32D192ED03ull);
  return static_cast<float>(static_cast<std::int64_t>(bits >> 40) - (1ll << 23)) * (1.0f / 8388608.0f);
}

// Matrices: uniform with variance 1/in (scale sqrt(3/in)) so activations keep unit scale through
// every projection. Embedding rows: uniform in [-1, 1). Norm weights: 1 + uniform in [-0.1, 0.1).
// QKV biases: uniform in [-0.5, 0.5) (an exact halving, the same on both sides).
// On the GPU each operation is rounded on its own (__fmul_rn, __fadd_rn): nvcc would otherwise fuse
// 1 + 0.1 u into one FMA (rounded once) while the host rounds twice, and the bits would differ.
GPUSCOUT_HD inline float weight_value(std::uint64_t stream, WeightKind kind, std::uint64_t index, int in_features) {
  const float u = uniform_pm1(stream, index);
#if defined(__CUDA_ARCH__)
  const float norm = __fadd_rn(1.0f, __fmul_rn(0.1f, u));
  const float matrix = __fmul_rn(u, __fsqrt_rn(__fdiv_rn(3.0f, static_cast<float>(in_features))));
#else
  const float norm = 1.0f + 0.1f * u;
  const float matrix = u * sqrtf(3.0f / static_cast<float>(in_features));
#endif
  switch (kind) {
    case WeightKind::embedding:
      return u;
    case WeightKind::attn_norm:
    case WeightKind::mlp_norm:
    case WeightKind::final_norm:
      return norm;
    case WeightKind::qkv_bias:
      return 0.5f * u;
    default:
      return matrix;
  }
}

// BF16 as raw bits (round to nearest even; NaN stays NaN), so the CPU reference rounds exactly as
// __float2bfloat16_rn does on the GPU.
GPUSCOUT_HD inline std::uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

GPUSCOUT_HD inline float float_from_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

GPUSCOUT_HD inline std::uint16_t float_to_bf16_bits(float value) {
  std::uint32_t bits = float_bits(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  }
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

GPUSCOUT_HD inline float bf16_bits_to_float(std::uint16_t bits) {
  return float_from_bits(static_cast<std::uint32_t>(bits) << 16);
}

GPUSCOUT_HD inline float round_to_bf16(float value) {
  return bf16_bits_to_float(float_to_bf16_bits(value));
}

// FP8 E4M3 (the OCP "fn" variant Hopper's tensor cores use): exponent bias 7, 3 mantissa bits,
// subnormals down to 2^-9, largest finite 448, no infinities, 0x7F / 0xFF are NaN. Encoding
// rounds to nearest even and saturates to +-448 (CUDA's __NV_SATFINITE), in integer arithmetic so
// host and device produce the same bits.
inline constexpr float kE4m3Max = 448.0f;

GPUSCOUT_HD inline std::uint8_t float_to_e4m3_bits(float value) {
  std::uint32_t bits = float_bits(value);
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  bits &= 0x7FFFFFFFu;
  if (bits > 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Fu);   // NaN
  if (bits >= 0x43E00000u) return static_cast<std::uint8_t>(sign | 0x7Eu);  // >= 448 (and inf): saturate
  const int exponent = static_cast<int>(bits >> 23) - 127;
  if (exponent >= -6) {
    // Normal: keep 3 of the 23 mantissa bits, round to nearest even (a carry bumps the exponent).
    const std::uint32_t rounded = bits + 0x7FFFFu + ((bits >> 20) & 1u);
    const int e = static_cast<int>(rounded >> 23) - 127;
    const std::uint32_t mantissa = (rounded >> 20) & 7u;
    if (e > 8 || (e == 8 && mantissa > 6)) return static_cast<std::uint8_t>(sign | 0x7Eu);
    return static_cast<std::uint8_t>(sign | (static_cast<std::uint32_t>(e + 7) << 3) | mantissa);
  }
  // Subnormal: the multiple of 2^-9, i.e. significand * 2^(exponent - 23 + 9), rounded to even;
  // 8 (rounded up to 2^-6) is the smallest normal's encoding, 0x08, as it should be.
  const int shift = 14 - exponent;                    // >= 21
  if (shift > 25 || bits < 0x00800000u) return sign;  // below 2^-11 (or a float subnormal): zero
  const std::uint32_t significand = (bits & 0x7FFFFFu) | 0x800000u;
  std::uint32_t q = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<std::uint8_t>(sign | q);
}

GPUSCOUT_HD inline float e4m3_bits_to_float(std::uint8_t code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t exponent = (code >> 3) & 15u, mantissa = code & 7u;
  if ((code & 0x7Fu) == 0x7Fu) return float_from_bits(sign | 0x7FC00000u);
  if (exponent == 0) {  // m * 2^-9, exact in float
    return float_from_bits(sign | float_bits(static_cast<float>(mantissa) * (1.0f / 512.0f)));
  }
  return float_from_bits(sign | ((exponent - 7 + 127) << 23) | (mantissa << 20));
}

// E5M2 (1 sign, 5 exponent bits with bias 15, 2 mantissa bits, IEEE-like): largest finite value
// 57344; the format of the train step's FP8 gradients (encoded on the GPU by CUDA's conversion).
inline constexpr float kE5m2Max = 57344.0f;

// The per-tensor FP8 scale of a projection matrix: the bound of its values (weight_value: uniform
// in +-sqrt(3/in)) over E4M3's largest value, so the quantized codes use the whole range. A real
// checkpoint's scale is its amax over 448; for these weights amax approaches the bound.
inline float fp8_weight_scale(int in_features) {
  return std::sqrt(3.0f / static_cast<float>(in_features)) / kE4m3Max;
}

// A projection weight as the FP8 engine stores it: E4M3 code of value / scale.
GPUSCOUT_HD inline std::uint8_t fp8_weight_code(std::uint64_t stream, WeightKind kind, std::uint64_t index,
                                                int in_features, float scale) {
  const float value = weight_value(stream, kind, index, in_features);
#if defined(__CUDA_ARCH__)
  return float_to_e4m3_bits(__fdiv_rn(value, scale));
#else
  return float_to_e4m3_bits(value / scale);
#endif
}

// The token ids of a prompt: deterministic from (seed, request id), uniform over the vocabulary.
GPUSCOUT_HD inline std::int32_t prompt_token(std::uint64_t seed, std::uint64_t request_id, std::uint64_t position,
                                             int vocab) {
  return static_cast<std::int32_t>(splitmix64(splitmix64(seed ^ (request_id * 0x9E3779B97F4A7C15ull)) + position) %
                                   static_cast<std::uint64_t>(vocab));
}

}  // namespace gpuscout::infer
