#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/results/result.hpp"

namespace gpuscout::results {

nlohmann::ordered_json to_json(const ResultSet& result);
nlohmann::ordered_json to_json(const Record& record);

// Parses a result document. Throws DataError (naming `origin` and the field) when the document is
// malformed, and when its schema major version is not one this build reads.
ResultSet result_from_json(const nlohmann::ordered_json& document, const std::string& origin);

// Throws DataError naming the file: unreadable, invalid JSON, another tool's output (why, as
// foreign_document_reason says) or a malformed gpuscout result.
ResultSet read_result_file(const std::filesystem::path& path);

// Why a parsed document is another tool's output rather than a gpuscout result file: not an object,
// or an object with none of schema_version, kind, provenance, records. nullopt when it claims to be
// gpuscout's (result_from_json then judges it, strictly).
std::optional<std::string> foreign_document_reason(const nlohmann::ordered_json& document);
// read_result_file, except that valid JSON of another tool is no error: nullopt, with `skip_reason`
// set. Unreadable files, invalid JSON and malformed gpuscout files still throw DataError.
std::optional<ResultSet> read_result_file_or_skip(const std::filesystem::path& path, std::string& skip_reason);
// Many files at once, as `report` and `validate --results` take them (a shell glob over bench/results
// catches other tools' JSON too): the gpuscout results in the order given and the skipped files with
// why. Any other problem throws, as read_result_file does.
struct ResultFiles {
  std::vector<std::pair<std::string, ResultSet>> read;       // path, result
  std::vector<std::pair<std::string, std::string>> skipped;  // path, why
};
ResultFiles read_result_files(const std::vector<std::string>& paths);
// Atomic: a temp file renamed into place.
void write_result_file(const std::filesystem::path& path, const ResultSet& result);

// Fills tool version, commit, time, host name, OS and CPU model of this machine.
Provenance local_provenance(int argc, const char* const* argv);

}  // namespace gpuscout::results
