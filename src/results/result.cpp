#include "gpuscout/results/result.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace gpuscout::results {

std::string schema_version_string() {
  return fmt::format("{}.{}", kSchemaMajor, kSchemaMinor);
}

std::string to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::passed:
      return "passed";
    case Outcome::failed:
      return "failed";
    case Outcome::incorrect:
      return "incorrect";
    case Outcome::not_supported:
      return "not_supported";
    case Outcome::skipped:
      return "skipped";
    case Outcome::timeout:
      return "timeout";
  }
  return "failed";
}

Outcome outcome_from_string(const std::string& text) {
  for (Outcome o : {Outcome::passed, Outcome::failed, Outcome::incorrect, Outcome::not_supported, Outcome::skipped,
                    Outcome::timeout}) {
    if (to_string(o) == text) return o;
  }
  throw std::invalid_argument(fmt::format(
      "'{}' is not an outcome; expected passed, failed, incorrect, not_supported, skipped or timeout", text));
}

bool is_failure(Outcome outcome) {
  return outcome == Outcome::failed || outcome == Outcome::incorrect || outcome == Outcome::timeout;
}

const Metric* Record::find_metric(const std::string& metric_name) const {
  for (const auto& metric : metrics) {
    if (metric.name == metric_name) return &metric;
  }
  return nullptr;
}

bool ResultSet::any_failure() const {
  if (!complete) return true;
  for (const auto& record : records) {
    if (is_failure(record.outcome)) return true;
  }
  return false;
}

}  // namespace gpuscout::results
