#include <gtest/gtest.h>

#include "gpuscout/bench/rank_merge.hpp"
#include "gpuscout/bench/world.hpp"

using namespace gpuscout;
using namespace gpuscout::bench;

namespace {
results::Record coll_record(const std::string& key, double time_us, int gpu, std::uint64_t wrong = 0) {
  results::Record r;
  r.key = key;
  r.benchmark = "collectives";
  r.gpus = {gpu};
  r.params["bus_bytes"] = 1'000'000'000;
  r.params["busbw_factor"] = 1.0;
  r.extra["distributed"] = true;
  r.extra["wrong_values"] = wrong;
  r.extra["verified"] = wrong == 0;
  results::Metric t{"time",   time_us, "us",
                    "median", 3,       results::Spread{time_us - 1, time_us + 1, time_us, time_us, time_us, 0.5},
                    ""};
  r.metrics.push_back(t);
  r.metrics.push_back({"algbw", 1e3 / time_us * 1e3, "GB/s", "median", 3, std::nullopt, ""});
  r.metrics.push_back({"busbw", 1e3 / time_us * 1e3, "GB/s", "median", 3, std::nullopt, ""});
  if (wrong > 0) r.outcome = results::Outcome::incorrect;
  return r;
}
}  // namespace

TEST(RankMerge, DistributedRecordsAverageTimeAndRecomputeBandwidth) {
  std::vector<std::vector<results::Record>> by_rank(2);
  by_rank[0].push_back(coll_record("collectives/all_reduce/float/oop/1GiB", 2000, 0));
  by_rank[1].push_back(coll_record("collectives/all_reduce/float/oop/1GiB", 3000, 1, 5));
  const auto merged = merge_rank_records(by_rank);
  ASSERT_EQ(merged.size(), 1u);
  const auto& r = merged[0];
  EXPECT_EQ(r.find_metric("time")->value, 2500);
  EXPECT_NEAR(r.find_metric("algbw")->value, 400.0, 1e-9);  // 1e9 B / 2.5 ms
  EXPECT_NEAR(r.find_metric("busbw")->value, 400.0, 1e-9);
  EXPECT_EQ(r.find_metric("time")->statistic, "median, mean over ranks");
  EXPECT_EQ(r.find_metric("time")->spread->min, 1999);
  EXPECT_EQ(r.find_metric("time")->spread->max, 3001);
  EXPECT_NEAR(r.find_metric("algbw")->spread->max, 1e9 / 1999e-6 / 1e9, 1e-9);
  EXPECT_EQ(r.extra["wrong_values"].get<int>(), 5);
  EXPECT_FALSE(r.extra["verified"].get<bool>());
  EXPECT_EQ(r.outcome, results::Outcome::incorrect);
  EXPECT_EQ(r.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.extra["per_rank_time_us"].size(), 2u);
}

TEST(RankMerge, WorstOutcomeWinsAndMissingRanksFail) {
  std::vector<std::vector<results::Record>> by_rank(3);
  auto a = coll_record("k", 10, 0);
  auto b = coll_record("k", 10, 1);
  b.outcome = results::Outcome::timeout;
  b.reason = "all_reduce 8B did not finish";
  by_rank[0].push_back(a);
  by_rank[1].push_back(b);
  by_rank[0].push_back(coll_record("only_rank0", 10, 0));
  const auto merged = merge_rank_records(by_rank);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].outcome, results::Outcome::timeout);
  EXPECT_EQ(merged[0].reason, "rank 1: all_reduce 8B did not finish");
  EXPECT_EQ(merged[0].extra["missing_ranks"], nlohmann::ordered_json::array({2}));
  EXPECT_EQ(merged[1].outcome, results::Outcome::failed);
  EXPECT_EQ(merged[1].reason, "1 of 3 ranks reported this case");
}

TEST(RankMerge, PerRankRecordsAreKeptWithTheirRank) {
  std::vector<std::vector<results::Record>> by_rank(2);
  results::Record m;
  m.key = "memory/copy/4GiB";
  by_rank[0].push_back(m);
  by_rank[1].push_back(m);
  const auto merged = merge_rank_records(by_rank);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].key, "rank0/memory/copy/4GiB");
  EXPECT_EQ(merged[1].key, "rank1/memory/copy/4GiB");
  EXPECT_EQ(merged[1].extra["rank"], 1);
  // One rank: nothing renamed.
  const auto single = merge_rank_records({{m}});
  EXPECT_EQ(single[0].key, "memory/copy/4GiB");
}

TEST(RankMerge, RankTableAndJson) {
  RankInfo info{1, 1, "node-a", 4242, 1, "NVIDIA H200", "00000000:19:00.0", "GPU-x"};
  const auto back = rank_info_from_json(to_json(info));
  EXPECT_EQ(back.host, "node-a");
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.pci_bus_id, "00000000:19:00.0");
  const auto table = rank_table({info});
  EXPECT_EQ(table.rows.size(), 1u);
  EXPECT_EQ(table.columns.size(), 7u);
  EXPECT_GT(outcome_severity(results::Outcome::timeout), outcome_severity(results::Outcome::failed));
}

TEST(World, SingleProcess) {
  SingleProcessWorld w;
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(w.gather("x", 0), std::vector<std::string>{"x"});
  EXPECT_EQ(w.max(3.5), 3.5);
  EXPECT_EQ(w.launcher(), "single_process");
}
