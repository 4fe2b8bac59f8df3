#include "context.hpp"

#include <iostream>

#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::cli {

AppContext::AppContext(int argc, const char* const* argv_in, std::ostream& out_stream)
    : out(out_stream), argv(argv_in, argv_in + argc), raw_argv(argv_in) {}

AppContext::~AppContext() = default;

const data::DataSource& AppContext::data() {
  if (!data_) data_ = data::DataSource::resolve(options.data_dir);
  return *data_;
}

const specs::SpecDb& AppContext::specs() {
  if (!specs_) specs_ = std::make_unique<specs::SpecDb>(specs::SpecDb::load(data()));
  return *specs_;
}

const workloads::ModelCatalog& AppContext::models() {
  if (!models_) models_ = std::make_unique<workloads::ModelCatalog>(workloads::ModelCatalog::load(data()));
  return *models_;
}

void AppContext::raise_exit_code(ExitCode code) {
  if (static_cast<int>(code) > static_cast<int>(exit_code_)) exit_code_ = code;
}

}  // namespace gpuscout::cli
