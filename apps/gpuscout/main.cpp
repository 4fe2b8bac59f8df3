// gpuscout: which GPUs, how many, at what cost, for this AI workload.
// The one place that turns errors into messages and exit codes:
//   0 ok, 1 something failed (a benchmark, a bad data file, I/O), 2 usage (bad flag, unknown name).
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "context.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/version.hpp"

int main(int argc, char** argv) {
  using namespace gpuscout;
  // Diagnostics go to stderr so stdout stays clean for tables and JSON.
  auto logger = spdlog::stderr_color_mt("gpuscout");
  logger->set_pattern("gpuscout: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);

  cli::AppContext ctx(argc, argv, std::cout);
  CLI::App app{
      "gpuscout: which GPUs, how many, and at what cost, for this AI workload.\n"
      "Measures the local GPUs, models workloads on any GPU in its spec database, and compares them."};
  app.set_version_flag("--version", fmt::format("gpuscout {} ({})", kVersion, kGitCommit));
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  app.add_option("--specs", ctx.options.data_dir,
                 "Data directory laid out like data/ (gpus/, models/) replacing the embedded one; also $GPUSCOUT_DATA")
      ->check(CLI::ExistingDirectory);
  app.add_option("--format", ctx.options.format, "Output format: table, json, csv or md");
  app.add_flag("-v,--verbose", ctx.options.verbosity, "More diagnostics on stderr (repeatable)");
  app.footer(
      "Exit codes: 0 ok; 1 something failed (a benchmark, a data file, I/O); 2 usage error (bad flag or unknown "
      "name).");

  cli::register_gpus_command(app, ctx);
  cli::register_models_command(app, ctx);
  cli::register_devices_command(app, ctx);
  cli::register_bench_command(app, ctx);
  cli::register_topo_command(app, ctx);
  cli::register_report_command(app, ctx);
  cli::register_compare_command(app, ctx);
  cli::register_plan_command(app, ctx);
  cli::register_tco_command(app, ctx);
  cli::register_predict_command(app, ctx);
  cli::register_validate_command(app, ctx);
  cli::register_history_command(app, ctx);
  cli::register_advise_command(app, ctx);
  cli::register_doctor_command(app, ctx);
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();

  app.parse_complete_callback([&] {
    if (ctx.options.verbosity >= 2) {
      spdlog::set_level(spdlog::level::debug);
    } else if (ctx.options.verbosity == 1) {
      spdlog::set_level(spdlog::level::info);
    }
    ctx.format();  // validate --format before any work is done
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e, std::cout, std::cerr);
    return static_cast<int>(ExitCode::usage);
  } catch (const NotFoundError& e) {
    // Nothing close to suggest: say where the names are listed.
    const char* listing = e.kind() == "GPU"                                   ? "gpuscout gpus list"
                          : e.kind() == "model" || e.kind() == "model family" ? "gpuscout models list"
                          : e.kind() == "workload"                            ? "gpuscout advise --list"
                          : e.kind() == "benchmark"                           ? "gpuscout bench --list"
                                                                              : nullptr;
    fmt::print(stderr, "gpuscout: error: {}{}\n", e.what(),
               e.suggestions().empty() && listing != nullptr ? fmt::format(" (`{}` lists them)", listing) : "");
    return static_cast<int>(e.exit_code());
  } catch (const Error& e) {
    fmt::print(stderr, "gpuscout: error: {}\n", e.what());
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuscout: internal error: {}\n", e.what());
    return static_cast<int>(ExitCode::failure);
  }
  return static_cast<int>(ctx.exit_code());
}
