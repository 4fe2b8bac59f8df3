#include "gpuscout/doctor/doctor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/topo/topology.hpp"

namespace gpuscout::doctor {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// An idle data-center GPU shows a few hundred MiB used by the driver; more means another process.
constexpr double kBusyMemoryGiB = 2.0;
// At rest a GPU this hot reaches its thermal limits sooner under load.
constexpr double kHotAtRestC = 80.0;

std::string cuda_version(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  return fmt::format("{}", fmt::join(parts, separator));
}

// "9.0" -> {9, 0}; {-1, -1} when not of that form.
std::pair<int, int> parse_cc(const std::string& text) {
  int major = -1, minor = -1;
  char dot = 0;
  std::istringstream in(text);
  if (!(in >> major >> dot >> minor) || dot != '.') return {-1, -1};
  return {major, minor};
}

class Findings {
 public:
  void add(std::string key, std::string subject, std::string check, Status status, std::string observed,
           std::string advice = {}) {
    list.push_back(
        {std::move(key), std::move(subject), std::move(check), status, std::move(observed), std::move(advice)});
  }
  std::vector<Finding> list;
};

void examine_build(const BuildFacts& b, Findings& f) {
  if (b.cuda_backend) {
    f.add("build/cuda_backend", "build", "measurement backend", Status::ok,
          fmt::format("built for CUDA architectures {} (and sm_90a kernels for Hopper)",
                      join(b.cuda_architectures, ", ")));
  } else {
    f.add("build/cuda_backend", "build", "measurement backend", Status::info,
          "built without CUDA: the spec database, models, TCO and advice work; `bench` cannot measure",
          "install the CUDA toolkit (nvcc on PATH or CUDACXX) and rebuild to measure GPUs");
  }
  if (b.cuda_backend) {
    f.add("build/nccl", "build", "NCCL collectives", b.nccl ? Status::ok : Status::info,
          b.nccl ? "built with NCCL" : "built without NCCL: the collectives benchmark is left out",
          b.nccl ? "" : "install NCCL (libnccl-dev, or the toolkit's) and rebuild");
  }
  f.add("build/mpi", "build", "MPI (several nodes)", b.mpi ? Status::ok : Status::info,
        b.mpi ? "built with MPI: `mpirun`/`srun` runs span nodes"
              : "built without MPI: `bench` drives the GPUs of this machine only",
        b.mpi ? "" : "install an MPI (libopenmpi-dev) and rebuild to measure across nodes");
}

void examine_data(const HostFacts& h, Findings& f) {
  if (!h.data_error.empty()) {
    f.add("data/specs", "data", "spec database and model catalog", Status::fail, h.data_error,
          "fix the file named above, or drop --specs / GPUSCOUT_DATA to use the embedded data");
    return;
  }
  f.add("data/specs", "data", "spec database and model catalog", Status::ok,
        fmt::format("{} GPUs, {} models ({})", h.gpu_specs, h.models, h.data_origin));
}

void examine_history(const HostFacts& h, Findings& f) {
  if (h.history_path.empty()) {
    f.add("host/history_db", "host", "run history", Status::info, "off (--no-history): runs are not recorded");
  } else if (h.history_writable) {
    f.add("host/history_db", "host", "run history", Status::ok, "runs recorded in " + h.history_path);
  } else {
    f.add("host/history_db", "host", "run history", Status::warn,
          fmt::format("{} cannot be written: {}", h.history_path, h.history_problem),
          "pass --db PATH (or set GPUSCOUT_HISTORY_DB) to a writable place, or --no-history");
  }
}

void examine_environment(const HostFacts& h, Findings& f) {
  const auto& env = h.environment;
  auto add_env = [&f](const std::string& name, const std::string& value, Status status, std::string observed,
                      std::string advice = {}) {
    f.add("env/" + name, "environment", fmt::format("{}={}", name, value), status, std::move(observed),
          std::move(advice));
  };
  for (const auto& [name, value] : env) {
    // Container images set these to say what they ship; no library reads them as a setting.
    if (name == "NCCL_VERSION" || name == "CUDA_VERSION" || name == "CUDA_HOME" || name == "CUDA_PATH") continue;
    if (name == "CUDA_LAUNCH_BLOCKING") {
      if (value != "0") {
        add_env(name, value, Status::warn,
                "every kernel launch waits for the GPU: timings of launch-bound work (small kernels, decode "
                "steps, CUDA graphs) are worse than a normal run's",
                "unset CUDA_LAUNCH_BLOCKING when measuring");
      }
    } else if (name == "CUDA_INJECTION64_PATH") {
      add_env(name, value, Status::warn,
              "a profiler or tracer is injected into every CUDA process: timings carry its overhead",
              "unset it unless the run is meant to be profiled");
    } else if (name == "LD_PRELOAD") {
      add_env(name, value, Status::info,
              "libraries preloaded into gpuscout (a different cuBLAS or NCCL changes results)");
    } else if (name == "CUDA_VISIBLE_DEVICES") {
      add_env(name, value, value.empty() ? Status::warn : Status::info,
              value.empty() ? "empty: CUDA sees no GPU" : "CUDA sees only these GPUs, renumbered from 0",
              value.empty() ? "unset it or list the GPUs to measure" : "");
    } else if (name == "CUDA_FORCE_PTX_JIT") {
      add_env(name, value, value == "0" ? Status::info : Status::warn,
              "kernels are compiled from PTX at load, not run from the built machine code", "unset it when measuring");
    } else if (name == "CUDA_MPS_PIPE_DIRECTORY" || name == "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") {
      add_env(name, value, Status::warn, "a CUDA MPS client: the GPU is shared (or its SMs capped) through MPS",
              "measure without MPS for whole-GPU figures");
    } else if (name == "CUDA_DEVICE_ORDER" || name == "CUDA_MODULE_LOADING" || name == "CUDA_DEVICE_MAX_CONNECTIONS" ||
               name == "CUDA_CACHE_DISABLE" || name == "CUDA_SCALE_LAUNCH_QUEUES") {
      add_env(name, value, Status::info, "changes how the CUDA driver runs");
    } else if (name.rfind("CUBLAS", 0) == 0) {
      const bool logging = name.find("LOG") != std::string::npos && value != "0";
      add_env(name, value, logging ? Status::warn : Status::info,
              logging ? "cuBLAS logs every call: GEMM timings include the logging" : "changes how cuBLAS runs",
              logging ? "unset it when measuring" : "");
    } else if (name == "NCCL_P2P_DISABLE" || name == "NCCL_SHM_DISABLE" || name == "NCCL_IB_DISABLE" ||
               name == "NCCL_NET_GDR_LEVEL") {
      const bool off = name != "NCCL_NET_GDR_LEVEL" && value != "0";
      add_env(name, value, off ? Status::warn : Status::info,
              off ? "NCCL avoids a transport the hardware has: collectives come out slower than the machine's"
                  : "NCCL transport setting (recorded in result files)",
              off ? "unset it unless that transport is broken on this machine" : "");
    } else if (name == "NCCL_NVLS_ENABLE") {
      add_env(name, value, Status::info,
              value == "0" ? "NVLink SHARP off: on NVSwitch systems collectives run without in-switch reduction"
                           : "NVLink SHARP setting (recorded in result files)");
    } else if (name == "NCCL_DEBUG") {
      const bool trace = value == "TRACE";
      add_env(
          name, value, trace ? Status::warn : Status::info,
          trace ? "NCCL traces every call: collective timings include it" : "NCCL logging (recorded in result files)",
          trace ? "use NCCL_DEBUG=INFO or unset it when measuring" : "");
    } else if (name.rfind("NCCL_", 0) == 0) {
      add_env(name, value, Status::info,
              "NCCL does not choose this itself: collectives reflect the setting (recorded in result files)");
    } else if (name.rfind("GPUSCOUT_", 0) == 0) {
      const auto& known = known_gpuscout_variables();
      const auto it = std::find_if(known.begin(), known.end(), [&](const KnownVariable& v) { return v.name == name; });
      if (it == known.end()) {
        add_env(name, value, Status::warn, "gpuscout reads no such variable (a typo?)",
                "see docs/serving.md for the engine's switches");
      } else if (it->changes_results(value)) {
        add_env(name, value, Status::warn,
                fmt::format("{}: results are not those of the default engine (recorded in result files)", it->effect),
                "unset it for runs meant to compare with others");
      } else if (!it->non_default.empty()) {
        add_env(name, value, Status::info, fmt::format("{}: set, but to what it does by default", it->effect));
      } else {
        add_env(name, value, Status::info, std::string(it->effect));
      }
    }
  }
}

void examine_cpu(const HostFacts& h, Findings& f) {
  if (h.cpu_governors.empty()) {
    f.add("host/cpu_governor", "host", "CPU frequency governor", Status::skip,
          "no cpufreq governor exposed (common in VMs and containers)");
    return;
  }
  std::vector<std::string> parts;
  int not_performance = 0, powersave = 0;
  for (const auto& [governor, cpus] : h.cpu_governors) {
    parts.push_back(fmt::format("{} ({} CPUs)", governor, cpus));
    if (governor != "performance") not_performance += cpus;
    if (governor == "powersave") powersave += cpus;
  }
  const Status status = powersave > 0 ? Status::warn : not_performance > 0 ? Status::info : Status::ok;
  f.add("host/cpu_governor", "host", "CPU frequency governor", status, join(parts, ", "),
        status == Status::ok ? ""
                             : "host-transfer and launch-bound timings vary with the CPU clock; "
                               "`cpupower frequency-set -g performance` (root) while measuring");
}

void examine_driver(const Facts& facts, Findings& f) {
  const DriverFacts& d = facts.driver;
  if (!d.cuda_backend) return;
  if (!d.cuda_driver) {
    f.add("driver/cuda", "driver", "NVIDIA driver", Status::info,
          d.gpus_problem.empty() ? "no NVIDIA driver" : d.gpus_problem,
          "nothing to measure here; the spec database, models, TCO and advice work without one");
    return;
  }
  const std::string driver = d.driver_version.empty() ? "" : d.driver_version + ", ";
  if (d.cuda_runtime && *d.cuda_driver < *d.cuda_runtime) {
    const bool same_major = *d.cuda_driver / 1000 == *d.cuda_runtime / 1000;
    f.add("driver/cuda", "driver", "NVIDIA driver", same_major ? Status::warn : Status::fail,
          fmt::format("the driver ({}CUDA {}) is older than this build's runtime (CUDA {})", driver,
                      cuda_version(*d.cuda_driver), cuda_version(*d.cuda_runtime)),
          same_major
              ? "it runs by minor-version compatibility, but PTX compiled at load time may fail: update the driver"
              : "install a driver that supports CUDA " + cuda_version(*d.cuda_runtime));
  } else {
    f.add("driver/cuda", "driver", "NVIDIA driver", Status::ok,
          fmt::format("{}CUDA {}; runtime CUDA {}", driver, cuda_version(*d.cuda_driver),
                      d.cuda_runtime ? cuda_version(*d.cuda_runtime) : "unknown"));
  }
  if (!d.gpus_problem.empty()) {
    f.add("driver/gpus", "driver", "visible GPUs", Status::warn, d.gpus_problem,
          "check `nvidia-smi` and CUDA_VISIBLE_DEVICES");
  }
  if (!d.nvml_problem.empty()) {
    f.add("driver/nvml", "driver", "NVML", Status::warn,
          "unavailable (" + d.nvml_problem +
              "): no power, clock or temperature readings, so no TFLOP/s per watt "
              "and no throttle flags in results",
          "install the driver's libnvidia-ml.so.1 (it comes with the driver)");
  }
}

// The CPUs in `a` that are not in `b` (same word layout; a missing word of `b` counts as zero).
std::vector<std::uint64_t> cpus_outside(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b) {
  std::vector<std::uint64_t> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] & ~(i < b.size() ? b[i] : 0);
  return out;
}

