// gpuscout history list|show|export|import: the runs stored in the history database (docs/history.md).
// Also the global --db PATH / --no-history flags and the hook bench (and advise) call after a run.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/bench/selection.hpp"
#include "gpuscout/bench/summary.hpp"
#include "gpuscout/history/history.hpp"
#include "gpuscout/report/table.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/util/file.hpp"
#include "history_cli.hpp"

namespace gpuscout::cli {
namespace {

using ojson = nlohmann::ordered_json;

history::HistoryDb open_history(const AppContext& ctx, bool create) {
  return history::HistoryDb::open(history_db_path(ctx), create);
}

std::int64_t parse_id(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError(fmt::format("history: run id '{}' is not a number (see gpuscout history list)", text));
  }
  return std::stoll(text);
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  return fmt::format("{}", fmt::join(items, sep));
}

std::string tags_text(const std::map<std::string, std::string>& tags) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : tags) parts.push_back(k + ":" + v);
  return join(parts, ",");
}

report::Table runs_table(const std::vector<history::RunSummary>& runs) {
  report::Table t;
  t.key = "runs";
  t.add_column("id", "ID", "", -1, report::Align::right);
  t.add_column("created_utc", "Created (UTC)");
  t.add_column("kind", "Kind");
  t.add_column("host", "Host");
  t.add_column("gpus", "GPUs");
  t.add_column("records", "Records", "", -1, report::Align::right);
  t.add_column("failures", "Failures", "", -1, report::Align::right);
  t.add_column("complete", "Complete");
  t.add_column("tags", "Tags");
  t.add_column("git_commit", "Commit");
  for (const auto& r : runs) {
    t.add_row({r.id, r.created_utc, r.kind, r.host, join(r.gpu_names, ", "), r.records, r.failures, r.complete,
               tags_text(r.tags), r.git_commit});
  }
  return t;
}

struct ListFlags {
  std::int64_t limit = 50;
  std::string host, gpu, kind;
  std::vector<std::string> tags;
};

void run_list(AppContext& ctx, const ListFlags& f) {
  history::Query q;
  q.limit = f.limit;
  q.host = f.host;
  q.gpu = f.gpu;
  q.kind = f.kind;
  for (const auto& tag : f.tags) {
    for (const auto& [k, v] : bench::parse_tags(tag)) q.tags[k] = v;
  }
  const std::filesystem::path path = history_db_path(ctx);
  std::error_code ec;
  if (!path.empty() && !std::filesystem::exists(path, ec)) {
    // Listing never creates the database.
    report::Table t = runs_table({});
    t.notes.push_back(
        fmt::format("no history database yet at {}: gpuscout bench adds runs, gpuscout history "
                    "import FILE... adds result files",
                    path.string()));
    ctx.out << report::render(t, ctx.format());
    return;
  }
  auto db = open_history(ctx, false);
  const auto runs = db.list(q);
  report::Table t = runs_table(runs);
  t.notes.push_back(fmt::format("history: {}", db.path().string()));
  const std::int64_t total = db.count();
  if (f.limit > 0 && static_cast<std::int64_t>(runs.size()) == f.limit) {
    t.notes.push_back(fmt::format("newest {} shown (--limit N; 0 for all)", f.limit));
  }
  if (total == 0) t.notes.push_back("no runs yet: gpuscout bench adds one, gpuscout history import FILE... adds files");
  ctx.out << report::render(t, ctx.format());
}

void run_show(AppContext& ctx, const std::string& id_text) {
  const std::int64_t id = parse_id(id_text);
  auto db = open_history(ctx, false);
  const results::ResultSet result = db.result(id);
  const history::RunSummary s = *db.find(id);

  report::Table run;
  run.key = "run";
  run.title = fmt::format("Run {}", id);
  run.add_column("field", "Field");
  run.add_column("value", "Value");
  run.add_row({std::string("id"), s.id});
  run.add_row({std::string("created_utc"), s.created_utc});
  run.add_row({std::string("added_utc"), s.added_utc});
  run.add_row({std::string("kind"), s.kind});
  run.add_row({std::string("host"), s.host});
  run.add_row({std::string("gpus"), join(s.gpu_names, ", ")});
  run.add_row({std::string("tags"), tags_text(s.tags)});
  run.add_row({std::string("tool_version"), s.tool_version});
  run.add_row({std::string("git_commit"), s.git_commit});
  run.add_row({std::string("command_line"), join(result.provenance.command_line, " ")});
  run.add_row({std::string("records"), s.records});
  run.add_row({std::string("failures"), s.failures});
  run.add_row({std::string("complete"), s.complete});
  run.add_row({std::string("source"), s.source});

  report::Table records = bench::summary_table(result.records);
  records.key = "records";
  if (ctx.format() != report::Format::csv) records.title = "Records";
  if (ctx.format() == report::Format::csv) {
    ctx.out << report::render(records, ctx.format());  // one CSV block: the records
    return;
  }
  ctx.out << report::render(std::vector<report::Table>{run, records}, ctx.format());
}

void run_export(AppContext& ctx, const std::string& id_text, const std::string& output) {
  const std::int64_t id = parse_id(id_text);
  auto db = open_history(ctx, false);
  const std::string text = db.document(id).dump(2) + "\n";
  if (output.empty() || output == "-") {
    ctx.out << text;
    return;
  }
  write_file_atomic(output, text);
  fmt::print(stderr, "gpuscout history: wrote run {} to {}\n", id, output);
}

