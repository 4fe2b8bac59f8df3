#include "doctor_facts.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/topo/topology.hpp"
#include "gpuscout/workloads/model_catalog.hpp"
#include "history_cli.hpp"
#if defined(GPUSCOUT_HAVE_CUDA)
#include "gpuscout/cuda/doctor_probe.hpp"
#endif

extern char** environ;

namespace gpuscout::cli {
namespace {

doctor::BuildFacts build_facts() {
  doctor::BuildFacts b;
#if defined(GPUSCOUT_HAVE_CUDA)
  b.cuda_backend = true;
#endif
#if defined(GPUSCOUT_CUDA_ARCHITECTURES)
  std::stringstream archs(GPUSCOUT_CUDA_ARCHITECTURES);
  for (std::string arch; std::getline(archs, arch, ',');) {
    if (!arch.empty()) b.cuda_architectures.push_back(arch);
  }
#endif
#if defined(GPUSCOUT_HAVE_NCCL)
  b.nccl = true;
#endif
#if defined(GPUSCOUT_HAVE_MPI)
  b.mpi = true;
#endif
  return b;
}

std::map<std::string, int> cpu_governors() {
  std::map<std::string, int> governors;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 || name.find_first_not_of("0123456789", 3) != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "cpufreq" / "scaling_governor");
    std::string governor;
    if (in >> governor) ++governors[governor];
  }
  return governors;
}

// Could a run be recorded at `path`? The file if it exists, else the nearest folder above it.
void check_history(const std::filesystem::path& path, doctor::HostFacts& host) {
  host.history_path = path.string();
  std::error_code ec;
  std::filesystem::path probe = path;
  while (!probe.empty() && !std::filesystem::exists(probe, ec)) {
    const auto parent = probe.parent_path();
    if (parent == probe) break;
    probe = parent;
  }
  if (probe.empty()) probe = ".";
  host.history_writable = ::access(probe.c_str(), W_OK) == 0;
  if (!host.history_writable) host.history_problem = fmt::format("{} is not writable", probe.string());
}

}  // namespace

std::map<std::string, std::string> environment_variables(std::initializer_list<const char*> prefixes,
                                                         std::initializer_list<const char*> names) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    const auto is = [&name](const char* other) { return name == other; };
    const auto starts = [&name](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (std::any_of(names.begin(), names.end(), is) || std::any_of(prefixes.begin(), prefixes.end(), starts)) {
      env[name] = kv.substr(eq + 1);
    }
  }
  return env;
}

doctor::Facts gather_doctor_facts(AppContext& ctx, const LocalGpus& local) {
  doctor::Facts facts;
  facts.host.build = build_facts();
  try {
    facts.host.gpu_specs = ctx.specs().all().size();
    facts.host.models = ctx.models().all().size();
    facts.host.data_origin = ctx.data().describe();
  } catch (const Error& e) {
    facts.host.data_error = e.what();
  }
  // Every variable that can change what a run measures; the rules decide which matter.
  facts.host.environment = environment_variables({"CUDA_", "NCCL_", "GPUSCOUT_", "CUBLAS"}, {"LD_PRELOAD"});
  facts.host.cpu_governors = cpu_governors();
  facts.host.process_cpus = topo::process_cpu_mask();
  if (!ctx.options.no_history) check_history(history_db_path(ctx), facts.host);
#if defined(GPUSCOUT_HAVE_CUDA)
  facts.driver = cuda::probe_driver(local.unavailable_reason);
  for (std::size_t i = 0; i < local.gpus.size(); ++i) {
    doctor::GpuFacts g = cuda::probe_gpu(local.gpus[i]);
    g.spec = local.specs[i];
    facts.gpus.push_back(std::move(g));
  }
  facts.peers = cuda::probe_peer_access(static_cast<int>(local.gpus.size()));
#else
  (void)local;
#endif
  return facts;
}

}  // namespace gpuscout::cli
