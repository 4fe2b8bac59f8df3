#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpuscout/report/table.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::report {
namespace {

Table sample() {
  Table t;
  t.key = "gpus";
  t.title = "Sample GPUs";
  t.add_column("name", "GPU");
  t.add_column("bf16_tflops", "BF16", "TFLOP/s", 1, Align::right);
  t.add_column("memory_gb", "Memory", "GB", 0, Align::right);
  t.add_column("fp8", "FP8");
  t.add_row({std::string("H200-SXM-141GB"), 989.4, std::int64_t{141}, true});
  t.add_row({std::string("A100, \"SXM4\" | 80GB"), 312.0, std::int64_t{80}, false});
  t.add_row({std::string("V100"), std::monostate{}, std::int64_t{32}, false});
  t.notes.push_back("dense figures, no sparsity");
  return t;
}

std::string golden(const std::string& name) {
  std::ifstream in(std::string(GPUSCOUT_GOLDEN_DIR) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Table, RendersEveryFormatAsTheGoldenFiles) {
  const Table t = sample();
  EXPECT_EQ(render(t, Format::table), golden("table_sample.txt"));
  EXPECT_EQ(render(t, Format::csv), golden("table_sample.csv"));
  EXPECT_EQ(render(t, Format::md), golden("table_sample.md"));
  EXPECT_EQ(render(t, Format::json), golden("table_sample.json"));
}

TEST(Table, JsonKeepsNumbersAndNulls) {
  const auto json = nlohmann::json::parse(render(sample(), Format::json));
  ASSERT_EQ(json.size(), 3u);
  EXPECT_DOUBLE_EQ(json[0]["bf16_tflops"].get<double>(), 989.4);
  EXPECT_TRUE(json[2]["bf16_tflops"].is_null());
  EXPECT_EQ(json[0]["fp8"], true);
}

TEST(Table, MultipleTablesInJsonAreKeyed) {
  Table other;
  other.key = "other";
  other.add_column("x", "X");
  other.add_row({std::int64_t{1}});
  const auto json = nlohmann::json::parse(render(std::vector<Table>{sample(), other}, Format::json));
  EXPECT_TRUE(json["gpus"]["rows"].is_array());
  EXPECT_EQ(json["gpus"]["notes"][0], "dense figures, no sparsity");
  EXPECT_EQ(json["other"][0]["x"], 1);
}

TEST(Table, RejectsRowsOfTheWrongWidth) {
  Table t = sample();
  EXPECT_THROW(t.add_row({std::string("only one cell")}), std::logic_error);
}

TEST(Table, ParsesFormatsAndNamesTheFlag) {
  EXPECT_EQ(parse_format("md"), Format::md);
  EXPECT_EQ(parse_format("markdown"), Format::md);
  try {
    parse_format("xml");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--format"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuscout::report
