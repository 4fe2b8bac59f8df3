// Calibration: curve interpolation, the embedded H200 table, building from result records, transfer by
// architecture family, public fallbacks, and the collective models (α-β line, measured curve).
#include "gpuscout/model/calibration.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/speed.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::model {
namespace {

const specs::SpecDb& db() {
  static const auto d = specs::SpecDb::load(data::DataSource::embedded());
  return d;
}

// The embedded H200 table alone: the transfer tests below move it to other Hopper GPUs, whatever other
// tables data/calibration/ holds.
std::vector<Calibration> embedded_h200() {
  for (const auto& cal : load_calibrations(data::DataSource::embedded())) {
    if (cal.measured_gpu == "H200-SXM-141GB") return {cal};
  }
  ADD_FAILURE() << "no embedded H200 table";
  return {};
}

TEST(Calibration, InterpolatesInLog2AndClamps) {
  const Curve c{{1024, 0.5}, {4096, 0.7}};
  EXPECT_DOUBLE_EQ(interpolate_log2(c, 2048), 0.6);  // halfway in log2
  EXPECT_DOUBLE_EQ(interpolate_log2(c, 1), 0.5);
  EXPECT_DOUBLE_EQ(interpolate_log2(c, 1e6), 0.7);
}

TEST(Calibration, EmbeddedH200TableIsMeasured) {
  const auto cals = embedded_h200();
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
  // The median over every memory-bound shape, the LM heads' (session 20) included; the model uses the curve.
  EXPECT_NEAR(c.weight_stream_efficiency(specs::Precision::bf16), 0.753, 0.01);
  // The Llama-3.1-8B LM head at one row (1.05 GB): 0.24 ms, 0.905 of 4.8 TB/s, not the 243 MB point's 0.75.
  EXPECT_NEAR(c.weight_stream_efficiency(specs::Precision::bf16, 1.0509e9), 0.905, 0.01);
  // By bytes: a 4096x4096 BF16 matrix (32 MiB) streams less well than a 28672x4096 one (224 MiB).
  EXPECT_LT(c.weight_stream_efficiency(specs::Precision::bf16, 33.6e6),
            c.weight_stream_efficiency(specs::Precision::bf16, 235e6));
  // By rows (session 22): the Llama-3.1-8B layer shapes, the 8B and 70B LM heads and the 70B's TP2 layer
  // shapes measured at 1 to 128 rows. One to 16 rows stream alike; 128 rows at 0.92 of the one-row rate
  // (median: the 8B shapes 0.84-0.94, the 70B TP2 shapes, with more k per output, 0.90-0.97).
  const double gate_up = 235e6;
  EXPECT_DOUBLE_EQ(c.weight_stream_efficiency(specs::Precision::bf16, gate_up, 1),
                   c.weight_stream_efficiency(specs::Precision::bf16, gate_up));
  EXPECT_NEAR(c.weight_stream_efficiency(specs::Precision::bf16, gate_up, 16) /
                  c.weight_stream_efficiency(specs::Precision::bf16, gate_up, 1),
              1.0, 0.02);
  EXPECT_NEAR(c.weight_stream_efficiency(specs::Precision::bf16, gate_up, 128) /
                  c.weight_stream_efficiency(specs::Precision::bf16, gate_up, 1),
              0.918, 0.01);
  EXPECT_LT(c.weight_stream_efficiency(specs::Precision::fp8, 117e6, 128),
            c.weight_stream_efficiency(specs::Precision::fp8, 117e6, 1));
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

// Memory-bound GEMMs: the bytes curve takes each shape at its fewest rows, the rows curve each shape's
// time at one row over its time at more rows (median over shapes), as scripts/make-calibration.py writes them.
TEST(Calibration, WeightStreamByBytesAndRowsFromRecords) {
  results::ResultSet set;
  results::GpuInfo g;
  g.spec_name = "H200-SXM-141GB";
  set.gpus.push_back(g);
  // Times in us at 1 and 128 rows: shape A 100 -> 125 (0.8), shape B 50 -> 55 (0.909), shape C (no one-row
  // record) only at 16 rows.
  auto add = [&](double m, double n, double k, double us) {
    results::Record r;
    r.key = "gemm/bf16/m" + std::to_string(static_cast<int>(m)) + "_n" + std::to_string(static_cast<int>(n));
    r.benchmark = "gemm";
    r.params = {{"precision", "bf16"}, {"m", m}, {"n", n}, {"k", k}};
    r.metrics.push_back({"throughput", 2 * m * n * k / (us * 1e-6) / 1e12, "TFLOP/s", "median", 10, std::nullopt, ""});
    set.records.push_back(r);
  };
  add(1, 28672, 4096, 100);
  add(128, 28672, 4096, 125);
  add(1, 4096, 4096, 50);
  add(128, 4096, 4096, 55);
  add(16, 6144, 4096, 40);
  const auto& h200 = db().get("H200-SXM-141GB");
  const auto cal = calibration_from_results({set}, h200);
  const auto& curve = cal.gemm.at("bf16");
  // One point per shape, at its fewest rows (1, 1 and 16), and none from the 128-row records.
  ASSERT_EQ(curve.weight_stream_by_bytes.size(), 3u);
  const double bytes_a = (28672.0 * 4096 + 4096 + 28672) * 2;
  EXPECT_NEAR(interpolate_log2(curve.weight_stream_by_bytes, bytes_a), bytes_a / 100e-6 / 4.8e12, 1e-6);
  ASSERT_EQ(curve.weight_stream_by_rows.size(), 2u);
  EXPECT_EQ(curve.weight_stream_by_rows[0], (std::pair{1.0, 1.0}));
  EXPECT_EQ(curve.weight_stream_by_rows[1].first, 128);
  EXPECT_NEAR(curve.weight_stream_by_rows[1].second, (0.8 + 100.0 / 110) / 2, 1e-9);
  EXPECT_NEAR(cal.weight_stream_efficiency(specs::Precision::bf16, bytes_a, 128),
              bytes_a / 100e-6 / 4.8e12 * (0.8 + 100.0 / 110) / 2, 1e-6);
}

// The embedded table is what scripts/make-calibration.py wrote from the files it lists; the C++ builder
// (what `--calibration FILE...` and validate's leave-one-out use) must make the same GEMM curves of them.
TEST(Calibration, EmbeddedTableMatchesTheBuilderOnItsFiles) {
  const auto embedded = embedded_h200().at(0);
  std::vector<results::ResultSet> sets;
  for (const auto& f : embedded.files) {
    sets.push_back(results::read_result_file(std::filesystem::path(GPUSCOUT_SOURCE_DIR) / f));
  }
  const auto built = calibration_from_results(sets, db().get("H200-SXM-141GB"));
  for (const auto* prec : {"bf16", "fp8"}) {
    const auto& a = embedded.gemm.at(prec);
    const auto& b = built.gemm.at(prec);
    for (const auto& [table, builder] :
         {std::pair{&a.compute, &b.compute}, std::pair{&a.weight_stream_by_bytes, &b.weight_stream_by_bytes},
          std::pair{&a.weight_stream_by_rows, &b.weight_stream_by_rows}}) {
      ASSERT_EQ(table->size(), builder->size()) << prec;
      for (std::size_t i = 0; i < table->size(); ++i) {
        EXPECT_DOUBLE_EQ((*table)[i].first, (*builder)[i].first) << prec << " point " << i;
        EXPECT_NEAR((*table)[i].second, (*builder)[i].second, 5e-5) << prec << " point " << i;  // 4 decimals
      }
    }
  }
}

TEST(Calibration, TransferWithinFamilyElsePublic) {
  const auto cals = embedded_h200();
  ASSERT_EQ(cals.size(), 1u);
  const auto h100 = calibration_for(db().get("H100-SXM5-80GB"), cals);
  EXPECT_EQ(h100.tier, "transferred");
  EXPECT_NE(h100.source.find("H200"), std::string::npos);
  EXPECT_DOUBLE_EQ(h100.gemm_efficiency(specs::Precision::bf16, 4096),
                   cals[0].gemm_efficiency(specs::Precision::bf16, 4096));
  // Memory-bound curves move to the H100's 3.35 TB/s (the H200 table names its 4.8): a 33.5 MB weight
  // stream (Llama-3.1-8B's o projection) reaches more of it, HBM arrays of 4 GiB about the same.
  EXPECT_DOUBLE_EQ(cals[0].bandwidth_gbs, 4800);
  const double o_bytes = 33570816;
  EXPECT_GT(h100.weight_stream_efficiency(specs::Precision::bf16, o_bytes),
            cals[0].weight_stream_efficiency(specs::Precision::bf16, o_bytes) + 0.05);
  EXPECT_GT(h100.memory_efficiency(32e6), cals[0].memory_efficiency(32e6));
  EXPECT_NEAR(h100.memory_efficiency(4294967296.0), cals[0].memory_efficiency(4294967296.0), 0.002);
  EXPECT_FALSE(h100.notes.empty());
  // The same GPU's own table is not moved.
  EXPECT_DOUBLE_EQ(
      calibration_for(db().get("H200-SXM-141GB"), cals).weight_stream_efficiency(specs::Precision::bf16, o_bytes),
      cals[0].weight_stream_efficiency(specs::Precision::bf16, o_bytes));
  const auto a100 = calibration_for(db().get("A100-SXM4-80GB"), cals);
  EXPECT_EQ(a100.tier, "public");
  EXPECT_DOUBLE_EQ(a100.gemm_efficiency(specs::Precision::bf16, 8192), 0.92);
  EXPECT_DOUBLE_EQ(a100.memory_efficiency(1e9), 0.80);
  EXPECT_DOUBLE_EQ(a100.error_band(), 0.30);
}

// A memory-bound curve moved to another bandwidth keeps its best point and its sizes; below the best,
// the time above the best rate is kept as time: 1 / e' = 1 / e_max + (to / from) (1 / e - 1 / e_max).
TEST(Calibration, StreamCurveMovesItsLatencyNotItsFraction) {
  const Curve curve{{32e6, 0.5}, {1e9, 0.9}};
  EXPECT_EQ(transfer_stream_curve(curve, 4800, 4800), curve);
  EXPECT_EQ(transfer_stream_curve(curve, 0, 3350), curve);  // a table without its bandwidth: unchanged
  const auto h100 = transfer_stream_curve(curve, 4800, 3350);
  ASSERT_EQ(h100.size(), 2u);
  EXPECT_DOUBLE_EQ(h100[0].first, 32e6);
  EXPECT_DOUBLE_EQ(h100[1].second, 0.9);
  // 32 MB at 0.5 of 4.8 TB/s: 13.33 us, of which 7.41 us at 0.9 and 5.93 us latency. At 3.35 TB/s:
  // 10.61 + 5.93 = 16.54 us, 0.5775 of 3.35 TB/s.
  const double seconds = 32e6 / (0.9 * 3350e9) + (32e6 / (0.5 * 4800e9) - 32e6 / (0.9 * 4800e9));
  EXPECT_NEAR(h100[0].second, 32e6 / seconds / 3350e9, 1e-12);
  EXPECT_NEAR(h100[0].second, 0.5775, 1e-4);
  // More bandwidth: small transfers reach less of it.
  EXPECT_LT(transfer_stream_curve(curve, 4800, 8000)[0].second, 0.5);
}

// Of two tables of the family, the one whose bandwidth is nearest the target's is moved (by ratio), so an
// H800 (3.35 TB/s) takes an H100-like table over an H200-like one, and a table without a bandwidth comes
// last; the GPU's own table always wins.
TEST(Calibration, TransfersTheFamilyTableOfTheNearestBandwidth) {
  auto table = [](const std::string& gpu, double gbs, double bf16) {
    Calibration c;
    c.tier = "measured";
    c.measured_gpu = gpu;
    c.architecture = "Hopper";
    c.bandwidth_gbs = gbs;
    c.source = "test";
    c.gemm["bf16"].compute = {{8192, bf16}};
    return c;
  };
  const std::vector<Calibration> cals{table("H200-SXM-141GB", 4800, 0.70), table("H100-SXM5-80GB", 3350, 0.65)};
  const auto h800 = calibration_for(db().get("H800-SXM5-80GB"), cals);
  EXPECT_EQ(h800.tier, "transferred");
  EXPECT_EQ(h800.measured_gpu, "H100-SXM5-80GB");
  EXPECT_DOUBLE_EQ(h800.gemm_efficiency(specs::Precision::bf16, 8192), 0.65);
  EXPECT_TRUE(h800.notes.empty());  // same bandwidth: nothing moved
  // In the other order, the same choice.
  EXPECT_EQ(calibration_for(db().get("H800-SXM5-80GB"), {cals[1], cals[0]}).measured_gpu, "H100-SXM5-80GB");
  // The H200 NVL (4.8 TB/s) takes the H200's.
  EXPECT_EQ(calibration_for(db().get("H200-NVL-141GB"), cals).measured_gpu, "H200-SXM-141GB");
  // Each measured GPU keeps its own table.
  EXPECT_EQ(calibration_for(db().get("H100-SXM5-80GB"), cals).tier, "measured");
  EXPECT_EQ(calibration_for(db().get("H200-SXM-141GB"), cals).measured_gpu, "H200-SXM-141GB");
  // A table that does not name its bandwidth is taken only when no other table of the family is there.
  auto unnamed = cals;
  unnamed[1].bandwidth_gbs = 0;
  EXPECT_EQ(calibration_for(db().get("H800-SXM5-80GB"), unnamed).measured_gpu, "H200-SXM-141GB");
  EXPECT_EQ(calibration_for(db().get("H800-SXM5-80GB"), {unnamed[1]}).measured_gpu, "H100-SXM5-80GB");
}

// The H200 table transferred to an H100, against the H100's own memory-bound GEMMs and HBM arrays
// (session 28: Llama-3.1-8B's qkv, o, gate_up, down and lm_head at 1-32 rows, BF16 and FP8; read, write,
// copy and triad of 128 MiB-4 GiB; bench/results/h100-*-s28-20261207.json, run_h100_calibration_check.sh).
// The latency rule (transfer_stream_curve) against the fractions shared as they were before it.
TEST(Calibration, TransferredTablePredictsTheH100sMeasuredCurves) {
  const auto cals = embedded_h200();
  ASSERT_EQ(cals.size(), 1u);
  auto unmoved = cals;
  unmoved[0].bandwidth_gbs = 0;  // a table that does not name its bandwidth: fractions shared
  const auto& h100 = db().get("H100-SXM5-80GB");
  const Calibration moved_cal = calibration_for(h100, cals), shared_cal = calibration_for(h100, unmoved);
  const auto root = std::filesystem::path(GPUSCOUT_SOURCE_DIR) / "bench/results";
  struct Errors {
    double moved = 0, shared = 0;
    int n = 0;
  };
  Errors gemm, memory;
  for (const auto& r : results::read_result_file(root / "h100-gemm-decode-s28-20261207.json").records) {
    const double m = r.params.value("m", 0.0), n = r.params.value("n", 0.0), k = r.params.value("k", 0.0);
    if (r.outcome != results::Outcome::passed || m > 32) continue;
    const auto prec = *specs::parse_precision(r.params.value("precision", ""));
    const double measured = r.find_metric("time")->value * 1e-3, eb = prec == specs::Precision::bf16 ? 2 : 1;
    const double moved = gemm_time(SpeedContext{&h100, moved_cal, {}}, prec, r.key, m, n, k, eb).seconds;
    const double shared = gemm_time(SpeedContext{&h100, shared_cal, {}}, prec, r.key, m, n, k, eb).seconds;
    gemm.moved += std::abs(moved / measured - 1);
    gemm.shared += std::abs(shared / measured - 1);
    ++gemm.n;
  }
  for (const auto& r : results::read_result_file(root / "h100-memory-s28-20261207.json").records) {
    const double bytes = r.params.value("array_bytes", 0.0);
    if (r.outcome != results::Outcome::passed || bytes < 128.0 * (1 << 20)) continue;  // 32 MiB stays in L2
    const double measured = r.find_metric("bandwidth")->value, spec = h100.memory_bandwidth_gbs.value;
    memory.moved += std::abs(spec * moved_cal.memory_efficiency(bytes) / measured - 1);
    memory.shared += std::abs(spec * shared_cal.memory_efficiency(bytes) / measured - 1);
    ++memory.n;
  }
  ASSERT_EQ(gemm.n, 40);  // 5 layers x 4 row counts x 2 precisions
  ASSERT_EQ(memory.n, 16);
  // Measured at this commit: GEMM time MAPE 3.3% moved against 11.9% shared; HBM 4.0% against 4.7%.
  const double gemm_moved = gemm.moved / gemm.n, gemm_shared = gemm.shared / gemm.n;
  EXPECT_LT(gemm_moved, 0.05) << "shared: " << gemm_shared;
  EXPECT_LT(gemm_moved, gemm_shared / 2) << "moved: " << gemm_moved;
  EXPECT_LT(memory.moved / memory.n, 0.06) << "shared: " << memory.shared / memory.n;
  EXPECT_LE(memory.moved, memory.shared);
}

TEST(Calibration, CollectivesFromSpecAndAlphaBeta) {
  const auto cal = public_calibration(db().get("H100-SXM5-80GB"));
  const auto h100 = collective_model(db().get("H100-SXM5-80GB"), cal, 8);
  EXPECT_NEAR(h100.busbw_gbs, 450 * 0.82, 1e-9);  // C01: 365-374 GB/s
  const auto a100 = collective_model(db().get("A100-SXM4-80GB"), cal, 8);
  EXPECT_NEAR(a100.busbw_gbs, 300 * 0.58, 1e-9);  // C02: 174 GB/s
  EXPECT_DOUBLE_EQ(collective_model(db().get("A100-SXM4-80GB"), cal, 16).busbw_gbs, 20);
  // t = α + 2(n-1)/n · S / busbw
  CollectiveModel m;
  m.alpha_us = 20;
  m.busbw_gbs = 400;
  EXPECT_NEAR(allreduce_seconds(m, 64e6, 8), 20e-6 + 2 * 7.0 / 8 * 64e6 / 400e9, 1e-12);
  EXPECT_DOUBLE_EQ(allreduce_seconds(m, 64e6, 1), 0);
}

// The measured curve: flat below the smallest size, straight lines between sizes, busbw past the largest,
// and another rank count scaled by f(n) / f(curve_ranks).
TEST(Calibration, CollectiveCurveInterpolatesExtrapolatesAndScalesByRanks) {
  CollectiveModel m;
  m.alpha_us = 10;
  m.busbw_gbs = 400;
  m.curve_ranks = 2;
  m.time_by_bytes = {{1e3, 10}, {1e6, 20}, {1e8, 300}};
  EXPECT_NEAR(allreduce_seconds(m, 1, 2), 10e-6, 1e-12);
  EXPECT_NEAR(allreduce_seconds(m, 1e3 + (1e6 - 1e3) / 2, 2), 15e-6, 1e-12);
  EXPECT_NEAR(allreduce_seconds(m, 1e8, 2), 300e-6, 1e-12);
  // Past 1e8: + 2(n-1)/n · ΔS / busbw = 1 · 1e8 / 400e9 = 250 us.
  EXPECT_NEAR(allreduce_seconds(m, 2e8, 2), 550e-6, 1e-12);
  // 8 ranks: 2·7/8 over 2·1/2 = 1.75 times the 2-rank time.
  EXPECT_NEAR(allreduce_seconds(m, 1e6, 8), 1.75 * 20e-6, 1e-12);
  EXPECT_EQ(allreduce_seconds(m, 1e6, 1), 0);
  // All-to-all: (n-1)/n, 0.5 at 2 ranks, so the bandwidth term past the largest size is half.
  EXPECT_NEAR(alltoall_seconds(m, 2e8, 2), 425e-6, 1e-12);
  EXPECT_NEAR(alltoall_seconds(m, 1e6, 8), 1.75 * 20e-6, 1e-12);
}

results::Record collective_record(const std::string& op, double bytes, double us, int ranks, double busbw,
                                  const std::string& variant = "oop") {
  results::Record r;
  r.key = fmt::format("collectives/{}/float/{}/{}B", op, variant, bytes);
  r.benchmark = "collectives";
  r.params = {{"op", op}, {"bytes", bytes}, {"ranks", ranks}};
  r.metrics.push_back({"time", us, "us", "median", 3, std::nullopt, ""});
  r.metrics.push_back({"busbw", busbw, "GB/s", "median", 3, std::nullopt, ""});
  return r;
}

TEST(Calibration, CollectiveCurveFromRecordsAndLeaveOneSizeOut) {
  results::ResultSet set;
  results::GpuInfo g;
  g.spec_name = "H200-SXM-141GB";
  set.gpus.push_back(g);
  const double big = 64.0 * (1 << 20);
  for (const double us : {10.0, 12.0, 30.0}) set.records.push_back(collective_record("all_reduce", 1024, us, 2, 0));
  set.records.push_back(collective_record("all_reduce", big, 250, 2, 350));
  set.records.push_back(collective_record("all_reduce", big, 260, 2, 340, "inplace"));
  set.records.push_back(collective_record("all_reduce", 4 * big, 900, 2, 352));
  set.records.push_back(collective_record("all_reduce", 1024, 99, 4, 0));  // fewer records at 4 ranks: not the curve
  set.records.push_back(collective_record("alltoall", 1024, 14, 2, 0));
  set.records.push_back(collective_record("alltoall", big, 140, 2, 339));
  const auto& h200 = db().get("H200-SXM-141GB");
  const auto cal = calibration_from_results({set}, h200);
  ASSERT_TRUE(cal.allreduce.has_value());
  EXPECT_EQ(cal.allreduce->curve_ranks, 2);
  ASSERT_EQ(cal.allreduce->time_by_bytes.size(), 3u);
  EXPECT_EQ(cal.allreduce->time_by_bytes[0], (std::pair{1024.0, 12.0}));  // median of 10, 12, 30
  EXPECT_EQ(cal.allreduce->time_by_bytes[1], (std::pair{big, 255.0}));
  EXPECT_DOUBLE_EQ(cal.allreduce->alpha_us, 12);
  EXPECT_DOUBLE_EQ(cal.allreduce->busbw_gbs, 352);
  ASSERT_TRUE(cal.alltoall.has_value());
  EXPECT_EQ(cal.alltoall->time_by_bytes.size(), 2u);
  // Leaving out the in-place 64 MiB record takes its out-of-place twin too; the other op keeps its size.
  const auto out = calibration_from_results({set}, h200, set.records[4].key);
  ASSERT_TRUE(out.allreduce.has_value());
  ASSERT_EQ(out.allreduce->time_by_bytes.size(), 2u);
  EXPECT_EQ(out.allreduce->time_by_bytes[0].first, 1024);
  EXPECT_EQ(out.allreduce->time_by_bytes[1].first, 4 * big);
  ASSERT_TRUE(out.alltoall.has_value());
  EXPECT_EQ(out.alltoall->time_by_bytes.size(), 2u);
}

Calibration parse_text(const std::string& collective) {
  const std::string text =
      "[calibration]\ngpu = \"H200-SXM-141GB\"\narchitecture = \"Hopper\"\nsource = \"test\"\n"
      "files = []\n\n[allreduce]\nalpha_us = 13\nbusbw_gbs = 350\n" +
      collective;
  return parse_calibration(data::DataFile{"calibration/t.toml", "t.toml", text});
}

TEST(Calibration, ParsesTheCollectiveCurveAndNamesBadFields) {
  const auto cal = parse_text("ranks = 2\ntime_by_bytes = [[1048576, 16.0], [8, 13.5]]\n");
  ASSERT_TRUE(cal.allreduce.has_value());
  ASSERT_EQ(cal.allreduce->time_by_bytes.size(), 2u);
  EXPECT_EQ(cal.allreduce->time_by_bytes[0].first, 8);  // sorted by size
  EXPECT_NEAR(allreduce_seconds(*cal.allreduce, 1048576, 2), 16e-6, 1e-12);
  // Without a curve: the α-β line.
  EXPECT_TRUE(parse_text("").allreduce->time_by_bytes.empty());
  const auto message = [](const std::string& collective) {
    try {
      parse_text(collective);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("ranks = 2\ntime_by_bytes = [[8, 13.5], [8, 14.0]]\n").find("twice"), std::string::npos);
  const auto bad_pair = message("ranks = 2\ntime_by_bytes = [[8]]\n");
  EXPECT_NE(bad_pair.find("time_by_bytes"), std::string::npos) << bad_pair;
  EXPECT_NE(bad_pair.find("t.toml"), std::string::npos) << bad_pair;
  EXPECT_NE(message("ranks = 2\ntime_by_bytes = [[8, -1.0]]\n").find("> 0"), std::string::npos);
  EXPECT_NE(message("time_by_bytes = [[8, 13.5]]\n").find("ranks"), std::string::npos);
  EXPECT_NE(message("ranks = 2\ntime_by_bytes = []\n").find("empty"), std::string::npos);
}

}  // namespace
}  // namespace gpuscout::model
