#pragma once
// Internal to src/infer: the one check of whether a sequence can ever run under a scheduler
// configuration, shared by Scheduler::add and EngineSut::reject_reason so both say the same.
#include <cstdint>
#include <optional>
#include <string>

#include "gpuscout/infer/scheduler.hpp"

namespace gpuscout::infer::detail {

// KV-cache blocks a sequence holds at its longest: the last output token is never fed back, so
// positions [0, prompt + output - 1) are cached.
inline std::int64_t blocks_at_most(const SchedulerConfig& config, std::int64_t prompt, std::int64_t output) {
  const std::int64_t cached = prompt + output - 1;
  return (cached + config.block_size - 1) / config.block_size;
}

// Why a sequence of `prompt` input and `output` output tokens can never run; nullopt if it can.
std::optional<std::string> sequence_limit_problem(const SchedulerConfig& config, std::int64_t prompt,
                                                  std::int64_t output);

}  // namespace gpuscout::infer::detail
