#pragma once
// What every subcommand shares: the global flags, the data source, and the lazily loaded spec
// database and model catalog. Subcommands print results to `out` (stdout) and diagnostics to
// stderr; they throw gpuscout::Error for main() to turn into a message and exit code.
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/report/table.hpp"
#include "gpuscout/util/error.hpp"

namespace CLI {
class App;
}
namespace gpuscout::specs {
class SpecDb;
}
namespace gpuscout::workloads {
class ModelCatalog;
}

namespace gpuscout::cli {

struct GlobalOptions {
  std::optional<std::filesystem::path> data_dir;  // --specs DIR
  std::string format = "table";                   // --format
  int verbosity = 0;                              // -v / -q
  // Run history (docs/history.md): --db PATH (else $GPUSCOUT_HISTORY_DB or the data directory) and
  // --no-history (bench/advise do not append the run).
  std::optional<std::filesystem::path> history_db;
  bool no_history = false;
};

class AppContext {
 public:
  AppContext(int argc, const char* const* argv, std::ostream& out);
  ~AppContext();

  GlobalOptions options;
  std::ostream& out;
  std::vector<std::string> argv;
  const char* const* raw_argv;

  report::Format format() const { return report::parse_format(options.format); }
  const data::DataSource& data();
  const specs::SpecDb& specs();
  const workloads::ModelCatalog& models();

  // A subcommand that ran but found something wrong (a failed benchmark) raises the exit code.
  void raise_exit_code(ExitCode code);
  ExitCode exit_code() const { return exit_code_; }

 private:
  std::optional<data::DataSource> data_;
  std::unique_ptr<specs::SpecDb> specs_;
  std::unique_ptr<workloads::ModelCatalog> models_;
  ExitCode exit_code_ = ExitCode::ok;
};

// One function per subcommand file (cmd_<name>.cpp); main.cpp lists them all explicitly.
void register_gpus_command(CLI::App& app, AppContext& ctx);
void register_models_command(CLI::App& app, AppContext& ctx);
void register_devices_command(CLI::App& app, AppContext& ctx);
void register_bench_command(CLI::App& app, AppContext& ctx);
void register_topo_command(CLI::App& app, AppContext& ctx);
void register_report_command(CLI::App& app, AppContext& ctx);
void register_compare_command(CLI::App& app, AppContext& ctx);
void register_plan_command(CLI::App& app, AppContext& ctx);
void register_tco_command(CLI::App& app, AppContext& ctx);
void register_predict_command(CLI::App& app, AppContext& ctx);
void register_validate_command(CLI::App& app, AppContext& ctx);
void register_history_command(CLI::App& app, AppContext& ctx);
void register_advise_command(CLI::App& app, AppContext& ctx);
void register_doctor_command(CLI::App& app, AppContext& ctx);

}  // namespace gpuscout::cli
