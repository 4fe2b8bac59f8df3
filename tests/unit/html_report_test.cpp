#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/report/html_report.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/tco/tco.hpp"

namespace gpuscout::report {
namespace {

using results::Metric;
using results::Outcome;
using results::Record;
using results::ResultSet;

// Every way to break out of HTML text, an attribute value or an inline <svg>.
const std::string kHostile = "<script>alert(1)</script>\"'&amp;</svg><img src=x onerror=alert(2)>\" onmouseover=\"x";

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Metric metric(const std::string& name, double value, const std::string& unit) {
  Metric m{name,     value, unit,
           "median", 10,    results::Spread{value * 0.9, value * 1.1, value * 0.95, value * 1.05, value, 1},
           kHostile};
  return m;
}

// A result with the hostile string in every string field the report can print, and records of every
// kind so that every section and chart is drawn.
ResultSet hostile_result() {
  ResultSet r;
  r.kind = kHostile;
  auto& p = r.provenance;
  p.tool_version = kHostile;
  p.git_commit = kHostile;
  p.created_utc = kHostile;
  p.command_line = {kHostile, "--tags", kHostile};
  p.hostname = kHostile;
  p.os = kHostile;
  p.cpu = kHostile;
  p.software = {{"driver", kHostile}, {"cuda_runtime", kHostile}, {"nccl", kHostile}, {kHostile, kHostile}};
  p.environment = {{kHostile, kHostile}};
  p.tags = {{kHostile, kHostile}, {"model", kHostile}};
  p.data_source = kHostile;
  p.checks = {{kHostile, kHostile, kHostile}};
  results::GpuInfo g;
  g.name = kHostile;
  g.spec_name = kHostile;
  g.uuid = kHostile;
  g.pci_bus_id = kHostile;
  g.compute_capability = kHostile;
  r.gpus = {g};

  auto add = [&](const std::string& key, const std::string& benchmark, nlohmann::ordered_json params,
                 std::vector<Metric> metrics, Outcome outcome = Outcome::passed) {
    Record rec;
    rec.key = key;
    rec.benchmark = benchmark;
    rec.params = std::move(params);
    rec.metrics = std::move(metrics);
    rec.outcome = outcome;
    rec.reason = outcome == Outcome::passed ? "" : kHostile;
    rec.telemetry = results::Telemetry{};
    rec.telemetry->samples = 3;  // so that the telemetry section prints the reasons too
    rec.telemetry->throttle_reasons = {kHostile};
    rec.extra["peak"] = {{"value", 100.0}, {"source", kHostile}};
    r.records.push_back(std::move(rec));
  };
  add("gemm/" + kHostile + "/m1_n1_k1", "gemm", {{"precision", kHostile}}, {metric("throughput", 500, kHostile)});
  add("gemm/bf16/" + kHostile, "gemm", {{"precision", "bf16"}}, {metric("throughput", 700, "TFLOP/s")});
  for (double size : {1e6, 1e9})
    add("memory/" + kHostile + "/" + kHostile, "memory", {{"op", kHostile}, {"array_bytes", size}},
        {metric("bandwidth", 3000, "GB/s")});
  add("transfer/" + kHostile + "/" + kHostile, "transfer", {{"bytes", 1e6}}, {metric("bandwidth", 50, "GB/s")});
  add("transfer/" + kHostile, "transfer", nlohmann::ordered_json::object(), {metric("latency", 1.2, kHostile)});
  add("p2p/" + kHostile + "/0_1", "p2p", {{"src", 0}, {"dst", 1}, {"variant", kHostile}},
      {metric("bandwidth", 390, kHostile)});
  for (double size : {8.0, 1024.0})
    add("nccl/" + kHostile + "/" + kHostile, kHostile, {{"bytes", size}, {"collective", kHostile}},
        {metric("busbw", 300, kHostile), metric("algbw", 150, kHostile), metric("time", 3, kHostile)});
  add(kHostile, kHostile, nlohmann::ordered_json::object(), {metric(kHostile, 1, kHostile)}, Outcome::failed);
  return r;
}

TEST(HtmlReport, HostileStringsNeverSurviveUnescaped) {
  ReportOptions options;
  options.title = kHostile;
  options.generator = kHostile;
  options.banner_notes = {kHostile};
  const std::string html = render_html_report({{kHostile, hostile_result()}}, options);

  // Every section that charts these records was drawn (so the strings really went through them).
  for (const char* id : {"chart-gemm", "chart-memory", "chart-transfer", "chart-p2p", "chart-busbw", "id=\"summary\"",
                         "id=\"provenance\"", "id=\"definitions\"", "Checks at start",
                         "1 run(s) were measured with 1 doctor finding(s)"})
    EXPECT_NE(html.find(id), std::string::npos) << id;

  EXPECT_EQ(html.find(kHostile), std::string::npos);
  const std::string l = lower(html);
  EXPECT_EQ(l.find("<script"), std::string::npos);
  EXPECT_EQ(l.find("<img"), std::string::npos);
  EXPECT_EQ(l.find("onmouseover=\""), std::string::npos);
  EXPECT_GT(count(html, "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;amp;&lt;/svg&gt;"), 20u);
  // Inline SVGs open and close in pairs: no hostile </svg> closed one early.
  EXPECT_EQ(count(html, "<svg "), count(html, "</svg>"));
  EXPECT_EQ(count(html, "<svg "), 5u);
  // Every ampersand starts an entity this report writes.
  const std::regex bare_amp("&(?!(amp|lt|gt|quot|#39|middot);)");
  EXPECT_FALSE(std::regex_search(html, bare_amp));
}

TEST(HtmlReport, SelfContainedWithoutNetworkReferences) {
  const ResultSet r = results::read_result_file(std::string(GPUSCOUT_TEST_DATA_DIR) + "/results/fixture-run-a.json");
  const std::string html = render_html_report({{"fixture-run-a.json", r}}, {});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_NE(html.find("@media print"), std::string::npos);
  EXPECT_NE(html.find("@media (max-width:"), std::string::npos);
  const std::regex remote(R"((src|href)\s*=\s*["']?\s*(https?:)?//|url\(|@import)", std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, remote));
  EXPECT_EQ(lower(html).find("<script"), std::string::npos);
}

TEST(HtmlReport, FixtureRunDrawsEverySection) {
  const std::string dir = std::string(GPUSCOUT_TEST_DATA_DIR) + "/results/";
  const std::string html = render_html_report({{"a.json", results::read_result_file(dir + "fixture-run-a.json")},
                                               {"b.json", results::read_result_file(dir + "fixture-run-b.json")}},
                                              {});
  for (const char* id :
       {"chart-gemm", "chart-memory", "chart-transfer", "chart-p2p-0-ce_unidir", "chart-p2p-1-ce_bidir", "chart-busbw"})
    EXPECT_NE(html.find(id), std::string::npos) << id;
  // Spec peaks from the records, the L2 size needs the spec database (not given here).
  EXPECT_NE(html.find("spec dense peak"), std::string::npos);
  EXPECT_NE(html.find("spec HBM 4800 GB/s"), std::string::npos);
  EXPECT_NE(html.find("link peak per direction 63 GB/s"), std::string::npos);
  EXPECT_NE(html.find("outcome-timeout"), std::string::npos);
  EXPECT_NE(html.find("outcome-not_supported"), std::string::npos);
  EXPECT_NE(html.find("hand-written test data, not a measurement"), std::string::npos);
  // Deterministic.
  EXPECT_EQ(html, render_html_report({{"a.json", results::read_result_file(dir + "fixture-run-a.json")},
                                      {"b.json", results::read_result_file(dir + "fixture-run-b.json")}},
                                     {}));
}

// The committed 8B find-peak run on an H200: probes at 16..64 requests/s against a 1000 ms p99 TTFT and a
// 50 ms p99 TPOT bound; 64, 60 and 58/s broke the TTFT bound.
TEST(HtmlReport, ServeLoadRunDrawsLatencyThroughputCharts) {
  const std::string file =
      std::string(GPUSCOUT_SOURCE_DIR) + "/bench/results/h200x2-serve-llama-3.1-8b-peak-20261130.json";
  const std::string html = render_html_report({{file, results::read_result_file(file)}}, {});
  EXPECT_NE(html.find("<section id=\"serve\">"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"#serve\">"), std::string::npos);
  EXPECT_NE(html.find("Llama-3.1-8B TP1, server scenario"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-serve-0-ttft_p99-title\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-serve-0-tpot_p99-title\""), std::string::npos);
  // The SLO bounds from the records' params, drawn as reference lines.
  EXPECT_NE(html.find("p99 TTFT bound 1000 ms"), std::string::npos);
  EXPECT_NE(html.find("p99 TPOT bound 50 ms"), std::string::npos);
  // 7 probes, 3 INVALID: a ring on each of the two charts, and a row each in the probe table.
  EXPECT_EQ(count(html, "fill=\"#fff\" stroke="), 6u);
  EXPECT_EQ(count(html, ">INVALID</td>"), 3u);
  EXPECT_EQ(count(html, ">VALID</td>"), 4u);
  EXPECT_NE(html.find("p99 TTFT 2354 ms &gt; bound 1000 ms"), std::string::npos);
  EXPECT_NE(html.find("<strong>56.00</strong> requests/s"), std::string::npos);
  // Probe rows sorted by offered rate, not probe order (probe_2 at 64/s ran third but is last).
  EXPECT_LT(html.find("<td>probe_6</td>"), html.find("<td>probe_2</td>"));
  EXPECT_LT(html.find("<td>probe_1</td>"), html.find("<td>probe_3</td>"));
}

// The committed concurrency sweep (session 17): 1..128 requests in flight, 128 broke the 1000 ms p99 TTFT
// bound. Its points are labelled and ordered by the clients in flight (records carry no rate).
TEST(HtmlReport, ServeConcurrencySweepIsOrderedByClients) {
  const std::string file = std::string(GPUSCOUT_SOURCE_DIR) + "/bench/results/h200-serve-concurrency-s17-20261201.json";
  const std::string html = render_html_report({{file, results::read_result_file(file)}}, {});
  EXPECT_NE(html.find("Llama-3.1-8B TP1, concurrency scenario"), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-serve-0-ttft_p99-title\""), std::string::npos);
  EXPECT_EQ(count(html, ">VALID</td>"), 7u);
  EXPECT_EQ(count(html, ">INVALID</td>"), 1u);
  EXPECT_NE(html.find("<td class=\"num\">128 in flight</td>"), std::string::npos);
  EXPECT_LT(html.find("<td>c2</td>"), html.find("<td>c16</td>"));
  EXPECT_LT(html.find("<td>c64</td>"), html.find("<td>c128</td>"));
}

// With the spec database and the TCO defaults, each load point's output tokens are priced: owning the
// H200 (the TCO model's price per useful GPU-hour) and renting it on demand, over the point's output
// tokens per hour on its one GPU.
TEST(HtmlReport, ServeLoadPointsArePricedPerMillionOutputTokens) {
  const auto source = data::DataSource::embedded();
  const auto specs = specs::SpecDb::load(source);
  const auto defaults = tco::TcoDefaults::load(source);
  const std::string file =
      std::string(GPUSCOUT_SOURCE_DIR) + "/bench/results/h200-serve-concurrency-b-s17-20261201.json";
  const auto set = results::read_result_file(file);
  ReportOptions options;
  options.specs = &specs;
  options.tco = &defaults;
  const std::string html = render_html_report({{file, set}}, options);
  EXPECT_NE(html.find(">Own USD/Mtok out</th>"), std::string::npos);
  EXPECT_NE(html.find(">On-demand USD/Mtok out</th>"), std::string::npos);
  EXPECT_NE(html.find("all GPU time is charged to output tokens"), std::string::npos);

  const auto& gpu = specs.get("H200-SXM-141GB");
  const auto inputs = tco::TcoInputs::resolve(defaults, gpu);
  const auto costs = tco::ways_to_pay(tco::compute_tco(inputs, 1));
  ASSERT_EQ(costs.front().way, "own");
  const auto c32 = std::find_if(set.records.begin(), set.records.end(),
                                [](const results::Record& r) { return r.key.ends_with("/concurrency/c32"); });
  ASSERT_NE(c32, set.records.end());
  const double output = c32->find_metric("output_tokens_per_s")->value;
  const double own = tco::usd_per_mtok(costs.front().usd_per_useful_gpu_hr, 1, output);
  char cell[64];
  std::snprintf(cell, sizeof cell, "<td class=\"num\">%.3f</td>", own);
  EXPECT_NE(html.find(cell), std::string::npos) << cell;
  EXPECT_GT(own, 0.05);  // an H200 at ~3900 output tokens/s: cents to a dollar per million, not fractions
  EXPECT_LT(own, 2.0);

  // Without the TCO defaults the columns say n/a and no cost note is written.
  options.tco = nullptr;
  const std::string bare = render_html_report({{file, set}}, options);
  EXPECT_EQ(bare.find("all GPU time is charged to output tokens"), std::string::npos);
  EXPECT_NE(bare.find("<td class=\"num\">n/a</td>"), std::string::npos);
}

TEST(HtmlReport, ServeStepFiguresTable) {
  const std::string file = std::string(GPUSCOUT_SOURCE_DIR) + "/bench/results/h200-serve-llama-3.1-8b-20261130.json";
  const std::string html = render_html_report({{file, results::read_result_file(file)}}, {});
  EXPECT_NE(html.find("<section id=\"serve\">"), std::string::npos);
  EXPECT_NE(html.find("Decode, prefill and static batch"), std::string::npos);
  // Decode b1: 199.8 tokens/s, 5.005 ms/step, 71.1% of the HBM roofline; prefill 8k: 477.2 TFLOP/s.
  EXPECT_NE(html.find("<td>decode/b1_ctx512</td><td>Llama-3.1-8B</td><td>TP1</td><td class=\"num\">199.8</td>"
                      "<td class=\"num\">5.005</td><td class=\"num\">71.1</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>prefill/t8192</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">477.2</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>static/b32_isl512_osl128</td>"), std::string::npos);
  // No load probes in this file: no latency chart.
  EXPECT_EQ(html.find("chart-serve-"), std::string::npos);
}

// The static batch run three times (session 18 on): the note names the runs and their range.
TEST(HtmlReport, RepeatedStaticBatchShowsItsRange) {
  const std::string file =
      std::string(GPUSCOUT_SOURCE_DIR) + "/bench/results/h200-serve-llama-3.1-8b-final-s18-20261201.json";
  const auto set = results::read_result_file(file);
  const std::string html = render_html_report({{file, set}}, {});
  EXPECT_NE(html.find("the median of 3 runs (3895-3946)"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">3933</td>"), std::string::npos);
}

// Session 19's serve run: what NVML saw during each record, one row per record with samples.
TEST(HtmlReport, TelemetryTablePerRecord) {
  const std::string file =
      std::string(GPUSCOUT_SOURCE_DIR) + "/bench/results/h200-serve-llama-3.1-8b-s19-20261201.json";
  const std::string html = render_html_report({{file, results::read_result_file(file)}}, {});
  const auto at = html.find("id=\"telemetry\"");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(html.find("<td>serve/decode/llama-3.1-8b/tp1/b32_ctx512</td><td class=\"num\">1542 (1500)</td>"
                      "<td class=\"num\">598 (603)</td><td class=\"num\">60</td><td class=\"num\">128.1</td>"
                      "<td class=\"num\">5.188 GB/s/W</td><td class=\"num\">5</td><td>sw_power_cap</td>",
                      at),
            std::string::npos);
  EXPECT_NE(html.find("<td>serve/decode/llama-3.1-8b/tp1/b1_ctx512</td>", at), std::string::npos);
  EXPECT_NE(html.find("<td>none</td>", at), std::string::npos);  // batch 1 ran unthrottled
  // The engine's build record has no telemetry: no row.
  EXPECT_EQ(html.find("<td>serve/engine/llama-3.1-8b/tp1</td>", at), std::string::npos);
  // Nothing sampled, no section.
  ResultSet bare;
  Record r;
  r.key = "gemm/bf16/m1_n1_k1";
  r.metrics = {metric("throughput", 1, "TFLOP/s")};
  bare.records = {r};
  EXPECT_EQ(render_html_report({{"bare.json", bare}}, {}).find("id=\"telemetry\""), std::string::npos);
}

TEST(HtmlReport, ServeHostileModelNameEscaped) {
  ResultSet r;
  for (int i = 0; i < 3; ++i) {
    Record rec;
    rec.key = "serve/load/" + kHostile + "/tp1/server/probe_" + std::to_string(i);
    rec.benchmark = "serve";
    rec.params = {{"model", kHostile},      {"tp", 1},
                  {"scenario", kHostile},   {"target_rate", 4.0 * (i + 1)},
                  {"ttft_bound_ms", 500.0}, {"tpot_bound_ms", 0.0}};
    rec.metrics = {metric("ttft_p99", 100.0 * (i + 1), "ms"), metric("tpot_p99", 20, "ms"),
                   metric("output_tokens_per_s", 1000.0 * (i + 1), "tokens/s"),
                   metric("requests_per_s", 4.0 * (i + 1), "requests/s")};
    rec.outcome = Outcome::passed;
    rec.extra = {
        {"valid", i < 2},
        {"invalid_reasons", i < 2 ? nlohmann::ordered_json::array() : nlohmann::ordered_json::array({kHostile})}};
    r.records.push_back(std::move(rec));
  }
  Record step;
  step.key = "serve/decode/" + kHostile + "/tp1/" + kHostile;
  step.benchmark = "serve";
  step.params = {{"model", kHostile}, {"tp", 1}};
  step.metrics = {metric("throughput", 200, "tokens/s"), metric("step_time", 5, "ms")};
  step.outcome = Outcome::passed;
  r.records.push_back(std::move(step));
  const std::string html = render_html_report({{kHostile, r}}, {});
  EXPECT_NE(html.find("chart-serve-0-ttft_p99"), std::string::npos);
  EXPECT_NE(html.find("p99 TTFT bound 500 ms"), std::string::npos);
  // A bound of 0 is no bound: no TPOT line.
  EXPECT_EQ(html.find("p99 TPOT bound"), std::string::npos);
  EXPECT_EQ(html.find(kHostile), std::string::npos);
  EXPECT_EQ(lower(html).find("<script"), std::string::npos);
  EXPECT_EQ(lower(html).find("<img"), std::string::npos);
  // Heading, chart titles, probe table, step table and the INVALID reason each carry the escaped name.
  EXPECT_GE(count(html, "&lt;script&gt;alert(1)&lt;/script&gt;"), 6u);
  EXPECT_EQ(count(html, "<svg "), count(html, "</svg>"));
  EXPECT_EQ(count(html, "<svg "), 2u);
}

TEST(HtmlReport, EmptyResultStillRenders) {
  const std::string html = render_html_report({{"empty.json", ResultSet{}}}, {});
  EXPECT_NE(html.find("0 records"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace gpuscout::report
