#pragma once
// The embedded data the model tests share (spec DB, model catalog, framework profiles), loaded once, and
// a speed context for a GPU of the spec DB with its calibration (measured, transferred or public).
#include <string>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/calibration.hpp"
#include "gpuscout/model/speed.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::model::test {

inline const specs::SpecDb& db() {
  static const auto d = specs::SpecDb::load(data::DataSource::embedded());
  return d;
}
inline const workloads::ModelCatalog& catalog() {
  static const auto c = workloads::ModelCatalog::load(data::DataSource::embedded());
  return c;
}
inline const std::vector<FrameworkProfile>& frameworks() {
  static const auto f = load_frameworks(data::DataSource::embedded());
  return f;
}

inline SpeedContext context(const std::string& gpu, const std::string& framework = "tensorrt-llm") {
  SpeedContext ctx;
  ctx.gpu = &db().get(gpu);
  ctx.calibration = calibration_for(*ctx.gpu, load_calibrations(data::DataSource::embedded()));
  ctx.framework = find_framework(frameworks(), framework, "--framework");
  return ctx;
}

}  // namespace gpuscout::model::test
