#pragma once
// Run history: every result (bench, advise, imported files) in one SQLite database, so past runs can
// be listed, shown, exported and reported on (docs/history.md). The full result JSON is stored as
// written, beside indexed columns (time, kind, host, GPU names, tags, commit, counts) for fast listing.
//
// The schema is versioned with PRAGMA user_version and brought up to date by ordered migrations, each
// in its own transaction. A database written by a newer gpuscout (higher version) or a file that is
// not an SQLite database is rejected with an error naming the file, and never written to. Writers in
// several threads or processes are safe: WAL journal, a busy timeout and one transaction per insert.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/results/result.hpp"

struct sqlite3;

namespace gpuscout::history {

// The schema version this build writes; a database with a higher one is refused.
int latest_schema_version();

// The default database: $GPUSCOUT_HISTORY_DB, else $XDG_DATA_HOME/gpuscout/history.db, else
// ~/.local/share/gpuscout/history.db. Empty when none can be formed (no HOME).
std::filesystem::path default_db_path();

// One stored run, without its records (what `history list` shows).
struct RunSummary {
  std::int64_t id = 0;
  std::string created_utc;  // provenance.created_utc of the run
  std::string added_utc;    // when it entered the history
  std::string kind;         // bench, predict, advise ...
  std::string host;
  std::vector<std::string> gpu_names;  // distinct, in order of first appearance
  std::map<std::string, std::string> tags;
  std::string git_commit;
  std::string tool_version;
  std::int64_t records = 0;
  std::int64_t failures = 0;  // records whose outcome makes the exit code non-zero
  bool complete = true;
  std::string source;  // the imported file, or the command that wrote the run
};

// Filters of `history list` and of history queries; empty fields match everything.
struct Query {
  std::string host;                         // case-insensitive substring of the host name
  std::string gpu;                          // case-insensitive substring of a GPU name or of its spec-database entry
  std::string kind;                         // exact
  std::map<std::string, std::string> tags;  // every key:value must be present
  std::optional<std::int64_t> id;           // exactly this run
  std::int64_t limit = 0;                   // newest first; 0 = no limit
};

// Parses a query as `report --from-history` takes it: comma-separated terms, each `last` (the newest
// run), `last:N`, a run id, `gpu:NAME`, `host:NAME`, `kind:KIND` or `tag:KEY:VALUE` (also KEY=VALUE).
// Throws UsageError on a term it does not know.
Query parse_query(const std::string& text);

struct AddResult {
  std::int64_t id = 0;
  bool added = true;  // false when the same document was already stored (id is that run)
};

class HistoryDb {
 public:
  // Opens (creating when `create` and the file is missing) and migrates to the latest schema.
  // Throws DataError naming the file when it is not a gpuscout history database (not SQLite, corrupt)
  // or has a newer schema version; IoError when it cannot be opened or created.
  static HistoryDb open(const std::filesystem::path& path, bool create = true);

  HistoryDb(HistoryDb&& other) noexcept;
  HistoryDb& operator=(HistoryDb&& other) noexcept;
  HistoryDb(const HistoryDb&) = delete;
  HistoryDb& operator=(const HistoryDb&) = delete;
  ~HistoryDb();

  const std::filesystem::path& path() const { return path_; }
  int schema_version() const;

  // Stores a result document (validated with result_from_json; `origin` names it in errors).
  // A document already stored (same bytes) is not stored twice.
  AddResult add(const nlohmann::ordered_json& document, const std::string& origin, const std::string& source);
  AddResult add(const results::ResultSet& result, const std::string& source);

  // Newest first (created_utc, then id).
  std::vector<RunSummary> list(const Query& query) const;
  std::optional<RunSummary> find(std::int64_t id) const;
  // The stored result document; throws NotFoundError (exit 2) for an unknown id.
  nlohmann::ordered_json document(std::int64_t id) const;
  results::ResultSet result(std::int64_t id) const;
  std::int64_t count() const;

 private:
  HistoryDb(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  // One attempt of open(); throws a busy error when another process holds the database.
  static HistoryDb open_once(const std::filesystem::path& path, bool create);
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

}  // namespace gpuscout::history
