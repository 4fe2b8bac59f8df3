#pragma once
// Host buffers for transfer benchmarks, placed on the GPU's NUMA node when it is known (as
// nvbandwidth does): the allocating thread is bound to that node's CPUs and prefers its memory,
// so first touch puts the pages there; the node the first page landed on is read back and reported.
#include <cstddef>
#include <optional>
#include <string>

namespace gpuscout::cuda {

struct HostPlacement {
  std::optional<int> requested_node;  // the GPU's NUMA node, when known
  std::optional<int> actual_node;     // where the first page is (get_mempolicy), when readable
  std::string cpus;                   // CPU list the allocating thread was bound to ("0-15"), empty if none
  std::string method;                 // how it was placed, or why it fell back
};

enum class HostMemoryKind { pinned_mapped, pageable };

class HostBuffer {
 public:
  // Allocates and touches `bytes`; pinned buffers are cudaHostAlloc(mapped | portable) on `device`.
  // Throws CudaError or std::bad_alloc.
  HostBuffer(std::size_t bytes, HostMemoryKind kind, int device, std::optional<int> numa_node);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* get() const { return ptr_; }
  void* device_pointer() const { return device_ptr_; }  // pinned only: the GPU's view of the buffer
  std::size_t bytes() const { return bytes_; }
  const HostPlacement& placement() const { return placement_; }

 private:
  void* ptr_ = nullptr;
  void* device_ptr_ = nullptr;
  std::size_t bytes_ = 0;
  HostMemoryKind kind_;
  HostPlacement placement_;
};

// Binds the calling thread to the CPUs of a NUMA node for its lifetime (the thread that times
// transfers should run next to the memory and the GPU); does nothing when the node is unknown.
class ScopedNodeAffinity {
 public:
  explicit ScopedNodeAffinity(std::optional<int> numa_node);
  ~ScopedNodeAffinity();
  ScopedNodeAffinity(const ScopedNodeAffinity&) = delete;
  ScopedNodeAffinity& operator=(const ScopedNodeAffinity&) = delete;
  const std::string& cpus() const { return cpus_; }  // empty when not bound

 private:
  bool bound_ = false;
  std::string cpus_;
  alignas(8) unsigned char saved_[128] = {};  // cpu_set_t, kept opaque here
};

// CPU list of a NUMA node from sysfs ("0-15,32-47"); empty when unknown.
std::string numa_node_cpulist(int node);
// Number of NUMA nodes the kernel reports (1 when not NUMA).
int numa_node_count();

}  // namespace gpuscout::cuda