bool no_cpus(const std::vector<std::uint64_t>& words) {
  return std::all_of(words.begin(), words.end(), [](std::uint64_t w) { return w == 0; });
}

// Where this process may run against the CPUs near the GPU: host transfers and launches from the
// far socket cross the inter-socket link, which lowers host<->device bandwidth on many servers.
void examine_cpu_affinity(const GpuFacts& g, const std::string& subject, const std::vector<std::uint64_t>& process_cpus,
                          Findings& f) {
  auto add = [&](Status status, std::string observed, std::string advice) {
    f.add(fmt::format("gpu{}/cpu_affinity", g.index), subject, "CPUs near the GPU", status, std::move(observed),
          std::move(advice));
  };
  // An empty mask (nothing read) has no CPUs either.
  if (no_cpus(g.local_cpus) || no_cpus(process_cpus)) {
    add(Status::skip,
        no_cpus(g.local_cpus) ? "NVML gave no CPU affinity for it" : "this process's CPU affinity could not be read",
        "");
    return;
  }
  const std::string local = topo::cpu_list_from_mask(g.local_cpus);
  const std::string node = g.numa_node ? fmt::format(", NUMA node {}", *g.numa_node) : "";
  const std::string mine = topo::cpu_list_from_mask(process_cpus);
  const auto far = cpus_outside(process_cpus, g.local_cpus);
  const std::string bind = g.numa_node ? fmt::format("`numactl --cpunodebind={0} --membind={0}`", *g.numa_node)
                                       : fmt::format("`taskset -c {}`", local);
  if (no_cpus(far)) {
    add(Status::ok, fmt::format("this process runs on CPUs {}, all near it ({}{})", mine, local, node), "");
  } else if (no_cpus(cpus_outside(process_cpus, far))) {
    add(Status::warn, fmt::format("this process may run only on CPUs {}, none near it (near: {}{})", mine, local, node),
        fmt::format("host<->device figures would cross the inter-socket link; run under {} for this GPU", bind));
  } else {
    add(Status::info,
        fmt::format("this process may run on CPUs {}, including {} far from it (near: {}{})", mine,
                    topo::cpu_list_from_mask(far), local, node),
        fmt::format("for this GPU's host-transfer figures, run under {} (or one MPI rank per GPU, "
                    "`--bind-to numa`)",
                    bind));
  }
}

