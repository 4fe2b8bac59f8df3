#pragma once
// The full spec of one GPU as JSON, every figure with its source: what `gpuscout gpus show NAME
// --format json` prints. Keys follow the TOML schema (docs/spec-database.md).
#include <nlohmann/json.hpp>

#include "gpuscout/specs/gpu_spec.hpp"

namespace gpuscout::specs {

nlohmann::ordered_json to_json(const GpuSpec& spec);

}  // namespace gpuscout::specs
