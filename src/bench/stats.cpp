#include "gpuscout/bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace gpuscout::bench {

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(position));
  const auto upper = std::min(lower + 1, samples.size() - 1);
  const double fraction = position - static_cast<double>(lower);
  return samples[lower] + (samples[upper] - samples[lower]) * fraction;
}

SampleSummary summarize(const std::vector<double>& samples) {
  SampleSummary s;
  s.count = samples.size();
  if (samples.empty()) return s;
  s.median = quantile(samples, 0.5);
  s.p10 = quantile(samples, 0.1);
  s.p90 = quantile(samples, 0.9);
  auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  s.min = *lo;
  s.max = *hi;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  double sum_sq = 0;
  for (double x : samples) sum_sq += (x - s.mean) * (x - s.mean);
  s.stddev = samples.size() > 1 ? std::sqrt(sum_sq / static_cast<double>(samples.size() - 1)) : 0.0;
  return s;
}

results::Spread rate_spread(const SampleSummary& times, double work) {
  auto rate = [work](double t) { return t > 0 ? work / t : 0.0; };
  // The slowest time is the lowest rate: quantiles swap ends.
  results::Spread spread{rate(times.max), rate(times.min), rate(times.p90), rate(times.p10), 0, 0};
  // Mean rate over the samples' mean time; stddev by first-order error propagation.
  spread.mean = rate(times.mean);
  spread.stddev = times.mean > 0 ? spread.mean * times.stddev / times.mean : 0.0;
  return spread;
}

results::Spread value_spread(const SampleSummary& v) {
  return {v.min, v.max, v.p10, v.p90, v.mean, v.stddev};
}

bool should_stop(const StoppingRule& rule, const std::vector<double>& samples, double elapsed_s) {
  if (samples.size() >= rule.max_samples || elapsed_s >= rule.max_time_s) return true;
  if (samples.size() < rule.min_samples || elapsed_s < rule.min_time_s) return false;
  return summarize(samples).relative_spread() <= rule.target_relative_spread;
}

std::size_t best_over_points(const std::vector<std::vector<double>>& times) {
  if (times.empty() || times.front().empty()) {
    throw std::invalid_argument("best_over_points: no operating points or no candidates");
  }
  const std::size_t candidates = times.front().size();
  std::vector<double> score(candidates, 0.0);
  for (const auto& row : times) {
    if (row.size() != candidates) throw std::invalid_argument("best_over_points: rows of different lengths");
    for (double t : row) {
      if (!(t > 0) || !std::isfinite(t)) throw std::invalid_argument("best_over_points: a time <= 0 or not finite");
    }
    const double fastest = *std::min_element(row.begin(), row.end());
    for (std::size_t k = 0; k < candidates; ++k) score[k] += row[k] / fastest;
  }
  return static_cast<std::size_t>(std::min_element(score.begin(), score.end()) - score.begin());
}

}  // namespace gpuscout::bench
