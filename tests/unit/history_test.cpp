// Run history (src/history): migrations, reopening, refusal of newer or corrupt files (left
// byte-identical), concurrent writers in threads and processes, query filters.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "gpuscout/history/history.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/file.hpp"

namespace fs = std::filesystem;
using gpuscout::history::HistoryDb;
using gpuscout::history::Query;

namespace {

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt_name(info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = dir_ / "history.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string fmt_name(const std::string& test) {
    return "gpuscout-history-" + test + "-" + std::to_string(::getpid());
  }

  fs::path dir_;
  fs::path db_path_;
};

gpuscout::results::ResultSet make_result(const std::string& host, const std::string& gpu, const std::string& kind,
                                         const std::map<std::string, std::string>& tags, const std::string& created) {
  gpuscout::results::ResultSet r;
  r.kind = kind;
  r.provenance.hostname = host;
  r.provenance.created_utc = created;
  r.provenance.git_commit = "abc123";
  r.provenance.tool_version = "0.1.0";
  r.provenance.tags = tags;
  gpuscout::results::GpuInfo g;
  g.index = 0;
  g.name = gpu;
  g.spec_name = gpu == "NVIDIA H200" ? "H200-SXM-141GB" : "";
  r.gpus.push_back(g);
  gpuscout::results::Record rec;
  rec.key = "memory/copy/1GiB";
  rec.benchmark = "memory";
  rec.gpus = {0};
  rec.metrics.push_back({"bandwidth", 4000.5, "GB/s", "median", 10, std::nullopt, ""});
  r.records.push_back(rec);
  gpuscout::results::Record bad;
  bad.key = "gemm/fp8/m1";
  bad.benchmark = "gemm";
  bad.outcome = gpuscout::results::Outcome::failed;
  bad.reason = "test";
  r.records.push_back(bad);
  return r;
}

std::string bytes_of(const fs::path& p) {
  return gpuscout::read_file(p);
}

void make_sqlite(const fs::path& p, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

}  // namespace

TEST_F(HistoryTest, MigratesAnEmptyDatabaseAndReopens) {
  {
    auto db = HistoryDb::open(db_path_);
    EXPECT_EQ(db.schema_version(), gpuscout::history::latest_schema_version());
    EXPECT_GE(gpuscout::history::latest_schema_version(), 2);
    EXPECT_EQ(db.count(), 0);
    db.add(make_result("h1", "NVIDIA H200", "bench", {}, "2026-11-30T01:00:00Z"), "test");
  }
  auto again = HistoryDb::open(db_path_, false);
  EXPECT_EQ(again.schema_version(), gpuscout::history::latest_schema_version());
  EXPECT_EQ(again.count(), 1);
}

TEST_F(HistoryTest, ZeroByteFileIsMigrated) {
  { std::ofstream(db_path_).flush(); }
  auto db = HistoryDb::open(db_path_);
  EXPECT_EQ(db.schema_version(), gpuscout::history::latest_schema_version());
}

TEST_F(HistoryTest, MissingFileWithoutCreateFails) {
  EXPECT_THROW(HistoryDb::open(db_path_, false), gpuscout::IoError);
  EXPECT_FALSE(fs::exists(db_path_));
}

TEST_F(HistoryTest, CreatesParentDirectories) {
  const fs::path nested = dir_ / "a" / "b" / "history.db";
  auto db = HistoryDb::open(nested);
  EXPECT_TRUE(fs::exists(nested));
}

