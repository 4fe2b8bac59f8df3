#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuscout/bench/collectives.hpp"
#include "gpuscout/bench/watchdog.hpp"

using namespace gpuscout::bench;

TEST(Collectives, NamesRoundTrip) {
  for (Collective c : all_collectives()) EXPECT_EQ(collective_from_string(to_string(c)), c);
  EXPECT_EQ(collective_from_string("allreduce"), Collective::all_reduce);
  EXPECT_EQ(collective_from_string("All-Gather"), Collective::all_gather);
  EXPECT_FALSE(collective_from_string("reduce").has_value());
}

TEST(Collectives, BusbwFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_gather, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::reduce_scatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::alltoall, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::sendrecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_reduce, 1), 0.0);
}

TEST(Collectives, CountsFollowNcclTests) {
  // all_reduce 1 GiB float, 2 ranks: count = 2^28, S = 1 GiB.
  auto k = coll_counts(Collective::all_reduce, 1ull << 30, 4, 2);
  EXPECT_EQ(k.param_count, 1u << 28);
  EXPECT_EQ(k.send_count, k.recv_count);
  EXPECT_EQ(k.bus_bytes, 1ull << 30);
  // all_gather 8 GiB float, 2 ranks: each sends 4 GiB, receives 8 GiB; S = total output.
  k = coll_counts(Collective::all_gather, 8ull << 30, 4, 2);
  EXPECT_EQ(k.send_count, 1ull << 30);
  EXPECT_EQ(k.recv_count, 2ull << 30);
  EXPECT_EQ(k.param_count, 1ull << 30);
  EXPECT_EQ(k.bus_bytes, 8ull << 30);
  // reduce_scatter: the mirror image.
  k = coll_counts(Collective::reduce_scatter, 8ull << 30, 4, 2);
  EXPECT_EQ(k.send_count, 2ull << 30);
  EXPECT_EQ(k.recv_count, 1ull << 30);
  EXPECT_EQ(k.bus_bytes, 8ull << 30);
  // alltoall 3 ranks, 100 elements: 33 per peer, 99 sent, S counts 99 elements.
  k = coll_counts(Collective::alltoall, 400, 4, 3);
  EXPECT_EQ(k.param_count, 33u);
  EXPECT_EQ(k.send_count, 99u);
  EXPECT_EQ(k.bus_bytes, 396u);
  // 8 bytes of float over 8 ranks: nothing to gather (nccl-tests prints 0-byte rows too).
  k = coll_counts(Collective::all_gather, 8, 4, 8);
  EXPECT_EQ(k.param_count, 0u);
  EXPECT_EQ(k.bus_bytes, 0u);
  // bandwidth: 1 GB in 1 ms = 1000 GB/s.
  EXPECT_DOUBLE_EQ(algbw_gbps(1'000'000'000, 1e-3), 1000.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(1, 0), 0.0);
}

TEST(Collectives, SizeSweeps) {
  const auto sizes = default_coll_sizes(false);
  ASSERT_EQ(sizes.size(), 31u);  // 8 B .. 8 GiB by x2
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), 8ull << 30);
  EXPECT_EQ(default_coll_sizes(true), (std::vector<std::uint64_t>{8, 1ull << 20, 64ull << 20, 1ull << 30}));
  EXPECT_EQ(sweep_sizes(1, 100, 10.0), (std::vector<std::uint64_t>{1, 10, 100}));
  EXPECT_TRUE(sweep_sizes(0, 100, 2.0).empty());
  EXPECT_TRUE(sweep_sizes(8, 4, 2.0).empty());
}

TEST(Collectives, DataTypes) {
  EXPECT_EQ(data_type_from_string("bf16")->size, 2u);
  EXPECT_EQ(data_type_from_string("BFloat16")->name, "bf16");
  EXPECT_EQ(data_type_from_string("fp32")->name, "float");
  EXPECT_EQ(data_type_from_string("double")->size, 8u);
  EXPECT_FALSE(data_type_from_string("int8")->is_float);
  EXPECT_FALSE(data_type_from_string("fp8").has_value());
}

TEST(Collectives, ExpectedValuesMatchASimulation) {
  // Simulate each collective on the CPU from fill_value and compare with expected_value.
  const int n = 3;
  for (Collective c : all_collectives()) {
    const auto k = coll_counts(c, 4 * 60, 4, n);
    const int op = static_cast<int>(c);
    std::vector<std::vector<std::uint32_t>> send(n), recv(n);
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < k.send_count; ++i) send[r].push_back(fill_value(r, i));
      recv[r].assign(k.recv_count, 0);
    }
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < k.recv_count; ++i) {
        std::uint32_t v = 0;
        switch (c) {
          case Collective::all_reduce:
            for (int q = 0; q < n; ++q) v += send[q][i];
            break;
          case Collective::all_gather:
            v = send[i / k.param_count][i % k.param_count];
            break;
          case Collective::reduce_scatter:
            for (int q = 0; q < n; ++q) v += send[q][r * k.param_count + i];
            break;
          case Collective::broadcast:
            v = send[0][i];
            break;
          case Collective::alltoall:
            v = send[i / k.param_count][r * k.param_count + i % k.param_count];
            break;
          case Collective::sendrecv:
            v = send[(r + n - 1) % n][i];
            break;
        }
        EXPECT_EQ(expected_value(op, r, n, k.param_count, i), v) << to_string(c) << " rank " << r << " i " << i;
      }
    }
  }
  EXPECT_FALSE(in_place_defined(Collective::alltoall));
  EXPECT_TRUE(in_place_defined(Collective::all_gather));
}