void examine_gpu(const GpuFacts& g, const std::vector<std::uint64_t>& process_cpus, const BuildFacts& build,
                 std::size_t visible_gpus, Findings& f) {
  const std::string subject = fmt::format("GPU {} ({})", g.index, g.name);
  auto add = [&](std::string_view id, std::string check, Status status, std::string observed, std::string advice = {}) {
    f.add(fmt::format("gpu{}/{}", g.index, id), subject, std::move(check), status, std::move(observed),
          std::move(advice));
  };
  const specs::GpuSpec* spec = g.spec;

  if (spec != nullptr) {
    add("spec", "spec database entry", Status::ok, spec->name);
  } else {
    add("spec", "spec database entry", Status::warn,
        "none matches: no % of peak, no calibration of the models for this GPU",
        "add it to data/gpus (docs/spec-database.md) and pass --specs DIR");
  }

  const std::string code = code_for(build.cuda_architectures, g.compute_capability);
  const auto [major, minor] = parse_cc(g.compute_capability);
  if (code == "sass") {
    add("code", "machine code", Status::ok,
        fmt::format("compute capability {}: built for it{}", g.compute_capability,
                    major == 9 && minor == 0 ? ", Hopper kernels (wgmma, tensor copies) included" : ""));
  } else if (code == "ptx") {
    add("code", "machine code", Status::info,
        fmt::format("compute capability {}: runs from PTX compiled at first load (cached by the driver)",
                    g.compute_capability),
        "`cmake --preset cuda-portable` builds machine code for Ada and Blackwell too");
  } else {
    add("code", "machine code", Status::fail,
        fmt::format("compute capability {}: this build has no code that loads on it ({})", g.compute_capability,
                    join(build.cuda_architectures, ", ")),
        "rebuild with CMAKE_CUDA_ARCHITECTURES including it");
  }
  if (major >= 0 && major < 8) {
    add("bf16", "BF16 tensor math", Status::warn,
        "needs compute capability 8.0: the serve and train-step benchmarks do not run here");
  }

  if (!g.nvml) {
    add("nvml", "NVML readings", Status::skip, "NVML has no readings for this GPU: its state is not checked");
    return;
  }

  if (g.persistence_mode) {
    add("persistence_mode", "persistence mode", *g.persistence_mode ? Status::ok : Status::warn,
        *g.persistence_mode ? "on" : "off: the driver tears the GPU down when no process uses it",
        *g.persistence_mode ? ""
                            : "each run then pays the GPU's start-up and starts from cold clocks; "
                              "`nvidia-smi -pm 1` or nvidia-persistenced (root)");
  }

  if (g.power_limit_w) {
    const double limit = *g.power_limit_w;
    if (g.default_power_limit_w && limit < 0.97 * *g.default_power_limit_w) {
      add("power_limit", "power limit", Status::warn,
          fmt::format("{:.0f} W enforced, {:.0f} W by default: GEMM, prefill and large-batch results come out "
                      "below the card's",
                      limit, *g.default_power_limit_w),
          "compare only with runs at the same limit (recorded in result files), or restore the default (root)");
    } else if (spec != nullptr && spec->tdp_w.value > 0 && limit < 0.9 * spec->tdp_w.value) {
      add("power_limit", "power limit", Status::info,
          fmt::format("{:.0f} W{}, below the spec sheet's {:.0f} W: power-bound results come out below "
                      "published figures",
                      limit, g.default_power_limit_w ? " (the board's default)" : "", spec->tdp_w.value));
    } else {
      add("power_limit", "power limit", Status::ok,
          fmt::format("{:.0f} W{}", limit, g.default_power_limit_w ? " (the default)" : ""));
    }
  }

  if (g.clocks_held_down && g.clock_event_reasons) {
    add("clocks", "clocks at rest", *g.clocks_held_down ? Status::warn : Status::ok,
        *g.clocks_held_down
            ? fmt::format("held down while idle: {}", join(*g.clock_event_reasons, ", "))
            : fmt::format("SM {:.0f} MHz, nothing holding them down{}", g.sm_clock_mhz.value_or(0),
                          g.clock_event_reasons->empty() ? "" : " (" + join(*g.clock_event_reasons, ", ") + ")"),
        *g.clocks_held_down ? "check cooling and power delivery (`nvidia-smi -q -d PERFORMANCE`)" : "");
  }
  if (g.applications_sm_clock_mhz && g.default_applications_sm_clock_mhz &&
      *g.applications_sm_clock_mhz < *g.default_applications_sm_clock_mhz - 1) {
    add("applications_clocks", "application clocks", Status::warn,
        fmt::format("SM application clock {:.0f} MHz, default {:.0f} MHz: compute-bound results come out lower",
                    *g.applications_sm_clock_mhz, *g.default_applications_sm_clock_mhz),
        "`nvidia-smi -rac` (root) restores the default");
  }
  if (g.max_sm_clock_mhz && spec != nullptr && spec->boost_clock_mhz &&
      *g.max_sm_clock_mhz < 0.95 * spec->boost_clock_mhz->value) {
    add("max_clock", "maximum SM clock", Status::info,
        fmt::format("{:.0f} MHz, below the spec sheet's boost clock {:.0f} MHz: peaks scale down with it",
                    *g.max_sm_clock_mhz, spec->boost_clock_mhz->value));
  }

  if (g.temperature_c) {
    add("temperature", "temperature at rest", *g.temperature_c >= kHotAtRestC ? Status::warn : Status::ok,
        fmt::format("{:.0f} C", *g.temperature_c),
        *g.temperature_c >= kHotAtRestC ? "hot while idle: under load it reaches its thermal limits sooner; check "
                                          "airflow or what else runs on it"
                                        : "");
  }

  if (g.ecc_enabled) {
    if (!*g.ecc_enabled) {
      add("ecc", "ECC", Status::info,
          "off: a little more memory and bandwidth than with it on; published data-center figures are usually "
          "taken with it on");
    } else if (g.ecc_uncorrected_volatile && *g.ecc_uncorrected_volatile > 0) {
      add("ecc", "ECC", Status::fail,
          fmt::format("{} uncorrected memory errors since the driver loaded", *g.ecc_uncorrected_volatile),
          "results from this GPU are suspect: drain it and reset it (nvidia-smi -r, root)");
    } else {
      add("ecc", "ECC", Status::ok,
          g.ecc_uncorrected_volatile ? "on, no uncorrected errors since the driver loaded" : "on");
    }
  }
  if (g.row_remap_failure && *g.row_remap_failure) {
    add("row_remap", "memory row remapping", Status::fail, "a row remapping failed: the memory has a fault",
        "take the GPU out of service (RMA)");
  } else if (g.row_remap_pending && *g.row_remap_pending) {
    add("row_remap", "memory row remapping", Status::warn, "rows wait to be remapped at the next reset",
        "reset the GPU (nvidia-smi -r, root) when idle");
  }

  if (g.mig_enabled && *g.mig_enabled) {
    add("mig", "MIG", Status::warn, "on: CUDA sees MIG instances, and figures are those of a slice, not the GPU",
        "turn MIG off (root) to measure the whole GPU");
  }

  const bool busy_memory = g.memory_used_bytes && static_cast<double>(*g.memory_used_bytes) / kGiB > kBusyMemoryGiB;
  if (g.compute_processes || g.memory_used_bytes) {
    const std::string used =
        g.memory_used_bytes ? fmt::format("{:.1f} GiB in use", static_cast<double>(*g.memory_used_bytes) / kGiB) : "";
    const int processes = g.compute_processes.value_or(0);
    if (processes > 0 || busy_memory) {
      add("busy", "other work", Status::warn,
          processes > 0
              ? fmt::format("{} other process(es) hold a CUDA context{}", processes, used.empty() ? "" : "; " + used)
              : used + ": another process may share the GPU",
          "measure on an idle GPU: shared SMs, memory and power change every figure");
    } else {
      add("busy", "other work", Status::ok,
          fmt::format("idle{}", used.empty() ? "" : " (" + used + ", the driver's own)"));
    }
  }

  if (g.pcie_max_generation && g.pcie_max_width) {
    const std::string link = fmt::format("gen{} x{}", *g.pcie_max_generation, *g.pcie_max_width);
    const int spec_gen = spec != nullptr && spec->pcie_gen ? static_cast<int>(spec->pcie_gen->value) : 0;
    if (spec != nullptr && !spec->host_link.empty()) {
      add("pcie", "host link", Status::info,
          fmt::format("the host link is {} (PCIe {} beside it): host transfers go over it", spec->host_link, link));
    } else if (*g.pcie_max_width < 16 || (spec_gen > 0 && *g.pcie_max_generation < spec_gen)) {
      add("pcie", "PCIe link", Status::warn,
          fmt::format("{} at most{}: host-to-device bandwidth is below the card's", link,
                      spec_gen > 0 ? fmt::format(" (the card: gen{} x16)", spec_gen) : ""),
          "check the slot, riser or BIOS setting (`nvidia-smi -q -d PCIE`)");
    } else {
      add("pcie", "PCIe link", Status::ok, link + " at most (it drops at rest, as it should)");
    }
  }

  if (g.nvml) examine_cpu_affinity(g, subject, process_cpus, f);

  const bool spec_nvlink = spec != nullptr && spec->nvlink_gen && *spec->nvlink_gen > 0;
  if (spec_nvlink && g.nvlinks_total) {
    const int active = g.nvlinks_active.value_or(0);
    const bool pcie_card = spec->form_factor.find("PCIe") != std::string::npos;
    if (active == 0) {
      const bool matters = visible_gpus > 1 && !pcie_card;
      add("nvlink", "NVLink", matters ? Status::warn : Status::info,
          fmt::format("no active link (the card has NVLink {}){}", *spec->nvlink_gen,
                      pcie_card          ? ": a PCIe card needs a bridge"
                      : visible_gpus > 1 ? ": peer traffic goes over PCIe"
                                         : ": one GPU visible, no peer traffic"),
          matters ? "check `nvidia-smi nvlink -s` and the fabric manager" : "");
    } else if (active < *g.nvlinks_total) {
      add("nvlink", "NVLink", Status::warn, fmt::format("{} of {} links active", active, *g.nvlinks_total),
          "check `nvidia-smi nvlink -s`: peer bandwidth is below the machine's");
    } else {
      add("nvlink", "NVLink", Status::ok, fmt::format("{} links active", active));
    }
  }
}

