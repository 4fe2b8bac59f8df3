// PLACEHOLDER
#include <CLI/CLI.hpp>

#include "context.hpp"

namespace gpuscout::cli {
void register_models_command(CLI::App& app, AppContext& ctx) {
  (void)ctx;
  app.add_subcommand("models", "not yet");
}
}  // namespace gpuscout::cli
