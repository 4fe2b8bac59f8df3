// Calibration: curve interpolation, the embedded H200 table, building from result records, transfer by
// architecture family, public fallbacks, and the collective α-β model.
#include "gpuscout/model/calibration.hpp"

#include <gtest/gtest.h>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::model {
namespace {

const specs::SpecDb& db() {
  static const auto d = specs::SpecDb::load(data::DataSource::embedded());
  return d;
}

TEST(Calibration, InterpolatesInLog2AndClamps) {
  const Curve c{{1024, 0.5}, {4096, 0.7}};
  EXPECT_DOUBLE_EQ(interpolate_log2(c, 2048), 0.6);  // halfway in log2
  EXPECT_DOUBLE_EQ(interpolate_log2(c, 1), 0.5);
  EXPECT_DOUBLE_EQ(interpolate_log2(c, 1e6), 0.7);
}

TEST(Calibration, EmbeddedH200TableIsMeasured) {
  const auto cals = load_calibrations(data::DataSource::embedded());
  ASSERT_EQ(cals.size(), 1u);
  const auto& c = cals[0];
  EXPECT_EQ(c.tier, "measured");
  EXPECT_EQ(c.measured_gpu, "H200-SXM-141GB");
  EXPECT_EQ(c.architecture, "Hopper");
  EXPECT_FALSE(c.files.empty());
  // bench/results: BF16 GEMMs reach ~70% of the 989 TFLOP/s dense peak at large m.
  EXPECT_NEAR(c.gemm_efficiency(specs::Precision::bf16, 16384), 0.708, 0.01);
  EXPECT_NEAR(c.gemm_efficiency(specs::Precision::fp8, 8192), 0.62, 0.02);
  // int8 measured on squares only: bf16 curve shape, own level.
  EXPECT_NEAR(c.gemm_efficiency(specs::Precision::int8, 16384), 0.669, 0.01);
  EXPECT_NEAR(c.weight_stream_efficiency(specs::Precision::bf16), 0.635, 0.01);
  // By bytes: a 4096x4096 BF16 matrix (32 MiB) streams less well than a 28672x4096 one (224 MiB).
  EXPECT_LT(c.weight_stream_efficiency(specs::Precision::bf16, 33.6e6),
            c.weight_stream_efficiency(specs::Precision::bf16, 235e6));
  EXPECT_NEAR(c.memory_efficiency(4.0 * (1ull << 30)), 0.90, 0.01);
  EXPECT_DOUBLE_EQ(c.error_band(), 0.10);
  // 2 x H200 NCCL all-reduce (bench/results/h200x2-*.json): α ~13.5 us, busbw ~353 GB/s.
  ASSERT_TRUE(c.allreduce.has_value());
  EXPECT_NEAR(c.allreduce->alpha_us, 13.5, 1);
  EXPECT_NEAR(c.allreduce->busbw_gbs, 353, 5);
  ASSERT_TRUE(c.h2d_gbs.has_value());
  EXPECT_NEAR(*c.h2d_gbs, 55.2, 0.5);
}

TEST(Calibration, FromResultRecords) {
  results::ResultSet set;
  results::GpuInfo g;
  g.spec_name = "H200-SXM-141GB";
  set.gpus.push_back(g);
  results::Record r;
  r.key = "gemm/bf16/m8192_n8192_k8192";
  r.benchmark = "gemm";
  r.params = {{"precision", "bf16"}, {"m", 8192}, {"n", 8192}, {"k", 8192}};
  r.metrics.push_back({"throughput", 700, "TFLOP/s", "median", 10, std::nullopt, ""});
  set.records.push_back(r);
  const auto& h200 = db().get("H200-SXM-141GB");
  const auto cal = calibration_from_results({set}, h200);
  EXPECT_NEAR(cal.gemm_efficiency(specs::Precision::bf16, 8192), 700.0 / *h200.peak_tflops(specs::Precision::bf16),
              1e-9);
  // Leaving the only record out leaves nothing: a usage error naming the flag.
  EXPECT_THROW(calibration_from_results({set}, h200, r.key), UsageError);
}

TEST(Calibration, TransferWithinFamilyElsePublic) {
  const auto cals = load_calibrations(data::DataSource::embedded());
  const auto h100 = calibration_for(db().get("H100-SXM5-80GB"), cals);
  EXPECT_EQ(h100.tier, "transferred");
  EXPECT_NE(h100.source.find("H200"), std::string::npos);
  EXPECT_DOUBLE_EQ(h100.gemm_efficiency(specs::Precision::bf16, 4096),
                   cals[0].gemm_efficiency(specs::Precision::bf16, 4096));
  const auto a100 = calibration_for(db().get("A100-SXM4-80GB"), cals);
  EXPECT_EQ(a100.tier, "public");
  EXPECT_DOUBLE_EQ(a100.gemm_efficiency(specs::Precision::bf16, 8192), 0.92);
  EXPECT_DOUBLE_EQ(a100.memory_efficiency(1e9), 0.80);
  EXPECT_DOUBLE_EQ(a100.error_band(), 0.30);
}

TEST(Calibration, CollectivesFromSpecAndAlphaBeta) {
  const auto cal = public_calibration(db().get("H100-SXM5-80GB"));
  const auto h100 = collective_model(db().get("H100-SXM5-80GB"), cal, 8);
  EXPECT_NEAR(h100.busbw_gbs, 450 * 0.82, 1e-9);  // C01: 365-374 GB/s
  const auto a100 = collective_model(db().get("A100-SXM4-80GB"), cal, 8);
  EXPECT_NEAR(a100.busbw_gbs, 300 * 0.58, 1e-9);  // C02: 174 GB/s
  EXPECT_DOUBLE_EQ(collective_model(db().get("A100-SXM4-80GB"), cal, 16).busbw_gbs, 20);
  // t = α + 2(n-1)/n · S / busbw
  const CollectiveModel m{20, 400, ""};
  EXPECT_NEAR(allreduce_seconds(m, 64e6, 8), 20e-6 + 2 * 7.0 / 8 * 64e6 / 400e9, 1e-12);
  EXPECT_DOUBLE_EQ(allreduce_seconds(m, 64e6, 1), 0);
}

}  // namespace
}  // namespace gpuscout::model
