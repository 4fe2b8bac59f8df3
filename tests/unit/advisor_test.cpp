// The advisor on synthetic GPUs (so no test depends on today's spec DB figures): what does not fit is
// rejected with its numbers, tighter bounds never make a plan cheaper, budget and power constraints
// reject, ranking follows cost; the workload loader names file and field; every embedded scenario
// yields an answer; the result set carries what reports read.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpuscout/advise/advisor.hpp"
#include "gpuscout/advise/workload.hpp"
#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::advise {
namespace {

specs::Figure fig(double v) {
  return specs::Figure{v, "synthetic test figure", ""};
}

// An H100-like GPU with a chosen memory, price and FP8 support.
specs::GpuSpec synthetic_gpu(const std::string& name, double memory_gb, double price_usd, double cloud_usd_hr,
                             bool fp8 = true, int mig = 0) {
  specs::GpuSpec g;
  g.name = name;
  g.vendor = "NVIDIA";
  g.architecture = "Synthetic";
  g.memory_gb = fig(memory_gb);
  g.memory_type = "HBM3";
  g.memory_bandwidth_gbs = fig(3350);
  g.peak_dense[static_cast<std::size_t>(specs::Precision::bf16)] = fig(989);
  g.peak_dense[static_cast<std::size_t>(specs::Precision::fp16)] = fig(989);
  g.peak_dense[static_cast<std::size_t>(specs::Precision::int8)] = fig(1979);
  if (fp8) g.peak_dense[static_cast<std::size_t>(specs::Precision::fp8)] = fig(1979);
  g.fp8 = fp8;
  g.scale_up = "nvlink";
  g.nvlink_gen = 4;
  g.scale_up_bw_gbs_bidir = fig(900);
  g.tdp_w = fig(700);
  if (mig > 0) g.mig_max_instances = fig(mig);
  g.purchase_prices.push_back({price_usd, "2025", "bare GPU", "synthetic", ""});
  specs::CloudPrice c;
  c.usd_per_gpu_hr = cloud_usd_hr;
  c.provider = "test";
  c.sku = "test";
  c.pricing = "on-demand";
  c.source = "synthetic";
  g.cloud_prices.push_back(c);
  return g;
}

class AdvisorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto source = data::DataSource::embedded();
    models_ = new workloads::ModelCatalog(workloads::ModelCatalog::load(source));
    tco_ = new tco::TcoDefaults(tco::TcoDefaults::load(source));
    frameworks_ = new std::vector<model::FrameworkProfile>(model::load_frameworks(source));
  }
  static void TearDownTestSuite() {
    delete models_;
    delete tco_;
    delete frameworks_;
  }

  AdvisorInputs inputs(const std::string& model, const std::vector<const specs::GpuSpec*>& gpus) const {
    AdvisorInputs in;
    const auto& info = models_->get(model);
    in.model_name = info.name;
    in.arch = info.arch;
    in.gpus = gpus;
    in.frameworks = *frameworks_;
    in.tco = tco_;
    return in;  // no measured calibration: every GPU gets the public tier
  }

  static Workload chat(double tpot_ms, std::int64_t max_gpus = 16) {
    Workload w;
    w.name = "test-chat";
    w.task = Task::serve;
    w.model = "llama-3.1-70b";
    w.precisions = {"bf16"};
    ServeDemand d;
    d.name = "serve";
    d.isl = 1024;
    d.osl = 256;
    d.requests_per_s = 2;
    d.ttft_ms = 2000;
    d.tpot_ms = tpot_ms;
    w.tiers.push_back(d);
    w.constraints.max_gpus = max_gpus;
    return w;
  }

  static workloads::ModelCatalog* models_;
  static tco::TcoDefaults* tco_;
  static std::vector<model::FrameworkProfile>* frameworks_;
};
workloads::ModelCatalog* AdvisorTest::models_ = nullptr;
tco::TcoDefaults* AdvisorTest::tco_ = nullptr;
std::vector<model::FrameworkProfile>* AdvisorTest::frameworks_ = nullptr;

