#include <gtest/gtest.h>

#include "gpuscout/bench/selection.hpp"
#include "gpuscout/bench/summary.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::bench {
namespace {

TEST(BenchSelection, SplitListTrimsAndDropsEmpty) {
  EXPECT_EQ(split_list(" a, b,,c ,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
}

TEST(BenchSelection, ParseBytes) {
  EXPECT_EQ(parse_bytes("8MiB"), 8ull << 20);
  EXPECT_EQ(parse_bytes("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_bytes("512M"), 512ull << 20);
  EXPECT_EQ(parse_bytes("1g"), 1ull << 30);
  EXPECT_EQ(parse_bytes("64KiB"), 64ull << 10);
  EXPECT_EQ(parse_bytes("1048576"), 1ull << 20);
  EXPECT_EQ(parse_bytes("1.5GiB"), 3ull << 29);
  EXPECT_THROW(parse_bytes("abc"), UsageError);
  EXPECT_THROW(parse_bytes("4XB"), UsageError);
  EXPECT_THROW(parse_bytes("0"), UsageError);
  EXPECT_THROW(parse_bytes("0.3"), UsageError);
  EXPECT_EQ(parse_byte_list({"8MiB", "1GiB"}, "memory-sizes"), (std::vector<std::uint64_t>{8ull << 20, 1ull << 30}));
}

TEST(BenchSelection, FormatBytesIsShortestExact) {
  EXPECT_EQ(format_bytes(4ull << 30), "4GiB");
  EXPECT_EQ(format_bytes(8ull << 20), "8MiB");
  EXPECT_EQ(format_bytes(1536ull << 20), "1536MiB");
  EXPECT_EQ(format_bytes(1000), "1000B");
  EXPECT_EQ(format_bytes(parse_bytes(format_bytes(3ull << 29))), format_bytes(3ull << 29));
}

TEST(BenchSelection, IndexListAndTags) {
  EXPECT_EQ(parse_index_list("0,1, 3,1", "gpus"), (std::vector<int>{0, 1, 3}));
  EXPECT_THROW(parse_index_list("0,x", "gpus"), UsageError);
  EXPECT_THROW(parse_index_list("-1", "gpus"), UsageError);
  EXPECT_THROW(parse_index_list("", "gpus"), UsageError);
  const auto tags = parse_tags("site:lab1, run:3,url:http://x");
  EXPECT_EQ(tags.at("site"), "lab1");
  EXPECT_EQ(tags.at("run"), "3");
  EXPECT_EQ(tags.at("url"), "http://x");
  EXPECT_THROW(parse_tags("novalue"), UsageError);
  EXPECT_THROW(parse_tags(":v"), UsageError);
}

TEST(BenchSelection, SelectorsMatchKeysPrefixesAndCases) {
  EXPECT_TRUE(selector_matches_benchmark("memory", "memory"));
  EXPECT_TRUE(selector_matches_benchmark("mem", "memory"));
  EXPECT_TRUE(selector_matches_benchmark("gemm/bf16", "gemm"));
  EXPECT_FALSE(selector_matches_benchmark("gemmx", "gemm"));
  EXPECT_FALSE(selector_matches_benchmark("transfer", "memory"));
  EXPECT_FALSE(selector_matches_benchmark("", "memory"));

  const std::vector<std::string> keys{"memory", "transfer", "gemm"};
  EXPECT_EQ(select_benchmarks(keys, {}), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(select_benchmarks(keys, {"gemm/bf16", "memory"}), (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(select_benchmarks(keys, {"tra"}), (std::vector<std::size_t>{1}));
  EXPECT_THROW(select_benchmarks(keys, {"memroy"}), NotFoundError);
  try {
    select_benchmarks(keys, {"memroy"});
  } catch (const NotFoundError& e) {
    EXPECT_EQ(e.suggestions(), std::vector<std::string>{"memory"});
  }
}

TEST(BenchSelection, CaseSelection) {
  EXPECT_TRUE(case_selected({}, "memory/copy/4GiB"));
  EXPECT_TRUE(case_selected({"memory"}, "memory/copy/4GiB"));
  EXPECT_TRUE(case_selected({"memory/copy"}, "memory/copy/4GiB"));
  EXPECT_FALSE(case_selected({"memory/copy"}, "memory/triad/4GiB"));
  EXPECT_TRUE(case_selected({"memory/copy", "gemm/bf16"}, "memory/copy/8MiB"));
  // A selector inside another benchmark does not restrict this one.
  EXPECT_TRUE(case_selected({"gemm/bf16", "memory"}, "memory/read/8MiB"));
  EXPECT_FALSE(case_selected({"gemm/bf16"}, "gemm/fp8/m8192_n8192_k8192"));
}

TEST(BenchSelection, DefaultOutputName) {
  // 2026-11-30 12:34:56 UTC
  EXPECT_EQ(default_output_name("Node-7.example", "NVIDIA H200", 1796042096),
            "gpuscout-node-7-example-h200-20261130-123456.json");
  EXPECT_EQ(default_output_name("", "", 0), "gpuscout-unknown-unknown-19700101-000000.json");
}

TEST(BenchSelection, PcieBandwidth) {
  EXPECT_NEAR(pcie_bandwidth_gbps(5, 16), 63.015, 0.01);
  EXPECT_NEAR(pcie_bandwidth_gbps(4, 16), 31.5, 0.01);
  EXPECT_EQ(pcie_bandwidth_gbps(0, 16), 0.0);
}

results::Record sample_record() {
  results::Record r;
  r.key = "memory/copy/4GiB";
  r.benchmark = "memory";
  SampleSummary times = summarize({0.002, 0.002, 0.0021, 0.0019});
  r.metrics.push_back(rate_metric("bandwidth", "GB/s", 8.0, times, "read + written"));
  r.metrics.push_back(time_metric("time", "us", 1e6, times, "per op"));
  return r;
}

TEST(BenchSummary, RateAndTimeMetrics) {
  const results::Record r = sample_record();
  const results::Metric& bw = r.metrics[0];
  EXPECT_EQ(bw.statistic, "median");
  EXPECT_EQ(bw.samples, 4);
  EXPECT_NEAR(bw.value, 4000.0, 1e-6);
  ASSERT_TRUE(bw.spread.has_value());
  EXPECT_NEAR(bw.spread->max, 8.0 / 0.0019, 1e-6);
  EXPECT_NEAR(bw.spread->min, 8.0 / 0.0021, 1e-6);
  EXPECT_NEAR(r.metrics[1].value, 2000.0, 1e-9);
}

TEST(BenchSummary, PercentOfPeakNeedsReferenceFigureAndUnit) {
  results::Record r = sample_record();
  PeakFigures peaks{{"hbm_bandwidth_gbps", {4800, "GB/s", "datasheet"}}};
  EXPECT_FALSE(annotate_percent_of_peak(r, peaks));  // no reference declared
  set_peak_reference(r, "bandwidth", "hbm_bandwidth_gbps");
  EXPECT_FALSE(annotate_percent_of_peak(r, {}));  // figure unknown
  EXPECT_TRUE(annotate_percent_of_peak(r, peaks));
  const results::Metric* pct = r.find_metric("bandwidth_pct_of_peak");
  ASSERT_NE(pct, nullptr);
  EXPECT_NEAR(pct->value, 100.0 * 4000 / 4800, 1e-9);
  EXPECT_EQ(pct->unit, "%");
  EXPECT_EQ(r.extra["peak"]["value"], 4800);
  EXPECT_FALSE(annotate_percent_of_peak(r, peaks));  // not twice
  results::Record other = sample_record();
  set_peak_reference(other, "bandwidth", "x");
  EXPECT_FALSE(annotate_percent_of_peak(other, {{"x", {100, "TFLOP/s", ""}}}));  // unit mismatch
}

TEST(BenchSummary, EfficiencyAndThrottle) {
  results::Record r = sample_record();
  EXPECT_EQ(annotate_efficiency(r), 0);  // no telemetry
  results::Telemetry t;
  t.power_mean_w = 500;
  t.throttle_reasons = {"applications_clocks_setting"};
  r.telemetry = t;
  EXPECT_EQ(annotate_efficiency(r), 1);  // GB/s only, not us
  EXPECT_NEAR(r.find_metric("bandwidth_per_watt")->value, 8.0, 1e-9);
  EXPECT_EQ(r.find_metric("bandwidth_per_watt")->unit, "GB/s/W");
  EXPECT_FALSE(r.extra["throttled"].get<bool>());
  EXPECT_EQ(annotate_efficiency(r), 0);  // idempotent
  t.throttle_reasons = {"sw_power_cap"};
  EXPECT_TRUE(is_throttled(t));
}

TEST(BenchSummary, TableRowsPerHeadlineMetric) {
  results::Record r = sample_record();
  set_peak_reference(r, "bandwidth", "hbm_bandwidth_gbps");
  annotate_percent_of_peak(r, {{"hbm_bandwidth_gbps", {4800, "GB/s", "datasheet"}}});
  results::Record skipped;
  skipped.key = "memory/copy/64GiB";
  skipped.outcome = results::Outcome::skipped;
  skipped.reason = "needs 192.0 GiB, 139.0 GiB free";
  results::Record gemm;
  gemm.key = "gemm/bf16/m8192_n8192_k8192";
  gemm.metrics.push_back({"throughput", 780, "TFLOP/s", "median", 50, std::nullopt, ""});
  gemm.metrics.push_back({"percent_of_peak", 78.8, "%", "median", 50, std::nullopt, ""});
  const report::Table t = summary_table({r, skipped, gemm});
  ASSERT_EQ(t.columns.size(), 10u);
  ASSERT_EQ(t.rows.size(), 4u);  // bandwidth, time, skipped, throughput
  EXPECT_EQ(std::get<std::string>(t.rows[0][1]), "bandwidth");
  EXPECT_NEAR(std::get<double>(t.rows[0][7]), 83.33, 0.01);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(t.rows[1][7]));
  EXPECT_EQ(std::get<std::string>(t.rows[2][8]), "skipped");
  EXPECT_EQ(std::get<std::string>(t.rows[2][9]), "needs 192.0 GiB, 139.0 GiB free");
  EXPECT_NEAR(std::get<double>(t.rows[3][7]), 78.8, 1e-9);
  const std::string csv = report::render(t, report::Format::csv);
  EXPECT_NE(csv.find("memory/copy/4GiB,bandwidth,4000"), std::string::npos) << csv;
}

TEST(BenchSummary, RoundSignificant) {
  EXPECT_DOUBLE_EQ(round_significant(4034.567, 4), 4035);
  EXPECT_DOUBLE_EQ(round_significant(1.18349, 3), 1.18);
  EXPECT_DOUBLE_EQ(round_significant(0, 3), 0);
}

}  // namespace
}  // namespace gpuscout::bench
