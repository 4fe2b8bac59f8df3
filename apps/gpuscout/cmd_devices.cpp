// gpuscout devices: the local GPUs as the driver sees them, matched to the spec database.
// Without a GPU, a driver or a CUDA build: one line on stderr and exit 0 (nothing to list is no error).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "context.hpp"
#include "gpuscout/report/table.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "local_gpus.hpp"

namespace gpuscout::cli {
namespace {

report::Cell opt(const std::optional<double>& v) {
  return v ? report::Cell(*v) : report::Cell();
}

report::Table devices_table(const LocalGpus& local) {
  using report::Align;
  report::Table t;
  t.key = "devices";
  t.add_column("index", "#", "", -1, Align::right);
  t.add_column("name", "Name");
  t.add_column("spec", "Spec entry");
  t.add_column("uuid", "UUID");
  t.add_column("pci_bus_id", "PCI bus id");
  t.add_column("compute_capability", "CC");
  t.add_column("sm_count", "SMs", "", -1, Align::right);
  t.add_column("memory_gib", "Memory", "GiB", 1, Align::right);
  t.add_column("max_sm_clock_mhz", "SM clock max", "MHz", 0, Align::right);
  t.add_column("max_mem_clock_mhz", "Mem clock max", "MHz", 0, Align::right);
  t.add_column("power_limit_w", "Power limit", "W", 0, Align::right);
  t.add_column("ecc", "ECC");
  t.add_column("mig", "MIG");
  t.add_column("numa_node", "NUMA", "", -1, Align::right);
  t.add_column("pcie_link", "PCIe link");
  for (std::size_t i = 0; i < local.gpus.size(); ++i) {
    const results::GpuInfo& g = local.gpus[i];
    const auto& d = local.details[i];
    auto flag = [](const std::optional<bool>& b) { return b ? report::Cell(*b ? "on" : "off") : report::Cell(); };
    report::Cell memory;
    if (g.memory_bytes) memory = static_cast<double>(*g.memory_bytes) / std::pow(2.0, 30);
    t.add_row(
        {static_cast<std::int64_t>(g.index), g.name, g.spec_name.empty() ? report::Cell() : report::Cell(g.spec_name),
         g.uuid, g.pci_bus_id, g.compute_capability ? report::Cell(*g.compute_capability) : report::Cell(),
         g.sm_count ? report::Cell(static_cast<std::int64_t>(*g.sm_count)) : report::Cell(), memory,
         opt(g.max_sm_clock_mhz), opt(g.max_mem_clock_mhz), opt(g.power_limit_w), flag(g.ecc_enabled),
         flag(g.mig_enabled), g.numa_node ? report::Cell(static_cast<std::int64_t>(*g.numa_node)) : report::Cell(),
         d.contains("pcie_link_max") ? report::Cell(d["pcie_link_max"].get<std::string>()) : report::Cell()});
  }
  for (const auto& [name, version] : local.software) t.notes.push_back(fmt::format("{}: {}", name, version));
  return t;
}

}  // namespace

void register_devices_command(CLI::App& app, AppContext& ctx) {
  CLI::App* cmd = app.add_subcommand("devices", "List the local GPUs (driver, NVML) matched to the spec database");
  cmd->callback([&ctx] {
    const specs::SpecDb* db = nullptr;
    try {
      db = &ctx.specs();
    } catch (const Error& e) {
      fmt::print(stderr, "gpuscout: warning: spec database not loaded ({}); GPUs are not matched\n", e.what());
    }
    const LocalGpus local = discover_local_gpus(db);
    if (local.gpus.empty()) {
      fmt::print(stderr, "gpuscout devices: no local GPU: {}\n", local.unavailable_reason);
      return;
    }
    ctx.out << report::render(devices_table(local), ctx.format());
  });
}

}  // namespace gpuscout::cli
