// E4M3 encoding of weights.hpp against an independent definition: the code whose value is nearest,
// ties to the even code, saturating at 448.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gpuscout/infer/weights.hpp"

namespace gi = gpuscout::infer;

namespace {

// Every finite non-negative E4M3 value from the format's definition, in code order.
std::vector<double> e4m3_values() {
  std::vector<double> v;
  for (int code = 0; code < 0x7F; ++code) {
    const int e = code >> 3, m = code & 7;
    v.push_back(e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7));
  }
  return v;
}

std::uint8_t nearest_code(double x, const std::vector<double>& values) {
  const double a = std::fabs(x);
  int best = 0;
  for (int c = 1; c < static_cast<int>(values.size()); ++c) {
    const double d = std::fabs(values[c] - a), db = std::fabs(values[best] - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return static_cast<std::uint8_t>((std::signbit(x) ? 0x80 : 0) | best);
}

}  // namespace

TEST(InferFp8, DecodesTheFormat) {
  const auto values = e4m3_values();
  EXPECT_EQ(values.back(), 448.0);
  EXPECT_EQ(values[1], std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(values[8], std::ldexp(1.0, -6));  // smallest normal
  for (int code = 0; code < 0x7F; ++code) {
    EXPECT_EQ(gi::e4m3_bits_to_float(static_cast<std::uint8_t>(code)), values[code]) << code;
    EXPECT_EQ(gi::e4m3_bits_to_float(static_cast<std::uint8_t>(code | 0x80)), -values[code]) << code;
  }
  EXPECT_TRUE(std::isnan(gi::e4m3_bits_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(gi::e4m3_bits_to_float(0xFF)));
}

TEST(InferFp8, EveryCodeAndEveryMidpointRoundsAsDefined) {
  const auto values = e4m3_values();
  for (int code = 0; code < 0x7F; ++code) {
    EXPECT_EQ(gi::float_to_e4m3_bits(static_cast<float>(values[code])), code);
    EXPECT_EQ(gi::float_to_e4m3_bits(-static_cast<float>(values[code])), code | 0x80);
    if (code + 1 < 0x7F) {
      // Exactly halfway (representable in float): to the even code. Just off it: to the nearer.
      const auto mid = static_cast<float>((values[code] + values[code + 1]) / 2);
      EXPECT_EQ(gi::float_to_e4m3_bits(mid), code % 2 == 0 ? code : code + 1) << values[code];
      EXPECT_EQ(gi::float_to_e4m3_bits(std::nextafter(mid, 0.0f)), code) << values[code];
      EXPECT_EQ(gi::float_to_e4m3_bits(std::nextafter(mid, 1000.0f)), code + 1) << values[code];
    }
  }
}

TEST(InferFp8, RandomValuesMatchTheNearestCode) {
  const auto values = e4m3_values();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-470.0f, 470.0f), narrow(-0.03f, 0.03f);
  for (int i = 0; i < 20000; ++i) {
    const float x = i % 2 ? wide(rng) : narrow(rng);
    ASSERT_EQ(gi::float_to_e4m3_bits(x), nearest_code(x, values)) << x;
  }
}

TEST(InferFp8, SaturatesAndKeepsNaN) {
  EXPECT_EQ(gi::float_to_e4m3_bits(448.0f), 0x7E);
  EXPECT_EQ(gi::float_to_e4m3_bits(463.9f), 0x7E);
  EXPECT_EQ(gi::float_to_e4m3_bits(1e30f), 0x7E);
  EXPECT_EQ(gi::float_to_e4m3_bits(-INFINITY), 0xFE);
  EXPECT_EQ(gi::float_to_e4m3_bits(NAN) & 0x7F, 0x7F);
  EXPECT_EQ(gi::float_to_e4m3_bits(1e-30f), 0x00);
  EXPECT_EQ(gi::float_to_e4m3_bits(-1e-30f), 0x80);
}

TEST(InferFp8, WeightCodesUseTheRangeAndStayWithinIt) {
  const int in = 4096;
  const float scale = gi::fp8_weight_scale(in);
  const auto stream = gi::tensor_stream(1, gi::WeightKind::wq, 3);
  float amax = 0.0f;
  double err2 = 0.0, ref2 = 0.0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const float w = gi::weight_value(stream, gi::WeightKind::wq, i, in);
    const float q = gi::e4m3_bits_to_float(gi::fp8_weight_code(stream, gi::WeightKind::wq, i, in, scale)) * scale;
    amax = std::max(amax, std::fabs(q));
    err2 += (q - w) * static_cast<double>(q - w);
    ref2 += static_cast<double>(w) * w;
  }
  EXPECT_GT(amax, 0.95f * gi::kE4m3Max * scale);
  EXPECT_LE(amax, gi::kE4m3Max * scale);
  // 3 mantissa bits: relative RMS error of a uniform distribution about 2^-4 / sqrt(3) * ~0.6.
  EXPECT_LT(std::sqrt(err2 / ref2), 0.04);
  EXPECT_GT(std::sqrt(err2 / ref2), 0.005);
}

// E5M2 (the train step's gradient format, encoded on the GPU by CUDA): IEEE-like with bias 15, so
// the largest finite value is the top normal exponent 30 - 15 with mantissa 1.11b.
TEST(InferFp8, E5m2LargestFinite) {
  EXPECT_EQ(gi::kE5m2Max, std::ldexp(1.75f, 30 - 15));
}
