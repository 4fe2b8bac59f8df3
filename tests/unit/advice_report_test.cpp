// The report's advice section (report --advice): ranked table, reasons, the TCO stacked-bar chart,
// rejections and calibration sources, with every user-controlled string escaped.
#include <gtest/gtest.h>

#include <string>

#include "gpuscout/report/html_report.hpp"

namespace gpuscout::report {
namespace {

using nlohmann::ordered_json;

const std::string kHostile = "<script>alert(1)</script>\"'&</svg>";

results::Record option(int rank, const std::string& gpu, double cost) {
  results::Record r;
  r.key = "advise/serve/" + std::to_string(rank);
  r.benchmark = "advise";
  r.params = ordered_json{{"tier", "serve"}, {"rank", rank}, {"gpu", gpu}, {"mig", ""},     {"gpus", 4},
                          {"tp", 4},         {"pp", 1},      {"dp", 1},    {"replicas", 2}, {"precision", "fp8"}};
  r.metrics.push_back({"cost", cost, "USD/Mtok output", "value", 0, std::nullopt, ""});
  r.metrics.push_back({"ttft", 250, "ms", "value", 0, std::nullopt, ""});
  r.extra = ordered_json{
      {"pricing",
       ordered_json::array({{{"way", "own"}, {"usd_per_gpu_hr", 2.0}, {"usd_per_unit", cost}},
                            {{"way", "rent on-demand"}, {"usd_per_gpu_hr", 6.0}, {"usd_per_unit", cost * 3}}})},
      {"best_pricing", "own"},
      {"own_usd_per_gpu_hr", {{"capital", 1.0}, {"energy", 0.5}, {"colocation", 0.3}, {"opex", 0.2}}},
      {"reasons", ordered_json::array({"weights 70 GiB leave 8 GiB " + kHostile})},
      {"calibration", {{"tier", "measured"}, {"source", "h200 " + kHostile}, {"error_band_pct", 10}}}};
  return r;
}

results::ResultSet advice_set() {
  results::ResultSet set;
  set.kind = "advise";
  set.provenance.command_line = {"gpuscout", "advise", kHostile};
  results::Record head;
  head.key = "advise/workload";
  head.benchmark = "advise-workload";
  head.params = ordered_json{{"workload", kHostile}, {"task", "serve"}, {"model", "m"}};
  head.extra = ordered_json{{"description", kHostile}, {"assumptions", ordered_json::array({"an assumption"})}};
  set.records.push_back(head);
  set.records.push_back(option(1, "GPU-A" + kHostile, 0.5));
  set.records.push_back(option(2, "GPU-B", 0.9));
  results::Record no = option(0, "GPU-C", 0);
  no.outcome = results::Outcome::skipped;
  no.extra["rejected_by"] = "memory";
  no.extra["reasons"] = ordered_json::array({"weights 141 GiB do not fit 80 GiB"});
  set.records.push_back(no);
  return set;
}

TEST(AdviceReport, RanksExplainsChartsAndEscapes) {
  const ReportInput advice{"advice " + kHostile + ".json", advice_set()};
  ReportOptions options;
  options.advice = &advice;
  const std::string html = render_html_report({}, options);
  EXPECT_NE(html.find("<section id=\"advice\">"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  // Rank 1 before rank 2, the reasons and the rejection with its numbers.
  const auto a = html.find("4x GPU-A");
  const auto b = html.find("4x GPU-B");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_NE(html.find("weights 70 GiB leave 8 GiB"), std::string::npos);
  EXPECT_NE(html.find("weights 141 GiB do not fit 80 GiB"), std::string::npos);
  EXPECT_NE(html.find("TP4 x2 replicas"), std::string::npos);
  // The stacked chart: one own and one rent bar per option, the four owner terms and the rent series.
  EXPECT_NE(html.find("advice-cost-0"), std::string::npos);
  for (const char* s : {"#1 own", "#1 rent", "#2 own", "capital", "energy", "colocation", "rent on-demand"}) {
    EXPECT_NE(html.find(s), std::string::npos) << s;
  }
  EXPECT_NE(html.find("measured (h200"), std::string::npos);
  EXPECT_NE(html.find("an assumption"), std::string::npos);
}

TEST(AdviceReport, TrainingOptionsShowDaysAndMfuNotLatency) {
  results::ResultSet set;
  set.kind = "advise";
  results::Record r = option(1, "GPU-T", 1e5);
  r.params["tier"] = "train";
  r.metrics = {{"cost", 1e5, "USD/run", "value", 0, std::nullopt, ""},
               {"time_to_train", 30, "days", "value", 0, std::nullopt, ""},
               {"mfu", 45, "%", "value", 0, std::nullopt, ""}};
  set.records.push_back(r);
  const ReportInput advice{"train.json", set};
  ReportOptions options;
  options.advice = &advice;
  const std::string html = render_html_report({}, options);
  EXPECT_NE(html.find("MFU %"), std::string::npos);
  EXPECT_NE(html.find("Run USD"), std::string::npos);
  EXPECT_EQ(html.find("TTFT ms"), std::string::npos);
}

TEST(AdviceReport, NoAdviceNoSection) {
  const std::string html = render_html_report({{"empty.json", results::ResultSet{}}}, {});
  EXPECT_EQ(html.find("id=\"advice\""), std::string::npos);
}

}  // namespace
}  // namespace gpuscout::report
