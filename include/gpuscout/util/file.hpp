#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace gpuscout {

// Whole file as a string; throws IoError naming the path.
std::string read_file(const std::filesystem::path& path);

// Writes to a temporary file beside `path`, flushes it to disk, then renames it over `path`, so a
// reader never sees half a file and a crash leaves the old file (or none). Throws IoError.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace gpuscout
