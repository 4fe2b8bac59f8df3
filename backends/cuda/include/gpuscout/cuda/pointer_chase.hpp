#pragma once
// Latency of dependent loads, the way nvbandwidth's *_latency_sm cases measure it: one GPU thread
// follows a chain of pointers through the memory under test, so each load waits for the one before.
// Shared by the host latency (transfer) and peer latency (p2p) cases.
#include <cstddef>

#include "gpuscout/bench/stats.hpp"
#include "gpuscout/cuda/benchmark.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cuda {

// One 64-byte node: a load per node, one node per cache line.
struct ChaseNode {
  ChaseNode* next;
  char pad[56];
};

// Writes, through `host_view`, one cycle through all `nodes` with a large prime stride (consecutive
// loads far apart, nothing usefully prefetched); the pointers are `device_view` addresses.
void link_chase_chain(ChaseNode* host_view, ChaseNode* device_view, std::size_t nodes);
// Links of the chain (read through `host_view`) that differ from what link_chase_chain wrote.
std::size_t broken_chase_links(const ChaseNode* host_view, const ChaseNode* device_view, std::size_t nodes);

// Times one thread of the current device following `accesses` links from `start` (CUDA events,
// the run's stopping rule), with telemetry into `rec`; returns the time per load in seconds.
// Throws std::runtime_error("interrupted") when Ctrl-C left no sample.
bench::SampleSummary time_pointer_chase(const BenchEnv& env, ChaseNode* start, int accesses, results::Record& rec);

}  // namespace gpuscout::cuda
