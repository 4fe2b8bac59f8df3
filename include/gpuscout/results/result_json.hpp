#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "gpuscout/results/result.hpp"

namespace gpuscout::results {

nlohmann::ordered_json to_json(const ResultSet& result);
nlohmann::ordered_json to_json(const Record& record);

// Parses a result document. Throws DataError (naming `origin` and the field) when the document is
// malformed, and when its schema major version is not one this build reads.
ResultSet result_from_json(const nlohmann::ordered_json& document, const std::string& origin);

ResultSet read_result_file(const std::filesystem::path& path);
// Atomic: a temp file renamed into place.
void write_result_file(const std::filesystem::path& path, const ResultSet& result);

// Fills tool version, commit, time, host name, OS and CPU model of this machine.
Provenance local_provenance(int argc, const char* const* argv);

}  // namespace gpuscout::results
