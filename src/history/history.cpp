#include "gpuscout/history/history.hpp"

#include <fmt/format.h>

#include <sqlite3.h>
#include <chrono>
#include <thread>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "gpuscout/results/result_json.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::history {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// 'gpsc': marks the file as a gpuscout history (PRAGMA application_id).
constexpr int kApplicationId = 0x67707363;
constexpr int kBusyTimeoutMs = 15000;

// Ordered migrations: kMigrations[i] brings a database from version i to version i + 1. Append only;
// never edit one that has shipped.
constexpr const char* kMigrations[] = {
    // 1: runs with indexed columns, their GPUs and tags.
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_utc TEXT NOT NULL,
  added_utc TEXT NOT NULL,
  kind TEXT NOT NULL,
  host TEXT NOT NULL,
  gpu_names TEXT NOT NULL,
  tags TEXT NOT NULL,
  git_commit TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  record_count INTEGER NOT NULL,
  failures INTEGER NOT NULL,
  complete INTEGER NOT NULL,
  source TEXT NOT NULL,
  result_json TEXT NOT NULL
);
CREATE INDEX runs_created ON runs(created_utc, id);
CREATE INDEX runs_host ON runs(host);
CREATE INDEX runs_kind ON runs(kind);
CREATE TABLE run_gpus (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  spec_name TEXT NOT NULL
);
CREATE INDEX run_gpus_run ON run_gpus(run_id);
CREATE INDEX run_gpus_name ON run_gpus(name);
CREATE TABLE run_tags (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
CREATE INDEX run_tags_kv ON run_tags(key, value);
)sql",
    // 2: a digest of the stored document, so importing the same file twice stores it once.
    R"sql(
ALTER TABLE runs ADD COLUMN digest TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_digest ON runs(digest);
)sql",
};
constexpr int kLatest = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

std::string now_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return stamp;
}

std::string fnv1a_hex(std::string_view text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

// SQLite answers "database is locked" at once, without waiting in the busy handler, in some
// situations (a read transaction that would have to wait for a writer to finish a journal-mode
// change, for one). open() retries those; everything else is an IoError like it.
class BusyError : public IoError {
 public:
  using IoError::IoError;
};

[[noreturn]] void fail(sqlite3* db, const fs::path& path, const std::string& what) {
  const int code = db != nullptr ? sqlite3_errcode(db) : SQLITE_ERROR;
  const std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
    throw BusyError(fmt::format("history database '{}': {}: {}", path.string(), what, message));
  }
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
    throw DataError(path.string(), "", "",
                    fmt::format("not a usable gpuscout history database ({}); the file was left as it is: "
                                "move it away or choose another one with --db",
                                message));
  }
  throw IoError(fmt::format("history database '{}': {}: {}", path.string(), what, message));
}

class Statement {
 public:
  Statement(sqlite3* db, const fs::path& path, const std::string& sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) fail(db_, path_, "prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, const std::string& text) {
    if (sqlite3_bind_text(stmt_, index, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT) != SQLITE_OK) {
      fail(db_, path_, "bind");
    }
    return *this;
  }
  Statement& bind(int index, std::int64_t value) {
    if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) fail(db_, path_, "bind");
    return *this;
  }
  // True while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, path_, "query");
  }
  std::string text(int column) const {
    const auto* p = sqlite3_column_text(stmt_, column);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }
  std::int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }

 private:
  sqlite3* db_;
  const fs::path& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const fs::path& path, const std::string& sql, const char* what) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    sqlite3_free(message);
    fail(db, path, what);
  }
}

std::int64_t pragma_int(sqlite3* db, const fs::path& path, const char* name) {
  Statement s(db, path, fmt::format("PRAGMA {}", name));
  return s.step() ? s.integer(0) : 0;
}

// Rolls back unless committed, so an exception never leaves a transaction open.
class Transaction {
 public:
  Transaction(sqlite3* db, const fs::path& path) : db_(db), path_(path) {
    exec(db_, path_, "BEGIN IMMEDIATE", "begin transaction");
  }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, path_, "COMMIT", "commit");
    done_ = true;
  }

 private:
  sqlite3* db_;
  const fs::path& path_;
  bool done_ = false;
};

