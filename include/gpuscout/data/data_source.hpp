#pragma once
// Where the spec database, model catalog and other data files come from: the copy embedded at
// build time, or a directory laid out like data/ (gpus/, models/, ...) given by --specs DIR or
// $GPUSCOUT_DATA. A subfolder the directory lacks falls back to the embedded one.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuscout::data {

struct DataFile {
  std::string name;    // path relative to the data root: "gpus/h200-sxm-141gb.toml"
  std::string origin;  // what error messages name: a real path, or "<embedded>/gpus/..."
  std::string content;
};

class DataSource {
 public:
  static DataSource embedded();
  static DataSource directory(std::filesystem::path root);
  // --specs DIR first, then $GPUSCOUT_DATA, then the embedded copy.
  static DataSource resolve(const std::optional<std::filesystem::path>& cli_dir);

  // Files directly under `subdir` whose names end in `extension`, sorted by name.
  std::vector<DataFile> list(std::string_view subdir, std::string_view extension) const;
  // One file by its relative path, or nullopt.
  std::optional<DataFile> read(std::string_view relative) const;

  // "embedded data" or "data directory /path", for provenance and diagnostics.
  std::string describe() const;
  const std::optional<std::filesystem::path>& root() const { return root_; }

 private:
  std::optional<std::filesystem::path> root_;
};

}  // namespace gpuscout::data