// The watchdog with a CPU stand-in for a collective: each "rank" is a thread that arrives at a
// barrier; the collective completes when all have arrived. A rank that never arrives makes it hang.
namespace {
struct CpuCollective {
  explicit CpuCollective(int ranks) : expected(ranks) {}
  void arrive() { arrived.fetch_add(1); }
  PollState poll(std::string& error) {
    if (failed.load()) {
      error = "peer closed the connection";
      return PollState::failed;
    }
    return arrived.load() == expected ? PollState::done : PollState::pending;
  }
  int expected;
  std::atomic<int> arrived{0};
  std::atomic<bool> failed{false}, aborted{false};
};
}  // namespace

TEST(Watchdog, CompletesWhenAllRanksArrive) {
  CpuCollective coll(2);
  std::thread a([&] { coll.arrive(); });
  std::thread b([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    coll.arrive();
  });
  WatchdogOptions opt;
  opt.timeout_s = 5;
  const auto res = wait_or_abort([&](std::string& e) { return coll.poll(e); }, [&] { coll.aborted = true; }, opt);
  a.join();
  b.join();
  EXPECT_EQ(res.status, WatchdogResult::Status::completed);
  EXPECT_FALSE(coll.aborted.load());
  EXPECT_LT(res.waited_s, 5.0);
}

TEST(Watchdog, AbortsAHungCollectiveAtTheDeadline) {
  CpuCollective coll(2);
  coll.arrive();  // the second rank never arrives
  WatchdogOptions opt;
  opt.timeout_s = 0.2;
  const auto t0 = std::chrono::steady_clock::now();
  const auto res = wait_or_abort([&](std::string& e) { return coll.poll(e); }, [&] { coll.aborted = true; }, opt);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(res.status, WatchdogResult::Status::timeout);
  EXPECT_TRUE(coll.aborted.load());
  EXPECT_GE(res.waited_s, 0.2);
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(to_string(res.status), "timeout");
  EXPECT_EQ(timeout_message("all_reduce 1GiB", 0.2, "0,1"),
            "all_reduce 1GiB did not finish within 0.2 s on ranks 0,1: aborted with ncclCommAbort");
}

TEST(Watchdog, AFailedPeerEndsTheWaitAtOnce) {
  CpuCollective coll(2);
  std::thread dead([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    coll.failed = true;  // what ncclCommGetAsyncError reports when a peer dies
  });
  WatchdogOptions opt;
  opt.timeout_s = 30;
  const auto res = wait_or_abort([&](std::string& e) { return coll.poll(e); }, [&] { coll.aborted = true; }, opt);
  dead.join();
  EXPECT_EQ(res.status, WatchdogResult::Status::failed);
  EXPECT_EQ(res.error, "peer closed the connection");
  EXPECT_LT(res.waited_s, 5.0);
}

TEST(Watchdog, InterruptAborts) {
  CpuCollective coll(2);
  std::atomic<bool> interrupted{true};
  WatchdogOptions opt;
  opt.timeout_s = 30;
  const auto res =
      wait_or_abort([&](std::string& e) { return coll.poll(e); }, [&] { coll.aborted = true; }, opt, &interrupted);
  EXPECT_EQ(res.status, WatchdogResult::Status::interrupted);
  EXPECT_TRUE(coll.aborted.load());
}

// The host-call guard: fires once when an armed call overruns, never when it is disarmed in time.
TEST(DeadlineGuard, FiresOnceWhenAnArmedCallOverruns) {
  std::mutex m;
  std::vector<std::string> fired;
  DeadlineGuard guard([&](const std::string& what) {
    std::lock_guard<std::mutex> lock(m);
    fired.push_back(what);
  });
  guard.arm("ncclCommInitAll", 0.05);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  std::lock_guard<std::mutex> lock(m);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired.front(), "ncclCommInitAll");
}

TEST(DeadlineGuard, StaysQuietWhenDisarmedInTimeOrRearmed) {
  std::atomic<int> fired{0};
  DeadlineGuard guard([&](const std::string&) { fired.fetch_add(1); });
  {
    DeadlineGuard::Scope scope(guard, "step 1", 0.2);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Re-arming moves the deadline: the first, shorter one must not fire.
  guard.arm("step 2", 0.05);
  guard.arm("step 2", 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  guard.disarm();
  EXPECT_EQ(fired.load(), 0);
}
