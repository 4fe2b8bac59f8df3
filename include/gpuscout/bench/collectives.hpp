#pragma once
// NCCL collectives as nccl-tests defines them (pure C++, tested in CI): element counts per rank for a
// message size, the bytes algbw counts, busbw factors, the size sweep, data types, and the
// deterministic data that makes every result element predictable (verification after timing).
// C++17-clean and free of CUDA headers: backends/cuda/benchmarks/collectives.cu includes it and
// runs fill_value/expected_value on the GPU (GPUSCOUT_HD marks them __host__ __device__ there).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define GPUSCOUT_HD __host__ __device__
#else
#define GPUSCOUT_HD
#endif

namespace gpuscout::bench {

enum class Collective { all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv };

const std::vector<Collective>& all_collectives();
std::string to_string(Collective c);
// "all_reduce" (also "allreduce"), ...; nullopt for an unknown name.
std::optional<Collective> collective_from_string(const std::string& name);

// Element counts for one rank, as nccl-tests' *GetCollByteCount (count = size / element size):
//   all_reduce, broadcast, sendrecv: send = recv = param = count
//   all_gather: send = param = count/n, recv = send * n (in place: send at recv + rank * send)
//   reduce_scatter: recv = param = count/n, send = recv * n (in place: recv at send + rank * recv)
//   alltoall: param = count/n elements to each peer, send = recv = param * n
struct CollCounts {
  std::size_t send_count = 0, recv_count = 0;
  std::size_t param_count = 0;  // the count argument of the NCCL call (per peer for alltoall)
  std::size_t send_inplace_offset = 0, recv_inplace_offset = 0;  // elements, for in-place runs
  std::uint64_t bus_bytes = 0;  // S: the bytes algbw divides by time (nccl-tests' *GetBw)
};
CollCounts coll_counts(Collective c, std::uint64_t size_bytes, std::size_t element_size, int nranks);

// busbw = algbw x factor: 2(n-1)/n all_reduce; (n-1)/n all_gather, reduce_scatter, alltoall; 1 broadcast, sendrecv.
double busbw_factor(Collective c, int nranks);
// GB/s (1e9 B/s).
inline double algbw_gbps(std::uint64_t bus_bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bus_bytes) / 1e9 / seconds : 0.0;
}
// What S means for the collective ("count x type", "total output = n x per-rank send", ...).
std::string size_meaning(Collective c);
// In place is defined for all_reduce, all_gather, reduce_scatter, broadcast; nccl-tests does not
// verify in-place alltoall, and a send and receive sharing one buffer race for sendrecv.
bool in_place_defined(Collective c);

// Sizes: default 8 B .. 8 GiB by x2; quick: 8 B, 1 MiB, 64 MiB, 1 GiB.
std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes, double factor);
std::vector<std::uint64_t> default_coll_sizes(bool quick);

// Data types (NCCL names and common aliases): float/fp32, half/fp16, bf16/bfloat16, double/fp64,
// int8, uint8, int32, uint32, int64, uint64.
struct DataType {
  std::string name;  // canonical: "float", "half", "bf16", "double", "int8", ...
  std::size_t size = 0;
  bool is_float = false;
};
std::optional<DataType> data_type_from_string(const std::string& name);

// Deterministic data: element i of rank r's send buffer holds fill_value(r, i), a small integer
// (0..10) that every type holds exactly; sums stay exact in bf16/fp16 up to 25 ranks and in int8 up
// to 12 (larger int8 sums wrap and count as wrong). expected_value gives output element i of rank `rank` for the
// collective (sum reduction, root 0, sendrecv from rank-1 to rank+1 in a ring).
GPUSCOUT_HD inline std::uint32_t fill_value(int rank, std::uint64_t i) {
  return static_cast<std::uint32_t>((i * 3u + static_cast<std::uint64_t>(rank) * 5u) % 11u);
}

// `op` is static_cast<int>(Collective); `param_count` from coll_counts.
GPUSCOUT_HD inline std::uint32_t expected_value(int op, int rank, int nranks, std::uint64_t param_count,
                                                std::uint64_t i) {
  switch (op) {
    case 0: {  // all_reduce
      std::uint32_t s = 0;
      for (int r = 0; r < nranks; ++r) s += fill_value(r, i);
      return s;
    }
    case 1: {  // all_gather: block b of the output is rank b's send buffer
      const std::uint64_t b = i / param_count;
      return fill_value(static_cast<int>(b), i % param_count);
    }
    case 2: {  // reduce_scatter: this rank's block of the sum
      std::uint32_t s = 0;
      const std::uint64_t j = static_cast<std::uint64_t>(rank) * param_count + i;
      for (int r = 0; r < nranks; ++r) s += fill_value(r, j);
      return s;
    }
    case 3:  // broadcast from root 0
      return fill_value(0, i);
    case 4: {  // alltoall: block b comes from rank b, which sent its block `rank`
      const std::uint64_t b = i / param_count;
      return fill_value(static_cast<int>(b), static_cast<std::uint64_t>(rank) * param_count + i % param_count);
    }
    default:  // sendrecv: from the previous rank in the ring
      return fill_value((rank + nranks - 1) % nranks, i);
  }
}

// Output elements this rank checks after a run (recv_count), and whether the op verifies at all here.
std::size_t checked_elements(Collective c, const CollCounts& counts);

}  // namespace gpuscout::bench