TEST_F(HistoryTest, NewerSchemaVersionIsRejectedAndLeftByteIdentical) {
  make_sqlite(db_path_,
              "CREATE TABLE runs (id INTEGER PRIMARY KEY, future TEXT); PRAGMA application_id = 1735422819; "
              "PRAGMA user_version = 999;");
  const std::string before = bytes_of(db_path_);
  try {
    HistoryDb::open(db_path_);
    FAIL() << "a newer database was opened";
  } catch (const gpuscout::DataError& e) {
    EXPECT_NE(std::string(e.what()).find(db_path_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes_of(db_path_), before);
}

TEST_F(HistoryTest, RandomBytesAreRejectedAndLeftIntact) {
  std::mt19937 rng(7);
  std::string noise(16384, '\0');
  for (char& c : noise) c = static_cast<char>(rng() & 0xff);
  gpuscout::write_file_atomic(db_path_, noise);
  try {
    HistoryDb::open(db_path_);
    FAIL() << "a corrupt file was opened";
  } catch (const gpuscout::DataError& e) {
    EXPECT_NE(std::string(e.what()).find(db_path_.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes_of(db_path_), noise);
}

TEST_F(HistoryTest, SqliteHeaderFollowedByGarbageIsRejectedAndLeftIntact) {
  std::mt19937 rng(11);
  std::string noise(8192, '\0');
  for (char& c : noise) c = static_cast<char>(rng() & 0xff);
  noise.replace(0, 16, std::string("SQLite format 3\0", 16));
  gpuscout::write_file_atomic(db_path_, noise);
  try {
    HistoryDb::open(db_path_);
    FAIL() << "a corrupt file was opened";
  } catch (const gpuscout::Error& e) {
    EXPECT_NE(std::string(e.what()).find(db_path_.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes_of(db_path_), noise);
}

TEST_F(HistoryTest, ForeignSqliteDatabaseIsRejectedAndLeftIntact) {
  make_sqlite(db_path_, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes VALUES (1, 'x');");
  const std::string before = bytes_of(db_path_);
  EXPECT_THROW(HistoryDb::open(db_path_), gpuscout::DataError);
  EXPECT_EQ(bytes_of(db_path_), before);
}

TEST_F(HistoryTest, StoresTheDocumentAndQueriesByFilters) {
  auto db = HistoryDb::open(db_path_);
  const auto a = db.add(make_result("node-a", "NVIDIA H200", "bench", {{"site", "lab"}}, "2026-11-30T01:00:00Z"), "t");
  const auto b =
      db.add(make_result("node-b", "NVIDIA H100 80GB HBM3", "bench", {{"site", "cloud"}}, "2026-11-30T02:00:00Z"), "t");
  const auto c = db.add(
      make_result("node-a", "NVIDIA H200", "advise", {{"site", "lab"}, {"run", "2"}}, "2026-11-30T03:00:00Z"), "t");
  EXPECT_TRUE(a.added);
  EXPECT_NE(a.id, b.id);

  auto all = db.list({});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, c.id);  // newest first
  EXPECT_EQ(all[2].id, a.id);
  EXPECT_EQ(all[2].host, "node-a");
  EXPECT_EQ(all[2].records, 2);
  EXPECT_EQ(all[2].failures, 1);
  EXPECT_EQ(all[2].gpu_names, std::vector<std::string>{"NVIDIA H200"});
  EXPECT_EQ(all[2].tags.at("site"), "lab");

  Query q;
  q.gpu = "h200";
  EXPECT_EQ(db.list(q).size(), 2u);
  q = {};
  q.gpu = "H200-SXM";  // the spec-database entry matches too
  EXPECT_EQ(db.list(q).size(), 2u);
  q = {};
  q.host = "NODE-B";
  ASSERT_EQ(db.list(q).size(), 1u);
  EXPECT_EQ(db.list(q)[0].id, b.id);
  q = {};
  q.kind = "advise";
  ASSERT_EQ(db.list(q).size(), 1u);
  q = {};
  q.tags = {{"site", "lab"}};
  EXPECT_EQ(db.list(q).size(), 2u);
  q.tags = {{"site", "lab"}, {"run", "2"}};
  ASSERT_EQ(db.list(q).size(), 1u);
  EXPECT_EQ(db.list(q)[0].id, c.id);
  q = {};
  q.limit = 2;
  EXPECT_EQ(db.list(q).size(), 2u);
  q = gpuscout::history::parse_query("last");
  ASSERT_EQ(db.list(q).size(), 1u);
  EXPECT_EQ(db.list(q)[0].id, c.id);
  q = gpuscout::history::parse_query("gpu:H200,kind:bench");
  ASSERT_EQ(db.list(q).size(), 1u);
  EXPECT_EQ(db.list(q)[0].id, a.id);
  q = gpuscout::history::parse_query(std::to_string(b.id));
  ASSERT_EQ(db.list(q).size(), 1u);
  EXPECT_EQ(db.list(q)[0].id, b.id);

  // The stored document round-trips; the same document is stored once.
  const auto doc = gpuscout::results::to_json(
      make_result("node-a", "NVIDIA H200", "bench", {{"site", "lab"}}, "2026-11-30T01:00:00Z"));
  EXPECT_EQ(db.document(a.id), doc);
  EXPECT_EQ(db.result(a.id).provenance.hostname, "node-a");
  const auto again = db.add(doc, "again", "again");
  EXPECT_FALSE(again.added);
  EXPECT_EQ(again.id, a.id);
  EXPECT_EQ(db.count(), 3);

  EXPECT_THROW(db.document(9999), gpuscout::NotFoundError);
  EXPECT_FALSE(db.find(9999).has_value());
}

TEST_F(HistoryTest, InvalidDocumentIsRejectedWithTheOrigin) {
  auto db = HistoryDb::open(db_path_);
  nlohmann::ordered_json doc = gpuscout::results::to_json(make_result("h", "g", "bench", {}, "2026-11-30T01:00:00Z"));
  doc["schema_version"] = "9.0";
  try {
    db.add(doc, "future.json", "future.json");
    FAIL() << "accepted a newer major";
  } catch (const gpuscout::DataError& e) {
    EXPECT_EQ(e.file(), "future.json");
  }
  EXPECT_EQ(db.count(), 0);
}

TEST_F(HistoryTest, TwoThreadsWriteConcurrentlyWithoutLoss) {
  HistoryDb::open(db_path_);  // created and migrated; the writers race on inserts
  auto writer = [&](int thread) {
    auto db = HistoryDb::open(db_path_);
    for (int i = 0; i < 50; ++i) {
      db.add(make_result("h", "NVIDIA H200", "bench", {{"thread", std::to_string(thread)}, {"i", std::to_string(i)}},
                         "2026-11-30T01:00:00Z"),
             "thread");
    }
  };
  std::thread t1(writer, 1);
  std::thread t2(writer, 2);
  t1.join();
  t2.join();
  auto db = HistoryDb::open(db_path_);
  EXPECT_EQ(db.count(), 100);
  Query q;
  q.tags = {{"thread", "2"}};
  EXPECT_EQ(db.list(q).size(), 50u);
}

TEST_F(HistoryTest, TwoProcessesCreateAndWriteConcurrentlyWithoutLoss) {
  // Both processes open a database that does not exist yet: creation and migration race too.
  std::vector<pid_t> children;
  for (int proc = 0; proc < 2; ++proc) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        auto db = HistoryDb::open(db_path_);
        for (int i = 0; i < 50; ++i) {
          db.add(make_result("p", "NVIDIA H200", "bench", {{"proc", std::to_string(proc)}, {"i", std::to_string(i)}},
                             "2026-11-30T01:00:00Z"),
                 "process");
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", proc, e.what());
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto db = HistoryDb::open(db_path_);
  EXPECT_EQ(db.count(), 100);
  std::set<std::int64_t> ids;
  for (const auto& r : db.list({})) ids.insert(r.id);
  EXPECT_EQ(ids.size(), 100u);
}

TEST(HistoryQuery, ParsesTerms) {
  using gpuscout::history::parse_query;
  EXPECT_EQ(parse_query("last").limit, 1);
  EXPECT_EQ(parse_query("last:5").limit, 5);
  EXPECT_EQ(parse_query("42").id, 42);
  EXPECT_EQ(parse_query("id:7").id, 7);
  const auto q = parse_query("gpu:H200, host:node-1,kind:bench,tag:site:lab,tag:run=3");
  EXPECT_EQ(q.gpu, "H200");
  EXPECT_EQ(q.host, "node-1");
  EXPECT_EQ(q.kind, "bench");
  EXPECT_EQ(q.tags.at("site"), "lab");
  EXPECT_EQ(q.tags.at("run"), "3");
  EXPECT_THROW(parse_query(""), gpuscout::UsageError);
  EXPECT_THROW(parse_query("newest"), gpuscout::UsageError);
  EXPECT_THROW(parse_query("last:x"), gpuscout::UsageError);
  EXPECT_THROW(parse_query("tag:novalue"), gpuscout::UsageError);
}

TEST(HistoryPath, DefaultFollowsTheEnvironment) {
  const char* saved_db = std::getenv("GPUSCOUT_HISTORY_DB");
  const char* saved_xdg = std::getenv("XDG_DATA_HOME");
  const char* saved_home = std::getenv("HOME");
  const std::string db = saved_db ? saved_db : "", xdg = saved_xdg ? saved_xdg : "",
                    home = saved_home ? saved_home : "";
  ::unsetenv("GPUSCOUT_HISTORY_DB");
  ::setenv("XDG_DATA_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(gpuscout::history::default_db_path(), fs::path("/xdg/gpuscout/history.db"));
  ::unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(gpuscout::history::default_db_path(), fs::path("/home/u/.local/share/gpuscout/history.db"));
  ::setenv("GPUSCOUT_HISTORY_DB", "/tmp/x.db", 1);
  EXPECT_EQ(gpuscout::history::default_db_path(), fs::path("/tmp/x.db"));
  auto restore = [](const char* name, const char* saved, const std::string& value) {
    if (saved) {
      ::setenv(name, value.c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  };
  restore("GPUSCOUT_HISTORY_DB", saved_db, db);
  restore("XDG_DATA_HOME", saved_xdg, xdg);
  restore("HOME", saved_home, home);
}
