// The TCO model against the worked example of ../shared/reference/specs.md §8.4, and the data file's
// validation and overrides.
#include <gtest/gtest.h>

#include <cmath>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/tco/tco.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::tco {
namespace {

class TcoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    specs_ = new specs::SpecDb(specs::SpecDb::load(data::DataSource::embedded()));
    defaults_ = new TcoDefaults(TcoDefaults::load(data::DataSource::embedded()));
  }
  static void TearDownTestSuite() {
    delete specs_;
    delete defaults_;
  }
  static TcoInputs inputs(const char* gpu) { return TcoInputs::resolve(*defaults_, specs_->get(gpu)); }
  static specs::SpecDb* specs_;
  static TcoDefaults* defaults_;
};
specs::SpecDb* TcoTest::specs_ = nullptr;
TcoDefaults* TcoTest::defaults_ = nullptr;

struct WorkedRow {
  const char* gpu;
  double capex_k, capital, energy, colo, opex, total, at_70, r8_n6, r12_n3;
};

// specs.md §8.4: r = 10%, N = 5, PUE 1.3, $0.08/kWh, $185/kW-month, 3% maintenance, $200 staff.
TEST_F(TcoTest, ReproducesTheWorkedExampleOfSpecsSection8_4) {
  const WorkedRow rows[] = {
      {"A100-SXM4-80GB", 24.4, 0.74, 0.07, 0.23, 0.10, 1.14, 1.63, 1.01, 1.56},
      {"H100-SXM5-80GB", 40.3, 1.21, 0.11, 0.36, 0.16, 1.84, 2.63, 1.62, 2.54},
      {"H200-SXM-141GB", 45.0, 1.35, 0.11, 0.36, 0.18, 2.00, 2.85, 1.75, 2.78},
      {"B200", 54.6, 1.64, 0.15, 0.50, 0.21, 2.51, 3.58, 2.21, 3.46},
      {"GB200 (per GPU, NVL72)", 47.9, 1.44, 0.15, 0.49, 0.19, 2.27, 3.24, 2.01, 3.10},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.gpu);
    auto in = inputs(row.gpu);
    const auto r = compute_tco(in, 1);
    EXPECT_NEAR(r.capex_per_gpu_usd / 1000, row.capex_k, 0.051);
    // Components are printed rounded to cents in the source table; one cent of slack for its rounding.
    EXPECT_NEAR(r.capital_usd_per_gpu_hr, row.capital, 0.011);
    EXPECT_NEAR(r.energy_usd_per_gpu_hr, row.energy, 0.011);
    EXPECT_NEAR(r.colo_usd_per_gpu_hr, row.colo, 0.011);
    EXPECT_NEAR(r.opex_usd_per_gpu_hr, row.opex, 0.011);
    EXPECT_NEAR(r.usd_per_gpu_hr, row.total, 0.006);
    EXPECT_NEAR(r.usd_per_useful_gpu_hr, row.at_70, 0.011);
    in.set("cost_of_capital", 0.08, "test");
    in.set("years", 6, "test");
    EXPECT_NEAR(compute_tco(in, 1).usd_per_gpu_hr, row.r8_n6, 0.011);
    in.set("cost_of_capital", 0.12, "test");
    in.set("years", 3, "test");
    EXPECT_NEAR(compute_tco(in, 1).usd_per_gpu_hr, row.r12_n3, 0.011);
  }
}

TEST_F(TcoTest, H100ElectricityCheckAndTotals) {
  // specs.md §8.4: 1.4 kW x 0.75 x 1.3 x $0.08 = $0.11/hr, about $1k per year.
  const auto r = compute_tco(inputs("h100"), 8, 1000.0);
  EXPECT_NEAR(r.it_kw_provisioned, 1.4025, 1e-9);
  EXPECT_NEAR(r.annual_energy_usd, 958.5, 1);
  EXPECT_NEAR(r.total_usd, r.annual_total_usd * 5 * 8, 1e-6);
  // $/Mtok = $/useful GPU-hr x GPUs / (tokens/s x 3600) x 1e6.
  ASSERT_TRUE(r.usd_per_mtok);
  EXPECT_NEAR(*r.usd_per_mtok, r.usd_per_useful_gpu_hr * 8 / (1000 * 3600.0) * 1e6, 1e-9);
  ASSERT_FALSE(r.rent.empty());
  EXPECT_DOUBLE_EQ(r.rent[0].usd_per_gpu_hr, 6.88);  // the spec DB's reference on-demand price (AWS)
  ASSERT_TRUE(r.break_even_utilization);
  EXPECT_NEAR(*r.break_even_utilization, r.usd_per_gpu_hr / 6.88, 1e-12);
  const RentOption& reserved = r.rent.back();
  EXPECT_DOUBLE_EQ(reserved.usd_per_gpu_hr, 1.30);  // SemiAnalysis 3-yr rental
  EXPECT_NEAR(reserved.usd_per_useful_gpu_hr, 1.30 / 0.7, 1e-12);
}

TEST_F(TcoTest, CapitalRecoveryAndResidualValue) {
  EXPECT_NEAR(capital_recovery_factor(0.10, 5), 0.263797, 1e-6);
  EXPECT_DOUBLE_EQ(capital_recovery_factor(0, 4), 0.25);
  auto in = inputs("h100");
  in.set("residual_value_fraction", 0.2, "test");
  const auto r = compute_tco(in, 1);
  EXPECT_NEAR(r.annual_capital_usd, (r.capex_per_gpu_usd - 0.2 * r.capex_per_gpu_usd / std::pow(1.1, 5)) * r.crf, 1e-6);
}

