#pragma once
// The collective watchdog (pure C++, tested in CI with a CPU stand-in for the collective): wait for
// work to finish by polling, and abort it once a deadline passes or the user interrupts, so a hung
// collective ends the run with a message instead of hanging it.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>

namespace gpuscout::bench {

enum class PollState { done, pending, failed };

struct WatchdogOptions {
  double timeout_s = 60;
  // Poll without sleeping this long first (small collectives finish in microseconds and their time
  // is measured), then sleep `idle_sleep` between polls.
  double spin_s = 0.005;
  std::chrono::microseconds idle_sleep{100};
};

struct WatchdogResult {
  enum class Status { completed, failed, timeout, interrupted };
  Status status = Status::completed;
  double waited_s = 0;
  std::string error;  // from poll() when failed
};

// Calls poll() until it says done or failed (poll may fill `error`). When timeout_s passes first, or
// *interrupted becomes true, calls abort() once and returns timeout / interrupted. Never blocks
// longer than timeout_s plus one poll and the abort.
WatchdogResult wait_or_abort(const std::function<PollState(std::string& error)>& poll,
                             const std::function<void()>& abort, const WatchdogOptions& options,
                             const std::atomic<bool>* interrupted = nullptr);

std::string to_string(WatchdogResult::Status status);

// "all_reduce 1GiB (float, out of place) did not finish within 60 s on ranks 0,1: aborted with ncclCommAbort"
std::string timeout_message(const std::string& what, double timeout_s, const std::string& ranks);

}  // namespace gpuscout::bench
