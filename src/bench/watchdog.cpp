#include "gpuscout/bench/watchdog.hpp"

#include <fmt/format.h>

#include <thread>

namespace gpuscout::bench {

WatchdogResult wait_or_abort(const std::function<PollState(std::string& error)>& poll,
                             const std::function<void()>& abort, const WatchdogOptions& options,
                             const std::atomic<bool>* interrupted) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  WatchdogResult result;
  for (;;) {
    const PollState state = poll(result.error);
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    result.waited_s = waited;
    if (state == PollState::done) {
      result.status = WatchdogResult::Status::completed;
      return result;
    }
    if (state == PollState::failed) {
      result.status = WatchdogResult::Status::failed;
      return result;
    }
    const bool stop = interrupted != nullptr && interrupted->load();
    if (stop || waited >= options.timeout_s) {
      result.status = stop ? WatchdogResult::Status::interrupted : WatchdogResult::Status::timeout;
      if (abort) abort();
      return result;
    }
    if (waited > options.spin_s) std::this_thread::sleep_for(options.idle_sleep);
  }
}

std::string to_string(WatchdogResult::Status status) {
  switch (status) {
    case WatchdogResult::Status::completed:
      return "completed";
    case WatchdogResult::Status::failed:
      return "failed";
    case WatchdogResult::Status::timeout:
      return "timeout";
    case WatchdogResult::Status::interrupted:
      return "interrupted";
  }
  return "unknown";
}

std::string timeout_message(const std::string& what, double timeout_s, const std::string& ranks) {
  return fmt::format("{} did not finish within {:g} s on ranks {}: aborted with ncclCommAbort", what, timeout_s, ranks);
}

DeadlineGuard::DeadlineGuard(std::function<void(const std::string& what)> on_expiry)
    : on_expiry_(std::move(on_expiry)), thread_([this] { watch(); }) {}

DeadlineGuard::~DeadlineGuard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DeadlineGuard::arm(const std::string& what, double timeout_s) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(timeout_s));
  }
  changed_.notify_all();
}

void DeadlineGuard::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  changed_.notify_all();
}

void DeadlineGuard::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stop_) return;
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && armed_ && deadline_ == deadline) {
      armed_ = false;  // fires once per arm
      const std::string what = what_;
      lock.unlock();
      on_expiry_(what);
      lock.lock();
    }
  }
}

}  // namespace gpuscout::bench
