#pragma once
// Typed errors thrown below main(); apps/gpuscout/main.cpp is the one place that turns them into
// messages and exit codes (docs/exit-codes in README: 0 ok, 1 something failed, 2 usage).
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuscout {

enum class ExitCode : int { ok = 0, failure = 1, usage = 2 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::failure)
      : std::runtime_error(message), code_(code) {}
  ExitCode exit_code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// A bad flag, argument or request: the user can fix it by changing the command line.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, ExitCode::usage) {}
};

// A name (GPU, model, benchmark) that matches nothing; carries the closest known names.
class NotFoundError : public UsageError {
 public:
  NotFoundError(const std::string& what, const std::string& name, std::vector<std::string> suggestions);
  const std::vector<std::string>& suggestions() const noexcept { return suggestions_; }
  // What was looked up ("GPU", "model", ...), as the message names it.
  const std::string& kind() const noexcept { return kind_; }

 private:
  std::vector<std::string> suggestions_;
  std::string kind_;
};

// A data file that does not say what it must: names the file, the entry, the field and what was expected.
class DataError : public Error {
 public:
  DataError(std::string file, std::string entry, std::string field, const std::string& problem);
  const std::string& file() const noexcept { return file_; }
  const std::string& entry() const noexcept { return entry_; }
  const std::string& field() const noexcept { return field_; }

 private:
  std::string file_, entry_, field_;
};

// Reading or writing a file failed.
class IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace gpuscout