TEST_F(AdvisorTest, WhatDoesNotFitIsRejectedWithItsNumbers) {
  const auto gpu = synthetic_gpu("Test-80GB", 80, 30000, 4);
  // One GPU at most: 70B BF16 weights (~131 GiB) cannot fit 80 GB.
  const Advice one = advise(chat(0, 1), inputs("llama-3.1-70b", {&gpu}));
  ASSERT_TRUE(one.options.empty());
  ASSERT_EQ(one.rejections.size(), 1u);
  EXPECT_EQ(one.rejections[0].rejected_by, "memory");
  const std::string& why = one.rejections[0].reasons.back();
  EXPECT_NE(why.find("do not fit"), std::string::npos) << why;
  EXPECT_NE(why.find("131."), std::string::npos) << why;  // the weights in GiB, from the memory model
  EXPECT_NE(why.find("Test-80GB"), std::string::npos) << why;

  // With room for more GPUs, the option uses tensor parallelism and says why fewer do not fit.
  const Advice many = advise(chat(0, 8), inputs("llama-3.1-70b", {&gpu}));
  ASSERT_EQ(many.options.size(), 1u);
  EXPECT_GE(many.options[0].par.tp, 2);
  EXPECT_EQ(many.options[0].reasons.front().rfind("not fewer:", 0), 0u) << many.options[0].reasons.front();
  bool kv = false;
  for (const auto& r : many.options[0].reasons) kv = kv || r.find("for KV cache") != std::string::npos;
  EXPECT_TRUE(kv);
}

TEST_F(AdvisorTest, ATighterSloNeverYieldsACheaperPlan) {
  const auto gpu = synthetic_gpu("Test-141GB", 141, 40000, 5);
  double previous = 0;
  int feasible = 0;
  for (double tpot : {0.0, 200.0, 80.0, 50.0, 35.0, 25.0, 15.0}) {
    const Advice a = advise(chat(tpot, 64), inputs("llama-3.1-70b", {&gpu}));
    if (a.options.empty()) {
      ASSERT_FALSE(a.rejections.empty());
      continue;
    }
    ++feasible;
    EXPECT_GE(a.options[0].cost, previous * (1 - 1e-9)) << "TPOT bound " << tpot;
    if (tpot > 0) {
      EXPECT_LE(a.options[0].tpot_ms, tpot);
    }
    previous = a.options[0].cost;
  }
  EXPECT_GE(feasible, 3);
}

TEST_F(AdvisorTest, BudgetAndPowerConstraintsReject) {
  const auto gpu = synthetic_gpu("Test-141GB", 141, 40000, 5);
  const Advice free = advise(chat(0), inputs("llama-3.1-70b", {&gpu}));
  ASSERT_EQ(free.options.size(), 1u);
  const Option& best = free.options[0];

  Workload tight = chat(0);
  tight.constraints.budget_usd = best.pricing[best.best_pricing].usd_total * 0.5;
  const Advice broke = advise(tight, inputs("llama-3.1-70b", {&gpu}));
  EXPECT_TRUE(broke.options.empty());
  ASSERT_EQ(broke.rejections.size(), 1u);
  EXPECT_EQ(broke.rejections[0].rejected_by, "budget");
  EXPECT_NE(broke.rejections[0].reasons.back().find("> budget"), std::string::npos);

  Workload powered = chat(0);
  powered.constraints.power_kw = best.power_kw * 0.5;
  const Advice dark = advise(powered, inputs("llama-3.1-70b", {&gpu}));
  EXPECT_TRUE(dark.options.empty());
  EXPECT_EQ(dark.rejections.at(0).rejected_by, "power");

  Workload rack = chat(0);
  rack.constraints.rack_power_kw = 1.0;  // not even one GPU's share of a server
  const Advice norack = advise(rack, inputs("llama-3.1-70b", {&gpu}));
  EXPECT_TRUE(norack.options.empty());
  EXPECT_NE(norack.rejections.at(0).reasons.back().find("rack_power_kw"), std::string::npos);
}

TEST_F(AdvisorTest, RanksByCostPerUnitOfWork) {
  const auto cheap = synthetic_gpu("Test-Cheap", 141, 20000, 2);
  const auto dear = synthetic_gpu("Test-Dear", 141, 60000, 9);
  const Advice a = advise(chat(0), inputs("llama-3.1-70b", {&dear, &cheap}));
  ASSERT_EQ(a.options.size(), 2u);
  EXPECT_EQ(a.options[0].gpu->name, "Test-Cheap");
  EXPECT_EQ(a.options[0].rank, 1);
  EXPECT_EQ(a.options[1].rank, 2);
  EXPECT_LT(a.options[0].cost, a.options[1].cost);
  EXPECT_EQ(best_per_tier(a).size(), 1u);
}

