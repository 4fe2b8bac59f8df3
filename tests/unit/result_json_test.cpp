#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gpuscout/results/result_json.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/file.hpp"

namespace gpuscout::results {
namespace {

ResultSet sample_result() {
  ResultSet r;
  r.kind = "bench";
  r.provenance.tool_version = "0.1.0";
  r.provenance.git_commit = "abc123";
  r.provenance.created_utc = "2026-11-30T00:00:00Z";
  r.provenance.command_line = {"gpuscout", "bench", "--quick"};
  r.provenance.hostname = "host-1";
  r.provenance.cpus = "0-15,32-47";
  r.provenance.software = {{"driver", "580.159.04"}, {"cuda_runtime", "13.0"}};
  r.provenance.tags = {{"site", "lab"}};
  r.provenance.checks = {{"gpu0/power_limit", "warn", "GPU 0 (NVIDIA H200): power limit: 500 W enforced"}};
  GpuInfo g;
  g.index = 0;
  g.name = "NVIDIA H200";
  g.spec_name = "H200-SXM-141GB";
  g.uuid = "GPU-1234";
  g.pci_bus_id = "00000000:01:00.0";
  g.sm_count = 132;
  g.memory_bytes = 150'000'000'000;
  g.ecc_enabled = true;
  r.gpus.push_back(g);
  Record rec;
  rec.key = "gemm/bf16/m8192_n8192_k8192";
  rec.benchmark = "gemm";
  rec.gpus = {0};
  rec.params = {{"m", 8192}, {"n", 8192}, {"k", 8192}, {"precision", "bf16"}};
  Metric m{"throughput", 750.5, "TFLOP/s", "median", 40, Spread{740, 760, 745, 755, 750, 4.2}, ""};
  rec.metrics.push_back(m);
  Telemetry t;
  t.power_mean_w = 650;
  t.memory_used_max_gib = 130.5;
  t.samples = 12;
  t.throttle_reasons = {"sw_power_cap"};
  rec.telemetry = t;
  r.records.push_back(rec);
  Record skipped;
  skipped.key = "gemm/fp8/m8192_n8192_k8192";
  skipped.benchmark = "gemm";
  skipped.outcome = Outcome::not_supported;
  skipped.reason = "FP8 needs compute capability 8.9+";
  r.records.push_back(skipped);
  return r;
}

TEST(ResultJson, RoundTripsEveryField) {
  const ResultSet original = sample_result();
  const auto json = to_json(original);
  const ResultSet back = result_from_json(nlohmann::ordered_json::parse(json.dump()), "memory");
  EXPECT_EQ(to_json(back).dump(), json.dump());
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.records[1].outcome, Outcome::not_supported);
  ASSERT_TRUE(back.records[0].telemetry);
  EXPECT_EQ(*back.records[0].telemetry->power_mean_w, 650);
  EXPECT_EQ(*back.records[0].telemetry->memory_used_max_gib, 130.5);
  EXPECT_EQ(back.gpus[0].sm_count, 132);
  ASSERT_EQ(back.provenance.checks.size(), 1u);
  EXPECT_EQ(back.provenance.checks[0].key, "gpu0/power_limit");
  EXPECT_EQ(back.provenance.checks[0].status, "warn");
  EXPECT_EQ(back.provenance.cpus, "0-15,32-47");
}

// Files of schema 1.0 and 1.1 have no provenance.checks; a malformed one names the field.
TEST(ResultJson, ChecksAreOptionalAndValidated) {
  auto json = nlohmann::ordered_json::parse(to_json(sample_result()).dump());
  json["schema_version"] = "1.1";
  json["provenance"].erase("checks");
  EXPECT_TRUE(result_from_json(json, "old.json").provenance.checks.empty());
  json["provenance"]["checks"] = nlohmann::ordered_json::array({{{"status", "warn"}}});
  try {
    result_from_json(json, "bad.json");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.field(), "provenance.checks[0].key");
  }
}

TEST(ResultJson, AcceptsNewerMinorVersion) {
  auto json = nlohmann::ordered_json::parse(to_json(sample_result()).dump());
  json["schema_version"] = "1.7";
  json["a_field_from_the_future"] = 1;
  EXPECT_NO_THROW(result_from_json(json, "x.json"));
}

TEST(ResultJson, RejectsOtherMajorVersions) {
  auto json = nlohmann::ordered_json::parse(to_json(sample_result()).dump());
  json["schema_version"] = "2.0";
  try {
    result_from_json(json, "future.json");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.file(), "future.json");
    EXPECT_EQ(e.field(), "schema_version");
    EXPECT_NE(std::string(e.what()).find("upgrade gpuscout"), std::string::npos) << e.what();
  }
  json["schema_version"] = "one";
  EXPECT_THROW(result_from_json(json, "bad.json"), DataError);
}