void examine_peers(const Facts& facts, Findings& f) {
  if (facts.gpus.size() < 2 || facts.peers.empty()) return;
  std::vector<std::string> missing;
  for (const PeerFacts& p : facts.peers) {
    if (!p.access) missing.push_back(fmt::format("{}-{}", p.a, p.b));
  }
  if (missing.empty()) {
    f.add("gpus/peer_access", "GPUs", "peer access", Status::ok,
          fmt::format("every pair of the {} GPUs reaches the other's memory directly", facts.gpus.size()));
  } else {
    f.add("gpus/peer_access", "GPUs", "peer access", Status::warn,
          fmt::format("no peer access between GPUs {}: copies and NCCL between them go through host memory",
                      join(missing, ", ")),
          "check IOMMU/ACS settings and `nvidia-smi topo -p2p r`");
  }
}

}  // namespace

std::string_view to_string(Status status) {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::info:
      return "info";
    case Status::warn:
      return "warn";
    case Status::fail:
      return "fail";
    case Status::skip:
      return "skip";
  }
  return "?";
}

const std::vector<KnownVariable>& known_gpuscout_variables() {
  static const std::vector<KnownVariable> kVariables = {
      {"GPUSCOUT_DATA", "spec database and model catalog read from this directory", ""},
      {"GPUSCOUT_HISTORY_DB", "run history database at this path", ""},
      {"GPUSCOUT_GEMM_SEARCH", "the engine's cuBLASLt configuration search", "0"},
      {"GPUSCOUT_GEMM_LT_TIES", "the engine's choice between cuBLASLt's two best in whole steps", "0"},
      {"GPUSCOUT_SMALL_M_GEMM", "the engine's own small-m GEMM (off unless 1)", "1"},
      {"GPUSCOUT_RING_GEMV", "the engine's ring GEMV for decode at few rows", "0"},
      {"GPUSCOUT_SMALL_KERNEL_CARVEOUT", "the shared-memory carveout of the engine's small kernels", "0"},
      {"GPUSCOUT_DECODE_PAIR_KERNEL", "the pair decode attention kernel in the engine's tuning", "0"},
      {"GPUSCOUT_PREFILL_WGMMA", "the prefill attention kernel on wgmma", "0"},
      {"GPUSCOUT_PREFILL_TMA", "tensor copies in the prefill attention kernel", "0"},
      {"GPUSCOUT_SWIGLU_GEMM", "the gate/up GEMM with SwiGLU in its epilogue", "0"},
      {"GPUSCOUT_SWIGLU_EPILOGUE", "where that GEMM's SwiGLU epilogue runs", "in-place"},
      {"GPUSCOUT_PRUNE_LAST_LAYER", "the engine's pruned last layer at prefill", "0"},
      {"GPUSCOUT_SMEM_OPTIN_LIMIT", "a test hook capping the shared memory the kernels may use", "*"},
      {"GPUSCOUT_TRAIN_ATTENTION", "the train-step benchmark's attention kernel", "materialized"},
  };
  return kVariables;
}

