#pragma once
// The interface between the load generator and whatever serves the requests (MLPerf LoadGen's
// SystemUnderTest, with token streaming). The load generator knows nothing of GPUs: the CUDA
// engine, the CPU reference engine and test doubles all implement this.
//
// Time: the load generator reads a Clock. A real run uses the steady clock; CI tests use a virtual
// clock that the system under test advances by a modelled cost per step, so scenario logic is
// deterministic on any machine.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuscout::serve {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_s() const = 0;
  // Blocks (real clock) or jumps (virtual clock) until now_s() >= t_s.
  virtual void wait_until(double t_s) = 0;
};

class SteadyClock final : public Clock {
 public:
  SteadyClock();
  double now_s() const override;
  void wait_until(double t_s) override;

 private:
  double origin_s_;
};

class VirtualClock final : public Clock {
 public:
  double now_s() const override { return now_s_; }
  void wait_until(double t_s) override {
    if (t_s > now_s_) now_s_ = t_s;
  }
  void advance(double seconds) { now_s_ += seconds; }

 private:
  double now_s_ = 0;
};

struct Request {
  std::uint64_t id = 0;
  int input_tokens = 0;
  int output_tokens = 0;
  double arrival_s = 0;  // scheduled issue time on the clock (latencies count from here)
};

struct TokenEvent {
  std::uint64_t request_id = 0;
  int tokens = 1;         // tokens this step produced for the request
  bool finished = false;  // the request's last token
};

class SystemUnderTest {
 public:
  virtual ~SystemUnderTest() = default;
  virtual std::string name() const = 0;
  // Why the system can never serve this request (too long for its context, more KV than it has);
  // nullopt when it can. The load generator checks every request before the run starts.
  virtual std::optional<std::string> reject_reason(const Request& request) const = 0;
  virtual void submit(const Request& request) = 0;
  // Nothing queued or in flight.
  virtual bool idle() const = 0;
  // One engine iteration; appends the tokens it produced. The load generator stamps them with the
  // clock when step() returns (a virtual-clock system advances its clock inside step()).
  virtual void step(std::vector<TokenEvent>& events) = 0;
};

}  // namespace gpuscout::serve
