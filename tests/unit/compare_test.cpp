#include <gtest/gtest.h>

#include "gpuscout/report/compare.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::report {
namespace {

using results::Metric;
using results::Outcome;
using results::Record;
using results::ResultSet;
using results::Spread;

Metric rate(double value, double p10, double p90, const std::string& name = "throughput") {
  Metric m{name, value, "TFLOP/s", "median", 20, Spread{p10 - 1, p90 + 1, p10, p90, value, 1}, ""};
  return m;
}

Metric point(double value, const std::string& name = "throughput", const std::string& unit = "TFLOP/s") {
  return Metric{name, value, unit, "value", 1, std::nullopt, ""};
}

Record rec(const std::string& key, std::vector<Metric> metrics, Outcome outcome = Outcome::passed) {
  Record r;
  r.key = key;
  r.benchmark = key.substr(0, key.find('/'));
  r.metrics = std::move(metrics);
  r.outcome = outcome;
  return r;
}

CompareInput input(const std::string& label, std::vector<Record> records) {
  ResultSet set;
  set.records = std::move(records);
  return {label, label + ".json", set};
}

TEST(CompareSignificance, NonOverlappingRangesDecide) {
  EXPECT_EQ(significance(rate(100, 99, 101), rate(110, 109, 111)), Verdict::faster);
  EXPECT_EQ(significance(rate(100, 99, 101), rate(90, 89, 91)), Verdict::slower);
}

TEST(CompareSignificance, OverlappingRangesAreTheSameEvenWithADifferentMedian) {
  EXPECT_EQ(significance(rate(100, 95, 105), rate(103, 101, 106)), Verdict::same);
  // Touching ranges overlap.
  EXPECT_EQ(significance(rate(100, 99, 101), rate(102, 101, 103)), Verdict::same);
}

TEST(CompareSignificance, TimesAndLatenciesAreBetterWhenLower) {
  Metric a = rate(10, 9.9, 10.1, "time");
  Metric b = rate(8, 7.9, 8.1, "time");
  a.unit = b.unit = "ms";
  EXPECT_TRUE(lower_is_better(a));
  EXPECT_EQ(significance(a, b), Verdict::faster);
  EXPECT_EQ(significance(b, a), Verdict::slower);
  Metric lat = point(1.2, "latency", "us");
  EXPECT_TRUE(lower_is_better(lat));
  EXPECT_TRUE(lower_is_better(point(5, "tpot", "ms")));
  EXPECT_FALSE(lower_is_better(point(5, "busbw", "GB/s")));
}

TEST(CompareSignificance, OneSidedSpreadComparesThePointWithTheRange) {
  EXPECT_EQ(significance(rate(100, 99, 101), point(100.5)), Verdict::same);
  EXPECT_EQ(significance(rate(100, 99, 101), point(120)), Verdict::faster);
  EXPECT_EQ(significance(point(120), rate(100, 99, 101)), Verdict::slower);
}

TEST(CompareSignificance, NoSpreadAnywhereIsUnknown) {
  EXPECT_EQ(significance(point(100), point(200)), Verdict::unknown);
  // A spread over one sample does not count.
  Metric one = rate(100, 99, 101);
  one.samples = 1;
  EXPECT_EQ(significance(one, point(200)), Verdict::unknown);
}

TEST(CompareRuns, MatchesByKeyAndComputesRatioAndChange) {
  const auto c = compare_runs({input("A", {rec("gemm/bf16/x", {rate(100, 99, 101)}), rec("only/a", {point(1)})}),
                               input("B", {rec("only/b", {point(2)}), rec("gemm/bf16/x", {rate(150, 149, 151)})})});
  ASSERT_EQ(c.rows.size(), 1u);
  const CompareRow& row = c.rows[0];
  EXPECT_EQ(row.key, "gemm/bf16/x");
  EXPECT_EQ(row.metric, "throughput");
  EXPECT_EQ(row.runs[0].verdict, Verdict::baseline);
  ASSERT_TRUE(row.runs[1].ratio);
  EXPECT_DOUBLE_EQ(*row.runs[1].ratio, 1.5);
  EXPECT_DOUBLE_EQ(*row.runs[1].change_pct, 50);
  EXPECT_EQ(row.runs[1].verdict, Verdict::faster);
  ASSERT_EQ(c.only_one.size(), 2u);
  EXPECT_EQ(c.only_one[0].key, "only/a");
  EXPECT_TRUE(c.only_one[0].runs[0].present);
  EXPECT_FALSE(c.only_one[0].runs[1].present);
  EXPECT_EQ(c.only_one[1].key, "only/b");
}

TEST(CompareRuns, HeadlineIsTheBaselinesFirstMetricFoundByNameElsewhere) {
  Metric time = rate(5, 4.9, 5.1, "time");
  time.unit = "ms";
  const auto c = compare_runs(
      {input("A", {rec("k", {rate(100, 99, 101), time})}), input("B", {rec("k", {time, rate(100, 99.5, 100.5)})})});
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].metric, "throughput");
  EXPECT_DOUBLE_EQ(c.rows[0].runs[1].metric->value, 100);
  EXPECT_EQ(c.rows[0].runs[1].verdict, Verdict::same);
}

