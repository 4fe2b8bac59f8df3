#pragma once
// Minimal declarations of NCCL's profiler plugin interface, versions 5 (NCCL 2.28 and later also
// accept it) and 4, for gpuscout's plugin and its test. Written from NVIDIA/nccl's
// ext-profiler/example/nccl/profiler_v5.h and profiler_v4.h (read at commits e5d9a7a and 56a409d,
// 2026): only the members gpuscout reads are spelled out; NCCL allocates every descriptor, so the
// union members left out change nothing as long as the ones kept sit at NCCL's offsets. ncclResult_t
// and the state enum are ints, NCCL's logger a pointer: the plugin needs no NCCL header.
#include <cstddef>
#include <cstdint>

namespace gpuscout::nccl_profiler_abi {

// Event types (ncclProfileColl, ncclProfileP2p in profiler.h): the same bits in v1..v5.
constexpr int kEventColl = 1 << 1;
constexpr int kEventP2p = 1 << 2;

struct CollV4 {
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t nChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
};
struct P2pV4 {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t nChannels;
};
// v5 appends parentGroup ("for backward compatibility with v4") to both, after v4's members.
struct CollV5 {
  CollV4 v4;
  void* parentGroup;
};
struct P2pV5 {
  P2pV4 v4;
  void* parentGroup;
};

struct EventDescrV4 {
  std::uint8_t type;  // v4: uint8_t
  void* parentObj;
  int rank;
  union {
    CollV4 coll;
    P2pV4 p2p;
  };
};
struct EventDescrV5 {
  std::uint64_t type;  // v5: uint64_t
  void* parentObj;
  int rank;
  union {
    CollV5 coll;
    P2pV5 p2p;
  };
};

using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct ProfilerV4 {
  const char* name;
  int (*init)(void** context, int* eActivationMask, const char* commName, std::uint64_t commHash, int nNodes,
              int nranks, int rank, Logger logfn);
  int (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  int (*stopEvent)(void* eHandle);
  int (*recordEventState)(void* eHandle, int eState, void* eStateArgs);
  int (*finalize)(void* context);
};
struct ProfilerV5 {
  const char* name;
  int (*init)(void** context, std::uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
              int rank, Logger logfn);
  int (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  int (*stopEvent)(void* eHandle);
  int (*recordEventState)(void* eHandle, int eState, void* eStateArgs);
  int (*finalize)(void* context);
};

// NCCL's layout: the union starts after `int rank`, at 24 on LP64.
static_assert(offsetof(EventDescrV4, coll) == 24 && offsetof(EventDescrV5, coll) == 24);
static_assert(offsetof(CollV4, nChannels) == 56 && offsetof(CollV4, algo) == 64 && offsetof(CollV4, proto) == 72);
static_assert(offsetof(CollV5, parentGroup) == 80);
static_assert(offsetof(P2pV4, count) == 24 && offsetof(P2pV4, nChannels) == 36);
static_assert(offsetof(P2pV5, parentGroup) == 40);

}  // namespace gpuscout::nccl_profiler_abi

// gpuscout's own query functions, exported by the plugin beside ncclProfiler_v5/_v4 (C linkage,
// looked up with dlsym by NcclProfilerControl).
extern "C" {
// Recording on: the activation mask asks NCCL for collective and send/recv events; off: none.
void gpuscout_nccl_profiler_set_recording(int on);
void gpuscout_nccl_profiler_clear(void);
// Communicators NCCL initialised the plugin for, and the interface version it used (5, 4; 0: never).
int gpuscout_nccl_profiler_communicators(void);
int gpuscout_nccl_profiler_interface(void);
// 1 and the outputs filled when a call with this key was recorded, else 0. Strings are cut to fit.
// count ~0ull: the only call of that rank, function and datatype, whatever its count.
int gpuscout_nccl_profiler_lookup(int rank, const char* func, unsigned long long count, const char* datatype,
                                  char* algorithm, int algorithm_size, char* protocol, int protocol_size,
                                  int* channels);
}
