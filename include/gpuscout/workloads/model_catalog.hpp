#pragma once
// PLACEHOLDER: replaced by the model catalog implementation.
#include "gpuscout/data/data_source.hpp"
namespace gpuscout::workloads {
class ModelCatalog {
 public:
  static ModelCatalog load(const data::DataSource&) { return {}; }
};
}  // namespace gpuscout::workloads
