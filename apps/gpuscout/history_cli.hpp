#pragma once
// The run history as the CLI uses it (docs/history.md): where the database is, the hook `bench` (and
// `advise`) call after writing a result, and the runs `report --from-history QUERY` selects.
#include <filesystem>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/report/html_report.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cli {

// --db PATH, else $GPUSCOUT_HISTORY_DB, else the user's data directory (history::default_db_path).
std::filesystem::path history_db_path(const AppContext& ctx);

// Appends a finished run to the history unless --no-history. Never throws: a failure is a warning on
// stderr, not a failed run. `source` says what wrote it ("gpuscout bench", the result file ...).
void append_to_history(AppContext& ctx, const results::ResultSet& result, const std::string& source);

// The runs a history query selects (history::parse_query), oldest first, as report inputs.
// Throws NotFoundError (exit 2) when the query matches nothing.
std::vector<report::ReportInput> report_inputs_from_history(AppContext& ctx, const std::string& query);

}  // namespace gpuscout::cli