std::string code_for(const std::vector<std::string>& cuda_architectures, const std::string& compute_capability) {
  const auto [major, minor] = parse_cc(compute_capability);
  if (major < 0) return "none";
  const int cc = major * 10 + minor;
  bool ptx = false;
  for (const std::string& arch : cuda_architectures) {
    // CMake's forms: "90" (both), "90-real" (machine code), "90-virtual" (PTX).
    int number = 0;
    std::size_t used = 0;
    try {
      number = std::stoi(arch, &used);
    } catch (...) {
      continue;
    }
    const std::string kind = arch.substr(used);
    const bool real = kind.empty() || kind == "-real";
    const bool virt = kind.empty() || kind == "-virtual";
    // Machine code loads on the same major version at an equal or higher minor one.
    if (real && number / 10 == major && number <= cc) return "sass";
    if (virt && number <= cc) ptx = true;
  }
  return ptx ? "ptx" : "none";
}

std::vector<Finding> examine(const Facts& facts) {
  Findings f;
  examine_build(facts.host.build, f);
  examine_data(facts.host, f);
  examine_environment(facts.host, f);
  examine_history(facts.host, f);
  examine_cpu(facts.host, f);
  examine_driver(facts, f);
  for (const GpuFacts& g : facts.gpus) examine_gpu(g, facts.host.process_cpus, facts.host.build, facts.gpus.size(), f);
  examine_peers(facts, f);
  return std::move(f.list);
}

std::size_t count(const std::vector<Finding>& findings, Status status) {
  return static_cast<std::size_t>(
      std::count_if(findings.begin(), findings.end(), [status](const Finding& x) { return x.status == status; }));
}

report::Table findings_table(const std::vector<Finding>& findings) {
  report::Table t;
  t.key = "doctor";
  t.add_column("status", "Status");
  t.add_column("subject", "Subject");
  t.add_column("check", "Check");
  t.add_column("observed", "Observed");
  t.add_column("advice", "Advice");
  t.add_column("key", "Key");
  for (const Finding& x : findings) {
    t.add_row({std::string(to_string(x.status)), x.subject, x.check, x.observed, x.advice, x.key});
  }
  t.notes.push_back(fmt::format("{} fail, {} warn, {} info, {} ok, {} skipped", count(findings, Status::fail),
                                count(findings, Status::warn), count(findings, Status::info),
                                count(findings, Status::ok), count(findings, Status::skip)));
  return t;
}

}  // namespace gpuscout::doctor
