// PLACEHOLDER
#include <CLI/CLI.hpp>

#include "context.hpp"

namespace gpuscout::cli {
void register_devices_command(CLI::App& app, AppContext& ctx) {
  (void)ctx;
  app.add_subcommand("devices", "not yet");
}
}  // namespace gpuscout::cli