TEST_F(AdvisorTest, UnsupportedPrecisionIsRejectedNotModelled) {
  const auto no_fp8 = synthetic_gpu("Test-NoFP8", 80, 20000, 2, false);
  Workload w = chat(0);
  w.precisions = {"fp8"};
  const Advice a = advise(w, inputs("llama-3.1-70b", {&no_fp8}));
  EXPECT_TRUE(a.options.empty());
  ASSERT_EQ(a.rejections.size(), 1u);
  EXPECT_EQ(a.rejections[0].rejected_by, "precision");
  EXPECT_NE(a.rejections[0].reasons[0].find("FP8"), std::string::npos);
  EXPECT_EQ(precision_unsupported(no_fp8, "bf16"), "");
  EXPECT_EQ(precision_unsupported(no_fp8, "int4"), "");
}

TEST_F(AdvisorTest, MigSlicesPackLightTenants) {
  const auto gpu = synthetic_gpu("Test-MIG", 80, 25000, 3, true, 7);
  ASSERT_EQ(mig_profiles(gpu).size(), 4u);
  const auto slice = slice_spec(gpu, mig_profiles(gpu)[1]);
  EXPECT_DOUBLE_EQ(slice.memory_gb.value, 10);
  EXPECT_NEAR(*slice.peak_tflops(specs::Precision::bf16), 989.0 / 7, 1e-9);
  Workload w = chat(0, 64);
  w.model = "llama-3.1-8b";
  w.tiers[0].tenants = 21;
  w.tiers[0].requests_per_s = 0.05;
  w.tiers[0].osl = 128;
  w.tiers[0].isl = 256;
  const Advice a = advise(w, inputs("llama-3.1-8b", {&gpu}));
  ASSERT_EQ(a.options.size(), 1u);  // the cheapest of whole GPUs and each slice profile
  bool saw_mig = false;
  for (const auto& o : a.options) {
    if (o.mig.empty()) {
      EXPECT_EQ(o.gpus, 21 * o.replicas * o.par.tp * o.par.pp);
    } else {
      saw_mig = true;
      EXPECT_EQ(o.gpus, (21 * o.replicas + o.instances_per_gpu - 1) / o.instances_per_gpu);
    }
  }
  EXPECT_TRUE(saw_mig);
}

TEST_F(AdvisorTest, TrainingMeetsTheDeadlineOrSaysByHowMuchItMisses) {
  const auto gpu = synthetic_gpu("Test-141GB", 141, 40000, 5);
  Workload w;
  w.name = "test-train";
  w.task = Task::train;
  w.model = "llama-3.1-8b";
  w.precisions = {"bf16"};
  w.train.tokens = 1e9;
  w.train.global_batch = 64;
  w.train.seq = 4096;
  w.train.deadline_days = 1;
  w.constraints.max_gpus = 64;
  const Advice a = advise(w, inputs("llama-3.1-8b", {&gpu}));
  ASSERT_EQ(a.options.size(), 1u);
  EXPECT_LE(a.options[0].days, 1.0);
  EXPECT_GT(a.options[0].mfu, 0.05);
  // A deadline far tighter than the largest count allows: rejected with the days it would take.
  w.train.deadline_days = 1e-4;
  const Advice late = advise(w, inputs("llama-3.1-8b", {&gpu}));
  EXPECT_TRUE(late.options.empty());
  ASSERT_EQ(late.rejections.size(), 1u);
  EXPECT_EQ(late.rejections[0].rejected_by, "deadline");
  EXPECT_EQ(late.rejections[0].gpus, 64);
}

