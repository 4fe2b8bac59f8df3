// gpuscout compare A.json B.json [...]: the same records matched by key across runs, the headline
// metric side by side with ratio, percent change and a verdict that needs the difference to exceed
// the measured spread (src/report/compare.cpp). --format table|json|csv|md (md for tickets).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/report/compare.hpp"
#include "gpuscout/results/result_json.hpp"

namespace gpuscout::cli {
namespace {

std::string run_label(std::size_t index) {
  if (index < 26) return std::string(1, static_cast<char>('A' + index));
  return fmt::format("R{}", index + 1);
}

}  // namespace

void register_compare_command(CLI::App& app, AppContext& ctx) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare result files: the same records across runs, ratio, change and faster/slower beyond the spread");
  cmd->add_option("files", *files, "Two or more result files; the first is the baseline")->required();
  cmd->callback([&ctx, files] {
    if (files->size() < 2) throw UsageError("compare needs at least two result files (the first is the baseline)");
    std::vector<report::CompareInput> inputs;
    for (std::size_t i = 0; i < files->size(); ++i)
      inputs.push_back({run_label(i), (*files)[i], results::read_result_file((*files)[i])});
    const report::Comparison comparison = report::compare_runs(inputs);
    ctx.out << report::render(report::comparison_tables(comparison, inputs), ctx.format());
  });
}

}  // namespace gpuscout::cli
