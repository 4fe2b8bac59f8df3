#pragma once
#include <filesystem>
#include <optional>
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

// Why a parsed document is another tool's output rather than a gpuscout result file: not an object,
// or an object with none of schema_version, kind, provenance, records. nullopt when it claims to be
// gpuscout's (result_from_json then judges it, strictly).
std::optional<std::string> foreign_document_reason(const nlohmann::ordered_json& document);
// read_result_file, except that valid JSON of another tool is no error: nullopt, with `skip_reason`
// set. Unreadable files, invalid JSON and malformed gpuscout files still throw DataError.
std::optional<ResultSet> read_result_file_or_skip(const std::filesystem::path& path, std::string& skip_reason);
// Atomic: a temp file renamed into place.
void write_result_file(const std::filesystem::path& path, const ResultSet& result);

// Fills tool version, commit, time, host name, OS and CPU model of this machine.
Provenance local_provenance(int argc, const char* const* argv);

}  // namespace gpuscout::results
