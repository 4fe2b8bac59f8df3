// PLACEHOLDER
#include <CLI/CLI.hpp>

#include "context.hpp"

namespace gpuscout::cli {
void register_gpus_command(CLI::App& app, AppContext& ctx) {
  (void)ctx;
  app.add_subcommand("gpus", "not yet");
}
}  // namespace gpuscout::cli