TEST_F(TcoTest, GpusWithoutServerPricesAreDerivedAndLabelled) {
  const auto in = inputs("l40s");
  const Parameter* capex = in.find("server_capex_usd");
  ASSERT_NE(capex, nullptr);
  EXPECT_EQ(capex->origin, "derived");
  EXPECT_DOUBLE_EQ(capex->value, 9000 * 1.64 * 8);
  EXPECT_NEAR(in.get("it_power_kw_per_gpu"), 0.35 * 1.82, 1e-12);
  EXPECT_FALSE(in.notes.empty());
}

TEST_F(TcoTest, OverridesAreValidatedAndNamed) {
  auto in = inputs("h100");
  in.set_from_text("pue=1.1");
  EXPECT_DOUBLE_EQ(in.get("pue"), 1.1);
  EXPECT_EQ(in.find("pue")->origin, "--set");
  EXPECT_THROW(in.set_from_text("pue"), UsageError);
  EXPECT_THROW(in.set_from_text("pue=abc"), UsageError);
  EXPECT_THROW(in.set_from_text("utilisation=0.5"), UsageError);
  EXPECT_THROW(in.set_from_text("utilization=1.5"), UsageError);
  EXPECT_THROW(in.set_from_text("utilization=0"), UsageError);
  EXPECT_THROW(in.set_from_text("pue=-1"), UsageError);
  in.apply_config({"my.toml", "my.toml", "years = 4\nelectricity_usd_per_kwh = 0.12\n"});
  EXPECT_DOUBLE_EQ(in.get("years"), 4);
  EXPECT_EQ(in.find("years")->origin, "config my.toml");
  EXPECT_THROW(in.apply_config({"bad.toml", "bad.toml", "year = 4\n"}), DataError);
  EXPECT_THROW(in.apply_config({"bad.toml", "bad.toml", "years = \"four\"\n"}), DataError);
  EXPECT_THROW(compute_tco(in, 0), UsageError);
  EXPECT_THROW(compute_tco(in, 1, -5.0), UsageError);
}

// Token cost: the input and output prices add back up to the hourly cost, the split follows the
// prefill share, and every way to pay of the TCO result gets a row.
TEST_F(TcoTest, TokenCostSplitsTheHourlyCostByPhase) {
  auto in = inputs("H100-SXM5-80GB");
  const auto r = compute_tco(in, 8);
  const double input_tps = 40000, output_tps = 10000, share = 0.25;
  const auto costs = token_costs(r, input_tps, output_tps, share);
  ASSERT_EQ(costs.size(), 1 + r.rent.size());
  EXPECT_EQ(costs[0].pay.way, "own");
  for (const auto& c : costs) {
    const double usd_per_s = c.pay.usd_per_useful_gpu_hr * 8 / 3600;
    EXPECT_NEAR((input_tps * c.input_usd_per_mtok + output_tps * c.output_usd_per_mtok) / 1e6, usd_per_s,
                1e-12 * usd_per_s)
        << c.pay.way;
    EXPECT_NEAR(c.total_usd_per_mtok, usd_per_s / (input_tps + output_tps) * 1e6, 1e-9) << c.pay.way;
    // A quarter of the time for four times the tokens: an input token costs 1/12 of an output token.
    EXPECT_NEAR(c.input_usd_per_mtok / c.output_usd_per_mtok, (share / input_tps) / ((1 - share) / output_tps), 1e-9);
  }
  // The owner's figure equals tco's own per-M-token figure at the blended throughput.
  const auto with_tps = compute_tco(in, 8, input_tps + output_tps);
  EXPECT_NEAR(costs[0].total_usd_per_mtok, *with_tps.usd_per_mtok, 1e-9);
  EXPECT_THROW(token_costs(r, 0, output_tps, share), UsageError);
  EXPECT_THROW(token_costs(r, input_tps, output_tps, 1.5), UsageError);
}

TEST_F(TcoTest, RunCostIsGpuHoursTimesPricePerUsefulHour) {
  auto in = inputs("H100-SXM5-80GB");
  in.set("utilization", 0.5, "test");
  const auto r = compute_tco(in, 16);
  const auto runs = run_costs(r, 100);
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs[0].pay.way, "own");
  EXPECT_DOUBLE_EQ(runs[0].gpu_hours, 1600);
  EXPECT_NEAR(runs[0].usd, 1600 * r.usd_per_gpu_hr / 0.5, 1e-6);
  for (const auto& c : runs) EXPECT_FALSE(c.pay.contract) << c.pay.way;  // no multi-year contract for one run
  EXPECT_THROW(run_costs(r, 0), UsageError);
}

TEST_F(TcoTest, DataFileIsValidated) {
  EXPECT_THROW(TcoDefaults::parse({"tco.toml", "tco.toml", "[[parameter]]\nkey = \"pue\"\nvalue = 1.3\n"}), DataError);
  // Every GPU the data file names exists in the spec database.
  for (const auto& g : defaults_->gpus()) EXPECT_NE(specs_->find(g.gpu), nullptr) << g.gpu;
  // Every default sits inside its range and has a source.
  for (const auto& p : defaults_->parameters()) {
    EXPECT_FALSE(p.source.empty()) << p.key;
    if (p.low) EXPECT_GE(p.value, *p.low) << p.key;
    if (p.high) EXPECT_LE(p.value, *p.high) << p.key;
  }
}

}  // namespace
}  // namespace gpuscout::tco
