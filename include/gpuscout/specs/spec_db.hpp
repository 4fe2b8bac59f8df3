#pragma once
// PLACEHOLDER: replaced by the spec database implementation.
#include "gpuscout/data/data_source.hpp"
namespace gpuscout::specs {
class SpecDb {
 public:
  static SpecDb load(const data::DataSource&) { return {}; }
};
}  // namespace gpuscout::specs
