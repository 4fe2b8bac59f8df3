#pragma once
// The GPU spec database: every data/gpus/*.toml file, validated, indexed by name and alias.
// Schema and conventions: docs/spec-database.md.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/util/names.hpp"

namespace gpuscout::specs {

// Parses and validates one GPU file; throws DataError naming the file, the entry and the field.
GpuSpec parse_gpu_spec(const data::DataFile& file);

class SpecDb {
 public:
  // Loads gpus/*.toml from `source`. Throws DataError for a bad file, including a name or alias
  // that two files claim (the message names both files).
  static SpecDb load(const data::DataSource& source);
  // Builds a database from specs already parsed (tests); same duplicate check as load().
  static SpecDb from_specs(std::vector<GpuSpec> specs);

  const std::vector<GpuSpec>& all() const { return specs_; }
  // By name or alias, case- and punctuation-insensitive; nullptr when unknown.
  const GpuSpec* find(std::string_view name) const;
  // Like find(), but throws NotFoundError("GPU", name, closest names) when unknown.
  const GpuSpec& get(std::string_view name) const;
  std::vector<std::string> suggest(std::string_view name) const { return index_.suggest(name); }

  // Maps a local device to its entry: the PCI device id first, then the driver's name or an alias
  // it contains, then the memory size (GiB as the driver reports it) to pick between variants
  // such as A100 40GB and 80GB. nullptr when nothing fits.
  const GpuSpec* match_device(std::string_view driver_name, std::optional<std::uint32_t> pci_device_id,
                              std::optional<std::uint64_t> memory_bytes) const;

 private:
  std::vector<GpuSpec> specs_;
  NameIndex index_;
};

}  // namespace gpuscout::specs
