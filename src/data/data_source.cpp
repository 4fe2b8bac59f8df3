#include "gpuscout/data/data_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "gpuscout/data/embedded.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/file.hpp"

namespace gpuscout::data {
namespace fs = std::filesystem;

DataSource DataSource::embedded() {
  return DataSource{};
}

DataSource DataSource::directory(fs::path root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw UsageError(
        fmt::format("data directory '{}' does not exist or is not a directory "
                    "(expected a folder laid out like data/: gpus/*.toml, models/*.toml)",
                    root.string()));
  }
  DataSource source;
  source.root_ = std::move(root);
  return source;
}

DataSource DataSource::resolve(const std::optional<fs::path>& cli_dir) {
  if (cli_dir) return directory(*cli_dir);
  if (const char* env = std::getenv("GPUSCOUT_DATA"); env != nullptr && *env != '\0') {
    try {
      return directory(env);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("$GPUSCOUT_DATA: {}", e.what()));
    }
  }
  return embedded();
}

std::vector<DataFile> DataSource::list(std::string_view subdir, std::string_view extension) const {
  std::vector<DataFile> files;
  if (root_ && fs::is_directory(*root_ / subdir)) {
    for (const auto& entry : fs::directory_iterator(*root_ / subdir)) {
      const std::string file_name = entry.path().filename().string();
      if (!entry.is_regular_file() || !file_name.ends_with(extension)) continue;
      files.push_back({fmt::format("{}/{}", subdir, file_name), entry.path().string(), read_file(entry.path())});
    }
  } else {
    const std::string prefix = fmt::format("{}/", subdir);
    for (const auto& file : embedded_files()) {
      if (!file.path.starts_with(prefix) || !file.path.ends_with(extension)) continue;
      // Only direct children, like the directory case.
      if (file.path.substr(prefix.size()).find('/') != std::string_view::npos) continue;
      files.push_back({std::string(file.path), fmt::format("<embedded>/{}", file.path), std::string(file.content)});
    }
  }
  std::sort(files.begin(), files.end(), [](const DataFile& a, const DataFile& b) { return a.name < b.name; });
  return files;
}

std::optional<DataFile> DataSource::read(std::string_view relative) const {
  if (root_) {
    const fs::path path = *root_ / relative;
    if (fs::is_regular_file(path)) return DataFile{std::string(relative), path.string(), read_file(path)};
  }
  for (const auto& file : embedded_files()) {
    if (file.path == relative) {
      return DataFile{std::string(relative), fmt::format("<embedded>/{}", file.path), std::string(file.content)};
    }
  }
  return std::nullopt;
}

std::string DataSource::describe() const {
  return root_ ? fmt::format("data directory {}", root_->string()) : std::string("embedded data");
}

}  // namespace gpuscout::data