TEST_F(AdvisorTest, ResultSetCarriesRanksReasonsAndCalibration) {
  const auto gpu = synthetic_gpu("Test-141GB", 141, 40000, 5);
  const auto small = synthetic_gpu("Test-24GB", 24, 5000, 1);
  const Advice a = advise(chat(0, 4), inputs("llama-3.1-70b", {&gpu, &small}));
  ASSERT_EQ(a.options.size(), 1u);
  ASSERT_EQ(a.rejections.size(), 1u);
  const auto set = to_result_set(a);
  EXPECT_EQ(set.kind, "advise");
  ASSERT_EQ(set.records.size(), 1 + a.options.size() + a.rejections.size());
  EXPECT_EQ(set.records[0].key, "advise/workload");
  const auto& first = set.records[1];
  EXPECT_EQ(first.key, "advise/serve/1");
  EXPECT_EQ(first.params["rank"], 1);
  ASSERT_NE(first.find_metric("cost"), nullptr);
  EXPECT_EQ(first.find_metric("cost")->unit, "USD/Mtok output");
  EXPECT_EQ(first.extra["calibration"]["tier"], "public");
  EXPECT_FALSE(first.extra["reasons"].empty());
  const auto& last = set.records.back();
  EXPECT_EQ(last.outcome, results::Outcome::skipped);
  EXPECT_NE(last.reason.find("rejected (memory)"), std::string::npos);
}

// ---- workload files ----------------------------------------------------------------------------

Workload parse(const std::string& text) {
  return parse_workload(data::DataFile{"workloads/t.toml", "t.toml", text});
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kGood = R"(name = "t"
task = "serve"
model = "llama-3.1-8b"
precisions = ["bf16"]
[serve]
isl = 128
osl = 64
requests_per_s = 1
)";

TEST(WorkloadLoader, ParsesAGoodFile) {
  const Workload w = parse(kGood);
  EXPECT_EQ(w.name, "t");
  ASSERT_EQ(w.tiers.size(), 1u);
  EXPECT_DOUBLE_EQ(w.tiers[0].output_tokens_per_s(), 64);
}

TEST(WorkloadLoader, ErrorsNameTheFileAndField) {
  auto expect = [](const std::string& text, const std::string& field) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find("t.toml"), std::string::npos) << e;
    EXPECT_NE(e.find(field), std::string::npos) << "expected '" << field << "' in: " << e;
  };
  std::string missing_osl = kGood;
  missing_osl.replace(missing_osl.find("osl = 64\n"), 9, "");
  expect(missing_osl, "osl");
  expect(std::string(kGood) + "typo = 1\n", "typo");
  expect(std::string(kGood) + "output_tokens_per_day = 5\n", "requests_per_s");
  std::string bad_precision = kGood;
  bad_precision.replace(bad_precision.find("\"bf16\""), 6, "\"fp7\"");
  expect(bad_precision, "fp7");
  std::string train = kGood;
  train.replace(train.find("\"serve\""), 7, "\"train\"");
  expect(train, "serve");
  expect(std::string(kGood) + "[constraints]\nutilization = 1.5\n", "utilization");
  expect("name = \"t\"\ntask = \"cook\"\n", "task");
}

TEST(WorkloadLoader, EveryEmbeddedScenarioParsesAndIsNamedOnce) {
  const auto all = load_workloads(data::DataSource::embedded());
  ASSERT_GE(all.size(), 6u);
  bool train = false, serve = false, tiers = false, tenants = false;
  for (const auto& w : all) {
    train = train || w.task == Task::train;
    serve = serve || w.task == Task::serve;
    tiers = tiers || w.tiers.size() > 1;
    for (const auto& t : w.tiers) tenants = tenants || t.tenants > 1;
  }
  EXPECT_TRUE(train && serve && tiers && tenants);
  EXPECT_THROW(find_workload(data::DataSource::embedded(), "no-such-workload"), NotFoundError);
}

TEST_F(AdvisorTest, EveryEmbeddedScenarioGetsAnAnswerFromTheSpecDb) {
  const auto source = data::DataSource::embedded();
  const auto db = specs::SpecDb::load(source);
  const auto cals = model::load_calibrations(source);
  for (const auto& w : load_workloads(source)) {
    std::vector<const specs::GpuSpec*> gpus;
    if (w.constraints.gpus.empty()) {
      for (const auto& g : db.all()) gpus.push_back(&g);
    } else {
      for (const auto& n : w.constraints.gpus) gpus.push_back(&db.get(n));
    }
    auto in = inputs(w.model, gpus);
    in.calibrations = cals;
    const Advice a = advise(w, in);
    EXPECT_EQ(best_per_tier(a).size(), std::max<std::size_t>(1, w.tiers.size())) << w.name;
  }
}

}  // namespace
}  // namespace gpuscout::advise
