// Pins the speed model's validation error (docs/modeling.md "Validation"): per-category MAPE over the
// published results of data/validation/public_results.csv and over the project's own H200 GEMM and memory
// figures (GEMM, memory, NCCL all-reduce; leave-one-out). A change to the model that moves a figure fails here; update
// the pins only with a reason in the commit message. Targets (issue #5): training 15%, inference throughput and TTFT
// 25%, own measurements 10%.
#include "gpuscout/model/validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/results/result_json.hpp"

namespace gpuscout::model {
namespace {

ValidationReport run_all() {
  const auto source = data::DataSource::embedded();
  const auto specs = specs::SpecDb::load(source);
  const auto catalog = workloads::ModelCatalog::load(source);
  auto report = validate_public(source.read("validation/public_results.csv")->content, specs, catalog,
                                load_calibrations(source), load_frameworks(source));
  std::vector<results::ResultSet> sets;
  std::vector<std::string> names;
  // The files the embedded H200 calibration table was generated from (a fixed list: new result files in
  // bench/results must not move the pinned figures).
  const auto calibrations = load_calibrations(source);
  const auto h200 = std::find_if(calibrations.begin(), calibrations.end(),
                                 [](const Calibration& c) { return c.measured_gpu == "H200-SXM-141GB"; });
  if (h200 == calibrations.end()) throw std::runtime_error("no embedded H200 calibration table");
  for (const auto& f : h200->files) {
    sets.push_back(results::read_result_file(std::filesystem::path(GPUSCOUT_SOURCE_DIR) / f));
    names.push_back(f);
  }
  validate_own(report, sets, specs.get("H200-SXM-141GB"), names);
  return report;
}

TEST(Validation, CsvParserKeepsQuotedCommas) {
  const auto rows = parse_csv("a,b\n1,\"x, y\"\n");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("b"), "x, y");
}

TEST(Validation, PublicRowsKeepTheirSources) {
  const auto report = run_all();
  for (const auto& r : report.rows) EXPECT_FALSE(r.source.empty()) << r.id;
  EXPECT_EQ(report.count.at("training"), 7u);
  EXPECT_EQ(report.count.at("inference_throughput"), 7u);
  EXPECT_EQ(report.count.at("ttft"), 3u);
  EXPECT_EQ(report.skipped.size(), 3u);  // C01-C03: microbenchmarks of other GPUs (used as calibration anchors)
}

// A file whose only calibration record is the one being predicted: leave-one-out leaves nothing, so
// that row is skipped with the reason instead of ending the whole validation.
TEST(Validation, OwnRecordWithoutOthersIsSkipped) {
  const auto source = data::DataSource::embedded();
  const auto specs = specs::SpecDb::load(source);
  const std::string name = "bench/results/h200x2-gpu0-serve-llama-3.1-8b-s5-20261130.json";
  const std::vector<results::ResultSet> sets{
      results::read_result_file(std::filesystem::path(GPUSCOUT_SOURCE_DIR) / name)};
  ValidationReport report;
  validate_own(report, sets, specs.get("H200-SXM-141GB"), {name});
  EXPECT_TRUE(report.rows.empty());
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_NE(report.skipped[0].find("gemm/bf16/m8192_n8192_k8192"), std::string::npos) << report.skipped[0];
  EXPECT_NE(report.skipped[0].find("leave-one-out"), std::string::npos) << report.skipped[0];
}

TEST(Validation, MapePinned) {
  const auto report = run_all();
  const auto& m = report.mape_pct;
  // Pinned values (±0.5 percentage points) as of this commit.
  EXPECT_NEAR(m.at("training"), 12.5, 0.5);
  // 22.2 until session 20 measured the LM head's GEMM (0.24 ms for Llama-3.1-8B's, not the 0.29 the flat
  // end of the weight-stream curve gave): the faster LM head moves the H100 rows up, the over-predicted a little more.
  // 22.3 since session 22's rows curve and 70B layer shapes (the H100 rows' decode GEMMs).
  // 22.9 since session 28 moved the transferred weight-stream curves to the H100's bandwidth
  // (transfer_stream_curve): its decode GEMMs get faster, and I20 (70B FP8 TP2, 2048/2048, already
  // over-predicted) goes +59.9% -> +64.3%; I17/I18 (under-predicted) improve by 0.1/0.6 points. The own
  // H100 serve rows, which test the transfer directly, went 3.7% -> 2.6%
  // (ServingSimTest.PredictsTheH100AgainstTheH200).
  EXPECT_NEAR(m.at("inference_throughput"), 22.9, 0.5);
  EXPECT_NEAR(m.at("ttft"), 14.1, 0.5);
  // 3.3 until session 17 added the mid-m (256, 512) Llama shapes, the hardest to predict leave-one-out;
  // 3.9 until session 22 priced memory-bound GEMMs by their rows too (weight_stream_by_rows: 128 rows
  // stream at 0.92 of the one-row rate), not only by the bytes that rows add, and measured the 70B's TP2
  // layer shapes (32 more rows to predict).
  EXPECT_NEAR(m.at("own_gemm"), 3.3, 0.5);
  EXPECT_NEAR(m.at("own_memory"), 5.5, 0.5);
  // 2 x H200 NCCL all-reduce, 8 B - 8 GiB, leave-one-size-out: 6.5 with the α-β line
  // until session 20 gave the model the measured curve (time per message size, straight lines between).
  EXPECT_NEAR(m.at("own_collective"), 3.2, 0.5);
  // Targets of issue #5 that are reached must stay reached.
  EXPECT_LE(m.at("training"), 15);
  EXPECT_LE(m.at("inference_throughput"), 25);
  EXPECT_LE(m.at("ttft"), 25);
  EXPECT_LE(m.at("own_memory"), 10);
  EXPECT_LE(m.at("own_gemm"), 10);
  EXPECT_LE(m.at("own_collective"), 10);
}

}  // namespace
}  // namespace gpuscout::model
