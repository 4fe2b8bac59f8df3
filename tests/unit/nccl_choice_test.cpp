#include <gtest/gtest.h>

#include "gpuscout/bench/nccl_choice.hpp"
#include "gpuscout/bench/rank_merge.hpp"

using namespace gpuscout;
using namespace gpuscout::bench;

namespace {
NcclChoice choice(const std::string& algorithm, const std::string& protocol, int channels) {
  NcclChoice c;
  c.algorithm = algorithm;
  c.protocol = protocol;
  c.channels = channels;
  c.calls = 1;
  return c;
}
}  // namespace

TEST(NcclChoice, NamesAsNcclSpellsThem) {
  EXPECT_EQ(nccl_function_name(Collective::all_reduce), "AllReduce");
  EXPECT_EQ(nccl_function_name(Collective::reduce_scatter), "ReduceScatter");
  EXPECT_EQ(nccl_function_name(Collective::alltoall), "Send");
  EXPECT_EQ(nccl_function_name(Collective::sendrecv), "Send");
  EXPECT_EQ(nccl_datatype_name("float"), "ncclFloat32");
  EXPECT_EQ(nccl_datatype_name("bf16"), "ncclBfloat16");
  EXPECT_EQ(nccl_datatype_name("uint8"), "Unknown");
  EXPECT_TRUE(nccl_has_algorithm(Collective::broadcast));
  // NCCL describes all_gather and broadcast in bytes (seen on 2x H200, NCCL 2.28.3: no float event).
  const DataType f32 = *data_type_from_string("float");
  const NcclCallKey gather = nccl_event_key(Collective::all_gather, 1, 512, f32);
  EXPECT_EQ(gather.func, "AllGather");
  EXPECT_EQ(gather.count, 2048u);
  EXPECT_EQ(gather.datatype, "ncclInt8");
  EXPECT_EQ(nccl_event_key(Collective::broadcast, 0, 2, f32).count, 8u);
  const NcclCallKey reduce = nccl_event_key(Collective::all_reduce, 1, 512, f32);
  EXPECT_EQ(reduce.rank, 1);
  EXPECT_EQ(reduce.count, 512u);
  EXPECT_EQ(reduce.datatype, "ncclFloat32");
  EXPECT_FALSE(nccl_has_algorithm(Collective::sendrecv));
}

TEST(NcclChoice, TableKeysByRankFunctionCountAndType) {
  NcclChoiceTable t;
  t.add({0, "Send", 64, "ncclFloat32"}, nullptr, nullptr, 4);
  t.add({0, "Send", 64, "ncclFloat32"}, nullptr, nullptr, 8);  // another peer: the most channels kept
  t.add({0, "AllReduce", 64, "ncclFloat32"}, "RING", "LL", 2);
  ASSERT_TRUE(t.find({0, "Send", 64, "ncclFloat32"}));
  EXPECT_EQ(t.find({0, "Send", 64, "ncclFloat32"})->channels, 8);
  EXPECT_EQ(t.find({0, "Send", 64, "ncclFloat32"})->calls, 2);
  EXPECT_FALSE(t.find({1, "AllReduce", 64, "ncclFloat32"}));
  EXPECT_EQ(t.find({0, "AllReduce", 64, "ncclFloat32"})->algorithm, "RING");
  EXPECT_EQ(t.size(), 2u);
}

TEST(NcclChoice, SummaryAgreesOrSaysMixedOrUnknownWithReason) {
  nlohmann::ordered_json extra;
  extra["nccl_choice_by_rank"] = {nccl_rank_choice(0, choice("RING", "LL", 24), true, ""),
                                  nccl_rank_choice(1, choice("RING", "LL", 24), true, "")};
  summarize_nccl_choice(extra);
  EXPECT_EQ(extra["algorithm"], "RING");
  EXPECT_EQ(extra["protocol"], "LL");
  EXPECT_EQ(extra["channels"], 24);
  EXPECT_FALSE(extra.contains("nccl_choice_unknown_reason"));

  extra["nccl_choice_by_rank"][1] = nccl_rank_choice(1, choice("TREE", "LL", 24), true, "");
  summarize_nccl_choice(extra);
  EXPECT_EQ(extra["algorithm"], "mixed (rank 0: RING; rank 1: TREE)");
  EXPECT_EQ(extra["protocol"], "LL");

  extra["nccl_choice_by_rank"] =
      nlohmann::ordered_json::array({nccl_rank_choice(0, std::nullopt, true, "plugin turned off")});
  summarize_nccl_choice(extra);
  EXPECT_EQ(extra["algorithm"], "unknown");
  EXPECT_EQ(extra["channels"], "unknown");
  EXPECT_EQ(extra["nccl_choice_unknown_reason"], "plugin turned off");

  // send/recv: channels known, no algorithm, and the reason says why.
  extra["nccl_choice_by_rank"] = nlohmann::ordered_json::array({nccl_rank_choice(0, choice("", "", 8), false, "")});
  summarize_nccl_choice(extra);
  EXPECT_EQ(extra["algorithm"], "unknown");
  EXPECT_EQ(extra["channels"], 8);
  EXPECT_NE(extra["nccl_choice_unknown_reason"].get<std::string>().find("point-to-point"), std::string::npos);
}

TEST(NcclChoice, RankMergeGathersEveryRanksChoice) {
  std::vector<std::vector<results::Record>> by_rank(2);
  for (int r = 0; r < 2; ++r) {
    results::Record rec;
    rec.key = "collectives/all_reduce/float/oop/8B";
    rec.benchmark = "collectives";
    rec.gpus = {r};
    rec.extra["distributed"] = true;
    rec.extra["nccl_choice_by_rank"] =
        nlohmann::ordered_json::array({nccl_rank_choice(r, choice(r == 0 ? "RING" : "TREE", "LL", 2), true, "")});
    summarize_nccl_choice(rec.extra);
    by_rank[static_cast<std::size_t>(r)].push_back(rec);
  }
  const auto merged = merge_rank_records(by_rank);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].extra["nccl_choice_by_rank"].size(), 2u);
  EXPECT_EQ(merged[0].extra["algorithm"], "mixed (rank 0: RING; rank 1: TREE)");
  EXPECT_EQ(merged[0].extra["channels"], 2);
}