void run_import(AppContext& ctx, const std::vector<std::string>& files) {
  auto db = open_history(ctx, true);
  report::Table t;
  t.key = "imported";
  t.add_column("file", "File");
  t.add_column("id", "ID", "", -1, report::Align::right);
  t.add_column("status", "Status");
  int failed = 0;
  for (const auto& file : files) {
    ojson document;
    try {
      const std::string text = read_file(file);
      try {
        document = ojson::parse(text);
      } catch (const ojson::parse_error& e) {
        throw DataError(file, "", "", fmt::format("not valid JSON: {}", e.what()));
      }
    } catch (const Error& e) {
      ++failed;
      fmt::print(stderr, "gpuscout: error: {}\n", e.what());
      continue;
    }
    try {
      const history::AddResult added = db.add(document, file, file);
      t.add_row({file, added.id, std::string(added.added ? "added" : "already stored")});
    } catch (const DataError& e) {
      if (e.file() != file) throw;  // the database itself: stop
      ++failed;
      fmt::print(stderr, "gpuscout: error: {}\n", e.what());
    }
  }
  t.notes.push_back(fmt::format("history: {}", db.path().string()));
  ctx.out << report::render(t, ctx.format());
  if (failed > 0) {
    fmt::print(stderr, "gpuscout history: {} of {} file{} not imported\n", failed, files.size(),
               files.size() == 1 ? "" : "s");
    ctx.raise_exit_code(ExitCode::failure);
  }
}

}  // namespace

std::filesystem::path history_db_path(const AppContext& ctx) {
  if (ctx.options.history_db) return *ctx.options.history_db;
  return history::default_db_path();
}

void append_to_history(AppContext& ctx, const results::ResultSet& result, const std::string& source) {
  if (ctx.options.no_history) return;
  try {
    auto db = history::HistoryDb::open(history_db_path(ctx), true);
    const history::AddResult added = db.add(result, source);
    fmt::print(stderr, "gpuscout: history: run {} in {}\n", added.id, db.path().string());
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuscout: warning: run not added to the history: {} (--no-history skips it)\n", e.what());
  }
}

std::vector<report::ReportInput> report_inputs_from_history(AppContext& ctx, const std::string& query) {
  const history::Query q = history::parse_query(query);
  auto db = open_history(ctx, false);
  auto runs = db.list(q);
  if (runs.empty()) throw NotFoundError(fmt::format("history query (in {})", db.path().string()), query, {});
  std::vector<report::ReportInput> inputs;
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    inputs.push_back({fmt::format("history run {} ({}, {})", it->id, it->host, it->created_utc), db.result(it->id)});
  }
  return inputs;
}

void register_history_command(CLI::App& app, AppContext& ctx) {
  // Global, so `gpuscout bench --no-history` and `gpuscout history list --db FILE` both work.
  app.add_option("--db", ctx.options.history_db,
                 "Run history database (default $GPUSCOUT_HISTORY_DB, else $XDG_DATA_HOME/gpuscout/history.db, else "
                 "~/.local/share/gpuscout/history.db)");
  app.add_flag("--no-history", ctx.options.no_history, "bench/advise: do not add the run to the history database");

  CLI::App* cmd = app.add_subcommand("history", "Runs stored in the history database: list, show, export, import");
  cmd->require_subcommand(1);

  auto list_flags = std::make_shared<ListFlags>();
  CLI::App* list = cmd->add_subcommand("list", "List stored runs, newest first");
  list->add_option("--limit", list_flags->limit, "At most N runs (0: all)")->check(CLI::NonNegativeNumber);
  list->add_option("--host", list_flags->host, "Only runs whose host name contains H");
  list->add_option("--gpu", list_flags->gpu, "Only runs with a GPU whose name or spec entry contains G, e.g. H200");
  list->add_option("--kind", list_flags->kind, "Only runs of this kind: bench, predict, advise");
  list->add_option("--tag", list_flags->tags, "Only runs tagged key:value (repeatable; all must match)")
      ->allow_extra_args(false);
  list->callback([&ctx, list_flags] { run_list(ctx, *list_flags); });

  auto show_id = std::make_shared<std::string>();
  CLI::App* show = cmd->add_subcommand("show", "Show one run: its provenance and its records as a table");
  show->add_option("id", *show_id, "Run id (gpuscout history list)")->required();
  show->callback([&ctx, show_id] { run_show(ctx, *show_id); });

  auto export_id = std::make_shared<std::string>();
  auto export_out = std::make_shared<std::string>();
  CLI::App* exp = cmd->add_subcommand("export", "Write one run's result JSON (stdout, or a file written atomically)");
  exp->add_option("id", *export_id, "Run id (gpuscout history list)")->required();
  exp->add_option("-o,--output", *export_out, "File to write (atomically); default stdout");
  exp->callback([&ctx, export_id, export_out] { run_export(ctx, *export_id, *export_out); });

  auto import_files = std::make_shared<std::vector<std::string>>();
  CLI::App* imp = cmd->add_subcommand("import", "Add result files to the history (a file already stored is skipped)");
  imp->add_option("files", *import_files, "Result files (JSON), e.g. bench/results/*.json")->required();
  imp->callback([&ctx, import_files] { run_import(ctx, *import_files); });

  for (CLI::App* sub : cmd->get_subcommands({})) sub->fallthrough();
}

}  // namespace gpuscout::cli
