#pragma once
// Sample statistics and the stopping rule every benchmark uses (pure C++, tested in CI).
#include <cstddef>
#include <vector>

#include "gpuscout/results/result.hpp"

namespace gpuscout::bench {

struct SampleSummary {
  std::size_t count = 0;
  double median = 0, min = 0, max = 0, p10 = 0, p90 = 0, mean = 0, stddev = 0;

  // (p90 - p10) / median: robust to one outlier, unlike stddev / mean.
  double relative_spread() const { return median > 0 ? (p90 - p10) / median : 0.0; }
};

// Linear-interpolated quantile q in [0, 1] of unsorted samples; 0 for an empty set.
double quantile(std::vector<double> samples, double q);
SampleSummary summarize(const std::vector<double>& samples);

// Converts a summary of times into the spread of a rate `work / time` (min time -> max rate ...).
// `work` is in the rate's numerator unit (FLOPs, bytes) scaled as the caller wants the rate.
results::Spread rate_spread(const SampleSummary& times, double work);
results::Spread value_spread(const SampleSummary& values);

struct StoppingRule {
  std::size_t min_samples = 10;
  std::size_t max_samples = 1000;
  double min_time_s = 0.05;  // keep sampling at least this long
  double max_time_s = 2.0;   // time cap per case
  double target_relative_spread = 0.02;
};

// True once enough samples are in and their relative spread is below the bound, or a cap is hit.
bool should_stop(const StoppingRule& rule, const std::vector<double>& samples, double elapsed_s);

// times[p][k]: the time of candidate k at operating point p (every row the same length). Returns
// the candidate whose time over the fastest candidate's, summed over the points, is lowest (the
// first of equals): one choice that serves a whole range of points, where the fastest at one point
// can be much slower at another. Throws std::invalid_argument for no points, no candidates, ragged
// rows or a time that is not positive and finite.
std::size_t best_over_points(const std::vector<std::vector<double>>& times);

}  // namespace gpuscout::bench
