// gpuscout report RESULT.json... [--advice ADVICE.json] -o report.html: one self-contained HTML file
// (inline CSS and SVG charts, no script, nothing fetched) from result files and the advisor's output.
// `-o -` writes the HTML to stdout.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/report/html_report.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/tco/tco.hpp"
#include "gpuscout/util/file.hpp"
#include "gpuscout/version.hpp"
#include "history_cli.hpp"

namespace gpuscout::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> files;
  std::string output;
  std::string title = "gpuscout report";
  std::vector<std::string> notes;
  std::vector<std::string> from_history;  // history queries (docs/history.md)
  std::string advice;                     // gpuscout advise --out FILE
};

void run_report(AppContext& ctx, const ReportFlags& flags) {
  std::vector<report::ReportInput> inputs;
  // Other tools' JSON beside ours (PyTorch references in bench/results, say) is skipped with a note,
  // so `report bench/results/*.json` works; a malformed gpuscout file still stops the run.
  auto files = results::read_result_files(flags.files);
  for (const auto& [file, why] : files.skipped) fmt::print(stderr, "gpuscout report: skipping {}: {}\n", file, why);
  for (auto& [file, set] : files.read) inputs.push_back({file, std::move(set)});
  for (const auto& query : flags.from_history) {
    for (auto& in : report_inputs_from_history(ctx, query)) inputs.push_back(std::move(in));
  }
  std::optional<report::ReportInput> advice;
  if (!flags.advice.empty()) {
    advice = report::ReportInput{flags.advice, results::read_result_file(flags.advice)};
    if (advice->result.kind != "advise") {
      throw UsageError(fmt::format("--advice: {} is a '{}' result, not the output of gpuscout advise --out",
                                   flags.advice, advice->result.kind));
    }
  }
  if (inputs.empty() && !advice) {
    throw UsageError(flags.files.empty() ? "report: give result files, --from-history QUERY or --advice FILE"
                                         : "report: none of the files given is a gpuscout result file");
  }

  report::ReportOptions options;
  options.title = flags.title;
  options.generator = fmt::format("gpuscout {} ({})", kVersion, kGitCommit);
  options.banner_notes = flags.notes;
  if (advice) options.advice = &*advice;
  try {
    options.specs = &ctx.specs();
  } catch (const Error& e) {
    // Peaks recorded in the result files still show; only spec lookups are lost.
    fmt::print(stderr, "gpuscout: warning: spec database not loaded ({}); spec peaks only from the records\n",
               e.what());
  }
  std::optional<tco::TcoDefaults> tco_defaults;
  try {
    tco_defaults = tco::TcoDefaults::load(ctx.data());
    options.tco = &*tco_defaults;
  } catch (const Error& e) {
    // Load points are then shown without their cost per token.
    fmt::print(stderr, "gpuscout: warning: TCO defaults not loaded ({}); no cost per token in the report\n", e.what());
  }
  const std::string html = report::render_html_report(inputs, options);
  if (flags.output == "-") {
    ctx.out << html;
    return;
  }
  write_file_atomic(flags.output, html);
  std::size_t records = 0;
  for (const auto& in : inputs) records += in.result.records.size();
  fmt::print(stderr, "gpuscout report: wrote {} ({} records from {} file{}{})\n", flags.output, records, inputs.size(),
             inputs.size() == 1 ? "" : "s", advice ? ", advice " + flags.advice : "");
}

}  // namespace

void register_report_command(CLI::App& app, AppContext& ctx) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML report (charts, summary, provenance) from result files");
  cmd->add_option("files", flags->files, "Result files (JSON) written by gpuscout bench");
  cmd->add_option("--from-history", flags->from_history,
                  "Runs from the history: last, last:N, a run id, gpu:NAME, host:NAME, kind:K, tag:K:V (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--advice", flags->advice, "Advice to show first (gpuscout advise --out FILE)");
  cmd->add_option("-o,--output", flags->output, "HTML file to write (atomically); '-' for stdout")->required();
  cmd->add_option("--title", flags->title, "Report title");
  cmd->add_option("--note", flags->notes, "A note shown at the top of the report (repeatable)");
  cmd->callback([&ctx, flags] { run_report(ctx, *flags); });
}

}  // namespace gpuscout::cli
