#pragma once
// The model catalog: one TOML file per model under data/models/ (schema in docs/model-catalog.md),
// validated on load, looked up by name or alias case- and punctuation-insensitively.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/util/names.hpp"
#include "gpuscout/workloads/model_arch.hpp"

namespace gpuscout::workloads {

// A parameter count stated by the model's authors, with where it was stated.
struct PublishedParams {
  std::int64_t total = 0;
  std::optional<std::int64_t> active;  // MoE: parameters activated per token
  std::string source;                  // URL
  std::string note;                    // what the figure includes, if it needs saying
};

struct ModelInfo {
  std::string name;
  std::vector<std::string> aliases;
  std::string family;
  std::string release_date;   // YYYY-MM-DD
  std::string default_dtype;  // dtype of the released weights: fp32, fp16, bf16, fp8
  std::int64_t max_context = 0;
  std::string config_source;  // URL of the config the architecture was taken from
  ModelArch arch;
  PublishedParams published;
  std::string file;  // the data file it came from (for messages)

  ParamBreakdown params() const { return count_params(arch); }
};

class ModelCatalog {
 public:
  // Every data/models/*.toml of the source; throws DataError on the first invalid file.
  static ModelCatalog load(const data::DataSource& source);
  // Same, from files already read (tests).
  static ModelCatalog from_files(const std::vector<data::DataFile>& files);

  // In file-name order.
  const std::vector<ModelInfo>& all() const { return models_; }
  const ModelInfo* find(std::string_view name) const;
  // Throws NotFoundError("model", name, closest names).
  const ModelInfo& get(std::string_view name) const;
  std::vector<std::string> suggest(std::string_view name) const { return index_.suggest(name); }
  // Distinct families, in catalog order.
  std::vector<std::string> families() const;

 private:
  std::vector<ModelInfo> models_;
  NameIndex index_;
};

// Parses and validates one model file (exposed for tests).
ModelInfo parse_model_file(const data::DataFile& file);

}  // namespace gpuscout::workloads
