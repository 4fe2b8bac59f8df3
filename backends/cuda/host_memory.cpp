#include "gpuscout/cuda/host_memory.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>

#include "gpuscout/cuda/check.hpp"

namespace gpuscout::cuda {
namespace {

// From <numaif.h>, without linking libnuma.
constexpr int kMpolPreferred = 1;
constexpr int kMpolDefault = 0;
constexpr unsigned long kMpolFNode = 1UL << 0;
constexpr unsigned long kMpolFAddr = 1UL << 1;

bool parse_cpulist(const std::string& list, cpu_set_t& set) {
  CPU_ZERO(&set);
  bool any = false;
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    if (part.empty()) continue;
    int lo = 0, hi = 0;
    const auto dash = part.find('-');
    try {
      lo = std::stoi(part.substr(0, dash));
      hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    } catch (...) {
      return false;
    }
    for (int c = lo; c <= hi && c < CPU_SETSIZE; ++c) {
      CPU_SET(c, &set);
      any = true;
    }
  }
  return any;
}

std::optional<int> node_of(void* p) {
  int node = -1;
  if (::syscall(SYS_get_mempolicy, &node, nullptr, 0UL, p, kMpolFNode | kMpolFAddr) == 0 && node >= 0) return node;
  return std::nullopt;
}

void touch(void* p, std::size_t bytes) {
  // One write per page is enough for first touch; zero the whole buffer so it holds defined data.
  std::memset(p, 0, bytes);
}

}  // namespace

std::string numa_node_cpulist(int node) {
  std::ifstream in(fmt::format("/sys/devices/system/node/node{}/cpulist", node));
  std::string list;
  std::getline(in, list);
  return list;
}

int numa_node_count() {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) ++count;
  }
  return std::max(count, 1);
}

HostBuffer::HostBuffer(std::size_t bytes, HostMemoryKind kind, int device, std::optional<int> numa_node)
    : bytes_(bytes), kind_(kind) {
  placement_.requested_node = numa_node;
  auto allocate = [&] {
    if (kind_ == HostMemoryKind::pinned_mapped) {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(device));
      GPUSCOUT_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes_, cudaHostAllocMapped | cudaHostAllocPortable));
    } else {
      ptr_ = std::aligned_alloc(4096, (bytes_ + 4095) / 4096 * 4096);
      if (ptr_ == nullptr) throw std::bad_alloc();
    }
    touch(ptr_, bytes_);
  };

  std::string cpus = numa_node ? numa_node_cpulist(*numa_node) : std::string();
  cpu_set_t set;
  if (numa_node && !cpus.empty() && parse_cpulist(cpus, set)) {
    // A helper thread bound to the node's CPUs, preferring its memory, allocates and touches.
    std::exception_ptr error;
    std::string policy_note;
    std::thread worker([&] {
      try {
        if (::sched_setaffinity(0, sizeof(set), &set) != 0) policy_note = "sched_setaffinity failed; ";
        unsigned long mask[16] = {};
        if (*numa_node < static_cast<int>(sizeof(mask) * 8)) {
          mask[*numa_node / (8 * sizeof(unsigned long))] |= 1UL << (*numa_node % (8 * sizeof(unsigned long)));
          if (::syscall(SYS_set_mempolicy, kMpolPreferred, mask, sizeof(mask) * 8) != 0) {
            policy_note += "set_mempolicy failed (first touch only); ";
          }
        }
        allocate();
        ::syscall(SYS_set_mempolicy, kMpolDefault, nullptr, 0UL);
      } catch (...) {
        error = std::current_exception();
      }
    });
    worker.join();
    if (error) std::rethrow_exception(error);
    placement_.cpus = cpus;
    placement_.method =
        fmt::format("{}allocated and first touched by a thread bound to NUMA node {} (CPUs {}), preferring its memory",
                    policy_note, *numa_node, cpus);
  } else {
    allocate();
    placement_.method = numa_node ? fmt::format("NUMA node {} has no CPU list in sysfs: default placement", *numa_node)
                                  : (numa_node_count() > 1 ? "GPU's NUMA node not reported: default placement"
                                                           : "single NUMA node: default placement");
  }
  placement_.actual_node = node_of(ptr_);
  if (kind_ == HostMemoryKind::pinned_mapped) {
    GPUSCOUT_CUDA_CHECK(cudaHostGetDevicePointer(&device_ptr_, ptr_, 0));
  }
}

HostBuffer::~HostBuffer() {
  if (ptr_ == nullptr) return;
  if (kind_ == HostMemoryKind::pinned_mapped) {
    GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFreeHost(ptr_));
  } else {
    std::free(ptr_);
  }
}

ScopedNodeAffinity::ScopedNodeAffinity(std::optional<int> numa_node) {
  static_assert(sizeof(saved_) >= sizeof(cpu_set_t));
  if (!numa_node) return;
  const std::string cpus = numa_node_cpulist(*numa_node);
  cpu_set_t set;
  if (cpus.empty() || !parse_cpulist(cpus, set)) return;
  auto* saved = reinterpret_cast<cpu_set_t*>(saved_);
  if (::sched_getaffinity(0, sizeof(cpu_set_t), saved) != 0) return;
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) return;
  bound_ = true;
  cpus_ = cpus;
}

ScopedNodeAffinity::~ScopedNodeAffinity() {
  if (bound_) ::sched_setaffinity(0, sizeof(cpu_set_t), reinterpret_cast<cpu_set_t*>(saved_));
}

}  // namespace gpuscout::cuda
