#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "gpuscout/bench/stats.hpp"

namespace gpuscout::bench {
namespace {

TEST(Stats, QuantilesInterpolate) {
  const std::vector<double> v{4, 1, 3, 2, 5};
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 2.0);
  EXPECT_DOUBLE_EQ(quantile({1, 2}, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(quantile({}, 0.5), 0.0);
}

TEST(Stats, SummaryOfSamples) {
  const auto s = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_NEAR(s.stddev, 2.138, 1e-3);  // sample (n-1) standard deviation
}

TEST(Stats, RateSpreadSwapsEnds) {
  // Times of 1, 2 and 4 ms for 8 GFLOP: rates 8, 4 and 2 TFLOP/s.
  const auto times = summarize({1e-3, 2e-3, 4e-3});
  const auto spread = rate_spread(times, 8e9 / 1e12);
  EXPECT_DOUBLE_EQ(spread.max, 8.0);
  EXPECT_DOUBLE_EQ(spread.min, 2.0);
  EXPECT_GT(spread.p90, spread.p10);
}

TEST(StoppingRule, NeedsMinimumSamplesAndTime) {
  StoppingRule rule;
  rule.min_samples = 5;
  rule.min_time_s = 0.1;
  const std::vector<double> steady(5, 1.0);
  EXPECT_FALSE(should_stop(rule, {1.0, 1.0}, 1.0));  // too few samples
  EXPECT_FALSE(should_stop(rule, steady, 0.01));     // too little time
  EXPECT_TRUE(should_stop(rule, steady, 0.2));       // steady: stop
}

TEST(StoppingRule, NoisySamplesRunToTheCap) {
  StoppingRule rule;
  rule.min_samples = 4;
  rule.min_time_s = 0;
  rule.max_time_s = 1.0;
  rule.max_samples = 100;
  const std::vector<double> noisy{1, 2, 1, 2, 1, 2};
  EXPECT_FALSE(should_stop(rule, noisy, 0.5));
  EXPECT_TRUE(should_stop(rule, noisy, 1.0));  // time cap
  std::vector<double> many(100, 1.0);
  many[0] = 5;
  many[1] = 0.1;
  EXPECT_TRUE(should_stop(rule, many, 0.0));  // sample cap
}

}  // namespace
}  // namespace gpuscout::bench

TEST(BestOverPoints, PrefersTheCandidateGoodEverywhere) {
  // Qwen2.5-7B's decode attention at batch 32 on an H200 (bench/NOTES.md, session 7), us at 513,
  // 1280 and 2048 tokens for split, streaming 1/SM and 2/SM: 2/SM is fastest at the middle point
  // by 0.9 us, 1/SM is within 3% everywhere and 37% faster at 513 tokens.
  const std::vector<std::vector<double>> qwen = {{35.5, 19.0, 30.3}, {56.7, 35.9, 35.0}, {64.1, 50.4, 49.1}};
  EXPECT_EQ(gpuscout::bench::best_over_points(qwen), 1u);
  EXPECT_EQ(gpuscout::bench::best_over_points({qwen[1]}), 2u);
  // A win by a hair at one point does not buy a loss by half at two others.
  EXPECT_EQ(gpuscout::bench::best_over_points({{10.0, 10.1}, {20.0, 10.0}, {20.0, 10.0}}), 1u);
  // Equal scores: the first.
  EXPECT_EQ(gpuscout::bench::best_over_points({{2.0, 2.0}}), 0u);
}

TEST(BestOverPoints, RefusesMalformedTables) {
  using gpuscout::bench::best_over_points;
  EXPECT_THROW(best_over_points({}), std::invalid_argument);
  EXPECT_THROW(best_over_points({{}}), std::invalid_argument);
  EXPECT_THROW(best_over_points({{1.0, 2.0}, {1.0}}), std::invalid_argument);
  EXPECT_THROW(best_over_points({{1.0, 0.0}}), std::invalid_argument);
  EXPECT_THROW(best_over_points({{1.0, std::nan("")}}), std::invalid_argument);
}