// A file that exists and is not empty must start with the SQLite header; checked before SQLite
// touches it, so nothing is ever written to a file that is not a database.
void check_header(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  if (fs::is_directory(path, ec)) throw IoError(fmt::format("history database '{}' is a directory", path.string()));
  const auto size = fs::file_size(path, ec);
  if (ec || size == 0) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot read history database '{}'", path.string()));
  char header[16] = {};
  in.read(header, sizeof(header));
  if (in.gcount() != sizeof(header) ||
      std::string_view(header, sizeof(header)) != std::string_view("SQLite format 3\0", 16)) {
    throw DataError(path.string(), "", "",
                    "not an SQLite database (corrupt, or another kind of file); the file was left as it is: "
                    "move it away or choose another one with --db");
  }
}

std::vector<std::string> distinct_gpu_names(const results::ResultSet& result) {
  std::vector<std::string> names;
  for (const auto& g : result.gpus) {
    const std::string& name = g.name.empty() ? g.spec_name : g.name;
    if (name.empty()) continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

RunSummary summary_from_row(const Statement& s) {
  RunSummary r;
  r.id = s.integer(0);
  r.created_utc = s.text(1);
  r.added_utc = s.text(2);
  r.kind = s.text(3);
  r.host = s.text(4);
  const auto gpus = ojson::parse(s.text(5), nullptr, false);
  if (gpus.is_array()) {
    for (const auto& g : gpus) {
      if (g.is_string()) r.gpu_names.push_back(g.get<std::string>());
    }
  }
  const auto tags = ojson::parse(s.text(6), nullptr, false);
  if (tags.is_object()) {
    for (const auto& [k, v] : tags.items()) {
      if (v.is_string()) r.tags[k] = v.get<std::string>();
    }
  }
  r.git_commit = s.text(7);
  r.tool_version = s.text(8);
  r.records = s.integer(9);
  r.failures = s.integer(10);
  r.complete = s.integer(11) != 0;
  r.source = s.text(12);
  return r;
}

constexpr const char* kSummaryColumns =
    "r.id, r.created_utc, r.added_utc, r.kind, r.host, r.gpu_names, r.tags, r.git_commit, r.tool_version, "
    "r.record_count, r.failures, r.complete, r.source";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int latest_schema_version() {
  return kLatest;
}

fs::path default_db_path() {
  if (const char* env = std::getenv("GPUSCOUT_HISTORY_DB"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg != '\0' && fs::path(xdg).is_absolute()) {
    return fs::path(xdg) / "gpuscout" / "history.db";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".local" / "share" / "gpuscout" / "history.db";
  }
  return {};
}

Query parse_query(const std::string& text) {
  Query q;
  std::size_t start = 0;
  bool any = false;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    std::string term = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    while (!term.empty() && term.front() == ' ') term.erase(term.begin());
    while (!term.empty() && term.back() == ' ') term.pop_back();
    if (term.empty()) continue;
    any = true;
    const auto colon = term.find(':');
    const std::string head = lower(term.substr(0, colon));
    const std::string rest = colon == std::string::npos ? "" : term.substr(colon + 1);
    auto number = [&](const std::string& digits, const char* what) {
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) {
        throw UsageError(fmt::format("history query '{}': {} must be a positive whole number", text, what));
      }
      return std::stoll(digits);
    };
    if (colon == std::string::npos && head == "last") {
      q.limit = 1;
    } else if (colon == std::string::npos && term.find_first_not_of("0123456789") == std::string::npos) {
      q.id = number(term, "a run id");
    } else if (head == "last") {
      q.limit = number(rest, "last:N");
    } else if (head == "id") {
      q.id = number(rest, "id:N");
    } else if (head == "gpu" && !rest.empty()) {
      q.gpu = rest;
    } else if (head == "host" && !rest.empty()) {
      q.host = rest;
    } else if (head == "kind" && !rest.empty()) {
      q.kind = rest;
    } else if (head == "tag" && !rest.empty()) {
      auto sep = rest.find(':');
      if (sep == std::string::npos) sep = rest.find('=');
      if (sep == std::string::npos || sep == 0) {
        throw UsageError(fmt::format("history query '{}': a tag term is tag:KEY:VALUE", text));
      }
      q.tags[rest.substr(0, sep)] = rest.substr(sep + 1);
    } else {
      throw UsageError(fmt::format(
          "history query '{}': unknown term '{}' (use last, last:N, a run id, gpu:NAME, host:NAME, kind:KIND or "
          "tag:KEY:VALUE, joined by commas)",
          text, term));
    }
  }
  if (!any) throw UsageError("history query is empty (use last, a run id, gpu:NAME ...)");
  return q;
}

HistoryDb HistoryDb::open(const fs::path& path, bool create) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  while (true) {
    try {
      return open_once(path, create);
    } catch (const BusyError&) {
      // Another process is creating or migrating the same database: wait for it, as the busy
      // timeout would, then look again.
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

HistoryDb HistoryDb::open_once(const fs::path& path, bool create) {
  if (path.empty()) throw UsageError("no history database: set --db PATH (or HOME, XDG_DATA_HOME)");
  check_header(path);
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  if (!existed) {
    if (!create) throw IoError(fmt::format("history database '{}' does not exist", path.string()));
    if (path.has_parent_path()) {
      fs::create_directories(path.parent_path(), ec);
      if (ec) {
        throw IoError(
            fmt::format("cannot create the directory of history database '{}': {}", path.string(), ec.message()));
      }
    }
  }
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &raw, flags, nullptr) != SQLITE_OK) {
    const std::string message = raw != nullptr ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    throw IoError(fmt::format("cannot open history database '{}': {}", path.string(), message));
  }
  HistoryDb db(raw, path);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 0);

  // Read-only checks first: nothing below writes until the file is known to be ours and not newer.
  // They read one snapshot: another process creating the same database may commit its first
  // migration between two separate reads, and "tables but no version" would then be a false alarm.
  exec(raw, path, "BEGIN", "begin read");
  const std::int64_t version = pragma_int(raw, path, "user_version");
  if (version > kLatest) {
    throw DataError(path.string(), "", "",
                    fmt::format("history schema version {} is newer than this gpuscout reads (up to {}): upgrade "
                                "gpuscout, or choose another database with --db; the file was left as it is",
                                version, kLatest));
  }
  if (version == 0) {
    Statement tables(raw, path, "SELECT count(*) FROM sqlite_master");
    if (tables.step() && tables.integer(0) > 0) {
      throw DataError(path.string(), "", "",
                      "an SQLite database that is not a gpuscout history (it has tables but no history schema "
                      "version); the file was left as it is");
    }
  } else if (pragma_int(raw, path, "application_id") != kApplicationId) {
    throw DataError(path.string(), "", "",
                    "an SQLite database that is not a gpuscout history; the file was left as it is");
  }
  exec(raw, path, "COMMIT", "end read");

  {
    // WAL lets readers go on while one process writes; changing the mode needs a moment alone.
    Statement wal(raw, path, "PRAGMA journal_mode=WAL");
    while (wal.step()) {
    }
  }
  exec(raw, path, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL", "configure");

  for (int target = static_cast<int>(version) + 1; target <= kLatest; ++target) {
    Transaction tx(raw, path);
    // Another process may have migrated since the version was read.
    const std::int64_t now = pragma_int(raw, path, "user_version");
    if (now >= target) continue;
    exec(raw, path, kMigrations[target - 1], "migrate");
    exec(raw, path, fmt::format("PRAGMA user_version = {}; PRAGMA application_id = {}", target, kApplicationId),
         "migrate");
    tx.commit();
  }
  return db;
}

HistoryDb::HistoryDb(HistoryDb&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

HistoryDb& HistoryDb::operator=(HistoryDb&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

HistoryDb::~HistoryDb() {
  sqlite3_close(db_);
}

int HistoryDb::schema_version() const {
  return static_cast<int>(pragma_int(db_, path_, "user_version"));
}

AddResult HistoryDb::add(const ojson& document, const std::string& origin, const std::string& source) {
  const results::ResultSet result = results::result_from_json(document, origin);
  const std::string text = document.dump();
  const std::string digest = fnv1a_hex(text);

  std::int64_t failures = 0;
  for (const auto& r : result.records) failures += results::is_failure(r.outcome) ? 1 : 0;
  ojson gpu_names = distinct_gpu_names(result);
  ojson tags = ojson::object();
  for (const auto& [k, v] : result.provenance.tags) tags[k] = v;
  const std::string added = now_utc();

  Transaction tx(db_, path_);
  {
    Statement same(db_, path_, "SELECT id, result_json FROM runs WHERE digest = ?1");
    same.bind(1, digest);
    while (same.step()) {
      if (same.text(1) == text) return {same.integer(0), false};  // the transaction rolls back: nothing written
    }
  }
  Statement insert(db_, path_,
                   "INSERT INTO runs (created_utc, added_utc, kind, host, gpu_names, tags, git_commit, tool_version, "
                   "record_count, failures, complete, source, result_json, digest) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  insert.bind(1, result.provenance.created_utc.empty() ? added : result.provenance.created_utc)
      .bind(2, added)
      .bind(3, result.kind)
      .bind(4, result.provenance.hostname)
      .bind(5, gpu_names.dump())
      .bind(6, tags.dump())
      .bind(7, result.provenance.git_commit)
      .bind(8, result.provenance.tool_version)
      .bind(9, static_cast<std::int64_t>(result.records.size()))
      .bind(10, failures)
      .bind(11, static_cast<std::int64_t>(result.complete ? 1 : 0))
      .bind(12, source)
      .bind(13, text)
      .bind(14, digest);
  insert.step();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  for (const auto& g : result.gpus) {
    Statement gpu(db_, path_, "INSERT INTO run_gpus (run_id, name, spec_name) VALUES (?1, ?2, ?3)");
    gpu.bind(1, id).bind(2, g.name).bind(3, g.spec_name);
    gpu.step();
  }
  for (const auto& [k, v] : result.provenance.tags) {
    Statement tag(db_, path_, "INSERT OR REPLACE INTO run_tags (run_id, key, value) VALUES (?1, ?2, ?3)");
    tag.bind(1, id).bind(2, k).bind(3, v);
    tag.step();
  }
  tx.commit();
  return {id, true};
}

AddResult HistoryDb::add(const results::ResultSet& result, const std::string& source) {
  return add(results::to_json(result), source, source);
}

std::vector<RunSummary> HistoryDb::list(const Query& query) const {
  std::string sql = fmt::format("SELECT {} FROM runs r WHERE 1 = 1", kSummaryColumns);
  std::vector<std::pair<int, std::string>> texts;
  int n = 0;
  auto param = [&](const std::string& value) {
    texts.emplace_back(++n, value);
    return fmt::format("?{}", n);
  };
  if (query.id) sql += fmt::format(" AND r.id = {}", *query.id);
  if (!query.host.empty()) sql += fmt::format(" AND instr(lower(r.host), lower({})) > 0", param(query.host));
  if (!query.kind.empty()) sql += fmt::format(" AND r.kind = {}", param(query.kind));
  if (!query.gpu.empty()) {
    const std::string p = param(query.gpu);
    sql += fmt::format(
        " AND EXISTS (SELECT 1 FROM run_gpus g WHERE g.run_id = r.id AND (instr(lower(g.name), lower({0})) > 0 OR "
        "instr(lower(g.spec_name), lower({0})) > 0))",
        p);
  }
  for (const auto& [k, v] : query.tags) {
    const std::string pk = param(k);
    const std::string pv = param(v);
    sql += fmt::format(" AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.key = {} AND t.value = {})",
                       pk, pv);
  }
  sql += " ORDER BY r.created_utc DESC, r.id DESC";
  if (query.limit > 0) sql += fmt::format(" LIMIT {}", query.limit);
  Statement s(db_, path_, sql);
  for (const auto& [index, value] : texts) s.bind(index, value);
  std::vector<RunSummary> runs;
  while (s.step()) runs.push_back(summary_from_row(s));
  return runs;
}

std::optional<RunSummary> HistoryDb::find(std::int64_t id) const {
  Query q;
  q.id = id;
  auto runs = list(q);
  if (runs.empty()) return std::nullopt;
  return runs.front();
}

ojson HistoryDb::document(std::int64_t id) const {
  Statement s(db_, path_, "SELECT result_json FROM runs WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) {
    throw NotFoundError(fmt::format("run id in history {}:", path_.string()), std::to_string(id), {});
  }
  return ojson::parse(s.text(0));
}

results::ResultSet HistoryDb::result(std::int64_t id) const {
  return results::result_from_json(document(id), fmt::format("{} run {}", path_.string(), id));
}

std::int64_t HistoryDb::count() const {
  Statement s(db_, path_, "SELECT count(*) FROM runs");
  return s.step() ? s.integer(0) : 0;
}

}  // namespace gpuscout::history
