#pragma once
// The collective watchdog (pure C++, tested in CI with a CPU stand-in for the collective): wait for
// work to finish by polling, and abort it once a deadline passes or the user interrupts, so a hung
// collective ends the run with a message instead of hanging it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

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

// Guards host calls that can block inside a library (an NCCL init or first connection to a peer
// that died): while armed, a background thread calls on_expiry(what) once the deadline passes. The
// caller's thread is stuck at that point, so on_expiry normally prints and ends the process.
class DeadlineGuard {
 public:
  explicit DeadlineGuard(std::function<void(const std::string& what)> on_expiry);
  ~DeadlineGuard();
  DeadlineGuard(const DeadlineGuard&) = delete;
  DeadlineGuard& operator=(const DeadlineGuard&) = delete;

  void arm(const std::string& what, double timeout_s);
  void disarm();

  // Arms for one scope.
  class Scope {
   public:
    Scope(DeadlineGuard& guard, const std::string& what, double timeout_s) : guard_(guard) {
      guard_.arm(what, timeout_s);
    }
    ~Scope() { guard_.disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DeadlineGuard& guard_;
  };

 private:
  void watch();

  std::function<void(const std::string&)> on_expiry_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  bool armed_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace gpuscout::bench
