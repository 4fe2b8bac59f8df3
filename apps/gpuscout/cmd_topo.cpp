// gpuscout topo: the GPU topology of this machine from NVML and the CUDA runtime: the matrix
// `nvidia-smi topo -m` prints (NV# links or the PCIe path per pair, CPU and NUMA affinity), NVLink
// generation, active links and speed, PCIe link now vs maximum, and the NVLink domains.
// --format json gives the same document every bench result records under topology.links.
#include <CLI/CLI.hpp>

#include "context.hpp"
#include "gpuscout/report/table.hpp"
#include "gpuscout/topo/topology.hpp"
#if defined(GPUSCOUT_HAVE_CUDA)
#include "gpuscout/cuda/topology.hpp"
#endif

namespace gpuscout::cli {
namespace {

void run_topo(AppContext& ctx) {
#if defined(GPUSCOUT_HAVE_CUDA)
  const topo::Readings readings = cuda::read_topology();
  if (readings.gpus.empty()) throw Error("topo: no GPU visible: " + readings.source);
  const topo::Topology t = topo::build_topology(readings);
  std::vector<std::string> names;
  for (const auto& g : readings.gpus) names.push_back(g.name);
  if (ctx.format() == report::Format::json) {
    auto doc = topo::to_json(t);
    for (std::size_t i = 0; i < names.size() && i < doc["gpus"].size(); ++i) {
      doc["gpus"][i]["name"] = names[i];
      doc["gpus"][i]["pci_bus_id"] = readings.gpus[i].pci_bus_id;
    }
    doc["source"] = readings.source;
    ctx.out << doc.dump(2) << "\n";
    return;
  }
  ctx.out << report::render(topo::topology_tables(t, names), ctx.format());
#else
  (void)ctx;
  throw Error("topo: built without CUDA: this gpuscout cannot see local GPUs");
#endif
}

}  // namespace

void register_topo_command(CLI::App& app, AppContext& ctx) {
  CLI::App* cmd = app.add_subcommand(
      "topo", "GPU topology: NVLink/PCIe matrix (as nvidia-smi topo -m), link generations and speeds, NVLink domains");
  cmd->callback([&ctx] { run_topo(ctx); });
}

}  // namespace gpuscout::cli