TEST(CompareRuns, FailedMissingAndMismatchedRecordsAreNotCompared) {
  const auto c = compare_runs({
      input("A", {rec("k1", {rate(100, 99, 101)}), rec("k2", {rate(100, 99, 101)}), rec("k3", {rate(1, 1, 1)}),
                  rec("k4", {}, Outcome::failed)}),
      input("B", {rec("k1", {}, Outcome::failed), rec("k2", {point(1, "throughput", "GB/s")}),
                  rec("k3", {point(1, "bandwidth", "GB/s")}), rec("k4", {rate(100, 99, 101)})}),
  });
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[0].runs[1].verdict, Verdict::not_comparable);
  EXPECT_EQ(c.rows[0].runs[1].why, "failed");
  EXPECT_EQ(c.rows[1].runs[1].why, "unit GB/s differs");
  EXPECT_EQ(c.rows[2].runs[1].why, "no throughput metric");
  // The baseline failed: B's value is kept but there is nothing to compare it with.
  EXPECT_EQ(c.rows[3].runs[1].why, "baseline failed");
  EXPECT_TRUE(c.rows[3].runs[1].metric.has_value());
  EXPECT_FALSE(c.rows[3].runs[1].ratio.has_value());
}

TEST(CompareRuns, DuplicateKeysKeepTheFirstAndSaySo) {
  const auto c =
      compare_runs({input("A", {rec("k", {point(1)}), rec("k", {point(2)})}), input("B", {rec("k", {point(1)})})});
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(c.rows[0].runs[0].metric->value, 1);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("more than once"), std::string::npos);
}

TEST(CompareRuns, ARunWithDoctorFindingsIsNoted) {
  CompareInput a = input("A", {rec("gemm/x", {rate(100, 99, 101)})});
  CompareInput b = input("B", {rec("gemm/x", {rate(80, 79, 81)})});
  b.result.provenance.checks = {{"gpu0/power_limit", "warn", "GPU 0: power limit: 500 W enforced, 700 W by default"}};
  const Comparison c = compare_runs({a, b});
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("B: measured with 1 doctor finding"), std::string::npos) << c.notes[0];
  EXPECT_NE(c.notes[0].find("gpu0/power_limit (warn)"), std::string::npos) << c.notes[0];
}

TEST(CompareRuns, RunsOnOtherCpusOfOneHostAreNoted) {
  CompareInput a = input("A", {rec("transfer/x", {rate(55, 54, 56)})});
  CompareInput b = input("B", {rec("transfer/x", {rate(40, 39, 41)})});
  a.result.provenance.hostname = b.result.provenance.hostname = "node1";
  a.result.provenance.cpus = "0-15";
  b.result.provenance.cpus = "16-31";
  Comparison c = compare_runs({a, b});
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("A ran on CPUs 0-15, B on 16-31 of the same host"), std::string::npos) << c.notes[0];
  // Other hosts differ anyway, the same CPUs are like for like, and older files say nothing.
  b.result.provenance.hostname = "node2";
  EXPECT_TRUE(compare_runs({a, b}).notes.empty());
  b.result.provenance.hostname = "node1";
  b.result.provenance.cpus = "0-15";
  EXPECT_TRUE(compare_runs({a, b}).notes.empty());
  b.result.provenance.cpus.clear();
  EXPECT_TRUE(compare_runs({a, b}).notes.empty());
}

TEST(CompareRuns, ThreeRunsCompareEachWithTheFirst) {
  const auto c = compare_runs({input("A", {rec("k", {rate(100, 99, 101)})}), input("B", {rec("k", {rate(90, 89, 91)})}),
                               input("C", {rec("k", {rate(100.5, 99.5, 101.5)})})});
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].runs[1].verdict, Verdict::slower);
  EXPECT_EQ(c.rows[0].runs[2].verdict, Verdict::same);
  const auto tables = comparison_tables(c, {input("A", {}), input("B", {}), input("C", {})});
  ASSERT_EQ(tables.size(), 3u);
  // key, metric, unit, 3 x (value, range), 2 x (ratio, change, verdict)
  EXPECT_EQ(tables[1].columns.size(), 3u + 6u + 6u);
}

TEST(CompareRuns, NeedsTwoRuns) {
  EXPECT_THROW(compare_runs({input("A", {})}), UsageError);
}

}  // namespace
}  // namespace gpuscout::report