TEST(ResultJson, NamesTheBadField) {
  auto json = nlohmann::ordered_json::parse(to_json(sample_result()).dump());
  json["records"][0]["metrics"][0]["value"] = "fast";
  try {
    result_from_json(json, "bad.json");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.field(), "records[0].metrics[0].value");
  }
  json = nlohmann::ordered_json::parse(to_json(sample_result()).dump());
  json["records"][1]["outcome"] = "great";
  try {
    result_from_json(json, "bad.json");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.field(), "records[1].outcome");
  }
  json = nlohmann::ordered_json::parse(to_json(sample_result()).dump());
  json.erase("records");
  EXPECT_THROW(result_from_json(json, "bad.json"), DataError);
  EXPECT_THROW(result_from_json(nlohmann::ordered_json::array(), "bad.json"), DataError);
}

TEST(ResultJson, FileRoundTripIsAtomicAndRejectsGarbage) {
  const auto dir = std::filesystem::temp_directory_path() / "gpuscout_result_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / "run.json";
  write_result_file(path, sample_result());
  EXPECT_EQ(read_result_file(path).records.size(), 2u);
  // No temporary file is left beside the result.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
  { std::ofstream(dir / "garbage.json") << "{ not json"; }
  EXPECT_THROW(read_result_file(dir / "garbage.json"), DataError);
  EXPECT_THROW(read_result_file(dir / "missing.json"), IoError);
  EXPECT_THROW(write_file_atomic(dir / "no_such_dir" / "x.json", "{}"), IoError);
  std::filesystem::remove_all(dir);
}

TEST(ResultSet, FailureOutcomesAndIncompleteRunsFail) {
  ResultSet r = sample_result();
  EXPECT_FALSE(r.any_failure());  // passed + not_supported
  r.records[0].outcome = Outcome::incorrect;
  EXPECT_TRUE(r.any_failure());
  r.records[0].outcome = Outcome::skipped;
  EXPECT_FALSE(r.any_failure());
  r.complete = false;
  EXPECT_TRUE(r.any_failure());
  EXPECT_TRUE(is_failure(Outcome::timeout));
  EXPECT_THROW(outcome_from_string("nope"), std::invalid_argument);
}

}  // namespace
}  // namespace gpuscout::results

TEST(ResultJson, ForeignDocumentsAreToldApartFromMalformedOnes) {
  using nlohmann::ordered_json;
  // Another tool's output: skipped by readers that take many files.
  const auto torch =
      gpuscout::results::foreign_document_reason(ordered_json{{"tool", "bench/gemm_reference.py"}, {"results", 1}});
  ASSERT_TRUE(torch);
  EXPECT_NE(torch->find("no schema_version"), std::string::npos);
  EXPECT_NE(torch->find("tool, results"), std::string::npos);
  EXPECT_TRUE(gpuscout::results::foreign_document_reason(ordered_json::array()));
  // Anything that claims to be ours is judged by result_from_json instead, which names the field.
  EXPECT_FALSE(gpuscout::results::foreign_document_reason(ordered_json{{"records", ordered_json::array()}}));
  EXPECT_FALSE(gpuscout::results::foreign_document_reason(ordered_json{{"schema_version", "1.0"}}));
  EXPECT_THROW(gpuscout::results::result_from_json(ordered_json{{"records", ordered_json::array()}}, "x.json"),
               gpuscout::DataError);
}

TEST(ResultJson, ManyFilesSkipOtherToolsOutputButNotBrokenResults) {
  namespace gr = gpuscout::results;
  const auto dir = std::filesystem::temp_directory_path() / "gpuscout_result_files_test";
  std::filesystem::create_directories(dir);
  const std::string ours = (dir / "ours.json").string(), torch = (dir / "torch.json").string(),
                    broken = (dir / "broken.json").string();
  gr::write_result_file(ours, gr::sample_result());
  { std::ofstream(torch) << R"({"tool": "bench/serve_baseline_torch.py", "steps": [1, 2]})"; }
  const auto files = gr::read_result_files({torch, ours, torch});
  ASSERT_EQ(files.read.size(), 1u);
  EXPECT_EQ(files.read[0].first, ours);
  EXPECT_EQ(files.read[0].second.records.size(), 2u);
  ASSERT_EQ(files.skipped.size(), 2u);
  EXPECT_EQ(files.skipped[1].first, torch);
  EXPECT_NE(files.skipped[1].second.find("not a gpuscout result file"), std::string::npos);
  // A file that claims to be ours but is malformed still stops the whole read, naming the file.
  { std::ofstream(broken) << R"({"schema_version": "1.0", "records": 3})"; }
  try {
    gr::read_result_files({ours, broken});
    FAIL() << "expected DataError";
  } catch (const gpuscout::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json"), std::string::npos);
  }
  // One file at a time, another tool's output is an error saying what it is.
  try {
    gr::read_result_file(torch);
    FAIL() << "expected DataError";
  } catch (const gpuscout::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not a gpuscout result file"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}
