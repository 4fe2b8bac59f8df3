#include "gpuscout/util/error.hpp"

#include <fmt/format.h>

namespace gpuscout {
namespace {

std::string not_found_message(const std::string& what, const std::string& name,
                              const std::vector<std::string>& suggestions) {
  std::string message = fmt::format("unknown {} '{}'", what, name);
  if (!suggestions.empty()) {
    message += fmt::format("; did you mean: {}?", fmt::join(suggestions, ", "));
  }
  return message;
}

std::string data_error_message(const std::string& file, const std::string& entry, const std::string& field,
                               const std::string& problem) {
  std::string where = file;
  if (!entry.empty()) where += fmt::format(": entry '{}'", entry);
  if (!field.empty()) where += fmt::format(": field '{}'", field);
  return fmt::format("{}: {}", where, problem);
}

}  // namespace

NotFoundError::NotFoundError(const std::string& what, const std::string& name, std::vector<std::string> suggestions)
    : UsageError(not_found_message(what, name, suggestions)), suggestions_(std::move(suggestions)), kind_(what) {}

DataError::DataError(std::string file, std::string entry, std::string field, const std::string& problem)
    : Error(data_error_message(file, entry, field, problem)),
      file_(std::move(file)),
      entry_(std::move(entry)),
      field_(std::move(field)) {}

}  // namespace gpuscout
