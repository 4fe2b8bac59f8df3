#include "gpuscout/results/result_json.hpp"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <fstream>

#include "gpuscout/topo/topology.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/file.hpp"
#include "gpuscout/version.hpp"

namespace gpuscout::results {
namespace {

using ojson = nlohmann::ordered_json;

template <typename T>
void put_optional(ojson& out, const char* key, const std::optional<T>& value) {
  if (value) out[key] = *value;
}

ojson spread_json(const Spread& s) {
  return {{"min", s.min}, {"max", s.max}, {"p10", s.p10}, {"p90", s.p90}, {"mean", s.mean}, {"stddev", s.stddev}};
}

ojson metric_json(const Metric& m) {
  ojson out = {{"name", m.name}, {"value", m.value}, {"unit", m.unit}, {"statistic", m.statistic}};
  if (m.samples > 0) out["samples"] = m.samples;
  if (m.spread) out["spread"] = spread_json(*m.spread);
  if (!m.note.empty()) out["note"] = m.note;
  return out;
}

ojson telemetry_json(const Telemetry& t) {
  ojson out = ojson::object();
  put_optional(out, "power_mean_w", t.power_mean_w);
  put_optional(out, "power_max_w", t.power_max_w);
  put_optional(out, "sm_clock_mean_mhz", t.sm_clock_mean_mhz);
  put_optional(out, "sm_clock_min_mhz", t.sm_clock_min_mhz);
  put_optional(out, "mem_clock_mean_mhz", t.mem_clock_mean_mhz);
  put_optional(out, "temperature_max_c", t.temperature_max_c);
  put_optional(out, "memory_used_max_gib", t.memory_used_max_gib);
  out["samples"] = t.samples;
  out["throttle_reasons"] = t.throttle_reasons;
  return out;
}

ojson gpu_json(const GpuInfo& g) {
  ojson out = {
      {"index", g.index}, {"name", g.name}, {"spec_name", g.spec_name}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id}};
  put_optional(out, "sm_count", g.sm_count);
  put_optional(out, "memory_bytes", g.memory_bytes);
  put_optional(out, "compute_capability", g.compute_capability);
  put_optional(out, "max_sm_clock_mhz", g.max_sm_clock_mhz);
  put_optional(out, "max_mem_clock_mhz", g.max_mem_clock_mhz);
  put_optional(out, "power_limit_w", g.power_limit_w);
  put_optional(out, "ecc_enabled", g.ecc_enabled);
  put_optional(out, "mig_enabled", g.mig_enabled);
  put_optional(out, "numa_node", g.numa_node);
  return out;
}

// Reading: every accessor names the field path on failure.
class Reader {
 public:
  Reader(const ojson& node, std::string origin, std::string path)
      : node_(node), origin_(std::move(origin)), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw DataError(origin_, "", path_.empty() ? key : (key.empty() ? path_ : path_ + "." + key), problem);
  }
  const ojson* get(const std::string& key) const {
    auto it = node_.find(key);
    return it == node_.end() || it->is_null() ? nullptr : &*it;
  }
  Reader child(const std::string& key, ojson::value_t type) const {
    const auto* n = get(key);
    if (n == nullptr) fail(key, "missing");
    if (n->type() != type)
      fail(key, fmt::format("expected {}", type == ojson::value_t::array ? "an array" : "an object"));
    return Reader(*n, origin_, path_.empty() ? key : path_ + "." + key);
  }
  Reader element(std::size_t i) const { return Reader(node_.at(i), origin_, fmt::format("{}[{}]", path_, i)); }
  std::string str(const std::string& key, bool required = true) const {
    const auto* n = get(key);
    if (n == nullptr) {
      if (required) fail(key, "missing; expected a string");
      return {};
    }
    if (!n->is_string()) fail(key, "expected a string");
    return n->get<std::string>();
  }
  std::optional<double> opt_number(const std::string& key) const {
    const auto* n = get(key);
    if (n == nullptr) return std::nullopt;
    if (!n->is_number()) fail(key, "expected a number");
    return n->get<double>();
  }
  double number(const std::string& key) const {
    auto v = opt_number(key);
    if (!v) fail(key, "missing; expected a number");
    return *v;
  }
  std::optional<std::int64_t> opt_int(const std::string& key) const {
    const auto* n = get(key);
    if (n == nullptr) return std::nullopt;
    if (!n->is_number_integer()) fail(key, "expected an integer");
    return n->get<std::int64_t>();
  }
  std::optional<bool> opt_bool(const std::string& key) const {
    const auto* n = get(key);
    if (n == nullptr) return std::nullopt;
    if (!n->is_boolean()) fail(key, "expected true or false");
    return n->get<bool>();
  }
  std::optional<std::string> opt_str(const std::string& key) const {
    if (get(key) == nullptr) return std::nullopt;
    return str(key);
  }
  std::map<std::string, std::string> string_map(const std::string& key) const {
    std::map<std::string, std::string> out;
    const auto* n = get(key);
    if (n == nullptr) return out;
    if (!n->is_object()) fail(key, "expected an object of strings");
    for (const auto& [k, v] : n->items()) {
      if (!v.is_string()) fail(key + "." + k, "expected a string");
      out[k] = v.get<std::string>();
    }
    return out;
  }
  std::vector<std::string> string_list(const std::string& key) const {
    std::vector<std::string> out;
    const auto* n = get(key);
    if (n == nullptr) return out;
    if (!n->is_array()) fail(key, "expected an array of strings");
    for (const auto& v : *n) {
      if (!v.is_string()) fail(key, "expected an array of strings");
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  const ojson& node() const { return node_; }

 private:
  const ojson& node_;
  std::string origin_, path_;
};

Metric read_metric(const Reader& r) {
  Metric m;
  m.name = r.str("name");
  m.value = r.number("value");
  m.unit = r.str("unit", false);
  m.statistic = r.str("statistic");
  m.samples = r.opt_int("samples").value_or(0);
  m.note = r.str("note", false);
  if (r.get("spread") != nullptr) {
    Reader s = r.child("spread", ojson::value_t::object);
    m.spread = Spread{s.number("min"), s.number("max"),  s.number("p10"),
                      s.number("p90"), s.number("mean"), s.number("stddev")};
  }
  return m;
}

Record read_record(const Reader& r) {
  Record rec;
  rec.key = r.str("key");
  rec.benchmark = r.str("benchmark");
  if (const auto* gpus = r.get("gpus")) {
    if (!gpus->is_array()) r.fail("gpus", "expected an array of GPU indices");
    for (const auto& g : *gpus) {
      if (!g.is_number_integer()) r.fail("gpus", "expected an array of GPU indices");
      rec.gpus.push_back(g.get<int>());
    }
  }
  if (const auto* params = r.get("params")) {
    if (!params->is_object()) r.fail("params", "expected an object");
    rec.params = *params;
  }
  Reader metrics = r.child("metrics", ojson::value_t::array);
  for (std::size_t i = 0; i < metrics.node().size(); ++i) {
    Reader m = metrics.element(i);
    if (!m.node().is_object()) m.fail("", "expected an object");
    rec.metrics.push_back(read_metric(m));
  }
  try {
    rec.outcome = outcome_from_string(r.str("outcome"));
  } catch (const std::invalid_argument& e) {
    r.fail("outcome", e.what());
  }
  rec.reason = r.str("reason", false);
  if (r.get("telemetry") != nullptr) {
    Reader t = r.child("telemetry", ojson::value_t::object);
    Telemetry tel;
    tel.power_mean_w = t.opt_number("power_mean_w");
    tel.power_max_w = t.opt_number("power_max_w");
    tel.sm_clock_mean_mhz = t.opt_number("sm_clock_mean_mhz");
    tel.sm_clock_min_mhz = t.opt_number("sm_clock_min_mhz");
    tel.mem_clock_mean_mhz = t.opt_number("mem_clock_mean_mhz");
    tel.temperature_max_c = t.opt_number("temperature_max_c");
    tel.memory_used_max_gib = t.opt_number("memory_used_max_gib");
    tel.samples = t.opt_int("samples").value_or(0);
    tel.throttle_reasons = t.string_list("throttle_reasons");
    rec.telemetry = tel;
  }
  if (const auto* extra = r.get("extra")) rec.extra = *extra;
  return rec;
}

GpuInfo read_gpu(const Reader& r) {
  GpuInfo g;
  g.index = static_cast<int>(r.opt_int("index").value_or(0));
  g.name = r.str("name");
  g.spec_name = r.str("spec_name", false);
  g.uuid = r.str("uuid", false);
  g.pci_bus_id = r.str("pci_bus_id", false);
  if (auto v = r.opt_int("sm_count")) g.sm_count = static_cast<int>(*v);
  g.memory_bytes = r.opt_int("memory_bytes");
  g.compute_capability = r.opt_str("compute_capability");
  g.max_sm_clock_mhz = r.opt_number("max_sm_clock_mhz");
  g.max_mem_clock_mhz = r.opt_number("max_mem_clock_mhz");
  g.power_limit_w = r.opt_number("power_limit_w");
  g.ecc_enabled = r.opt_bool("ecc_enabled");
  g.mig_enabled = r.opt_bool("mig_enabled");
  if (auto v = r.opt_int("numa_node")) g.numa_node = static_cast<int>(*v);
  return g;
}

}  // namespace

ojson to_json(const Record& r) {
  ojson out = {{"key", r.key}, {"benchmark", r.benchmark}, {"gpus", r.gpus}, {"params", r.params}};
  ojson metrics = ojson::array();
  for (const auto& m : r.metrics) metrics.push_back(metric_json(m));
  out["metrics"] = std::move(metrics);
  out["outcome"] = to_string(r.outcome);
  if (!r.reason.empty()) out["reason"] = r.reason;
  if (r.telemetry) out["telemetry"] = telemetry_json(*r.telemetry);
  if (!r.extra.empty()) out["extra"] = r.extra;
  return out;
}

ojson to_json(const ResultSet& result) {
  const Provenance& p = result.provenance;
  ojson out = {{"schema_version", result.schema_version}, {"kind", result.kind}, {"complete", result.complete}};
  out["provenance"] = {{"tool", {{"name", "gpuscout"}, {"version", p.tool_version}, {"git_commit", p.git_commit}}},
                       {"created_utc", p.created_utc},
                       {"command_line", p.command_line},
                       {"host", {{"hostname", p.hostname}, {"os", p.os}, {"cpu", p.cpu}, {"cpus", p.cpus}}},
                       {"software", p.software},
                       {"environment", p.environment},
                       {"tags", p.tags},
                       {"data_source", p.data_source}};
  ojson checks = ojson::array();
  for (const RunCheck& c : p.checks) {
    checks.push_back({{"key", c.key}, {"status", c.status}, {"message", c.message}});
  }
  out["provenance"]["checks"] = std::move(checks);
  ojson gpus = ojson::array();
  for (const auto& g : result.gpus) gpus.push_back(gpu_json(g));
  out["gpus"] = std::move(gpus);
  out["topology"] = result.topology;
  ojson records = ojson::array();
  for (const auto& r : result.records) records.push_back(to_json(r));
  out["records"] = std::move(records);
  return out;
}

ResultSet result_from_json(const nlohmann::ordered_json& document, const std::string& origin) {
  if (!document.is_object()) throw DataError(origin, "", "", "expected a JSON object (a gpuscout result file)");
  Reader root(document, origin, "");
  ResultSet result;
  result.schema_version = root.str("schema_version");
  int major = 0, minor = 0;
  if (std::sscanf(result.schema_version.c_str(), "%d.%d", &major, &minor) != 2) {
    root.fail("schema_version", fmt::format("'{}' is not MAJOR.MINOR", result.schema_version));
  }
  if (major != kSchemaMajor) {
    root.fail("schema_version",
              fmt::format("version {} is not readable by this gpuscout (reads {}.x); {}", result.schema_version,
                          kSchemaMajor, major > kSchemaMajor ? "upgrade gpuscout" : "re-run the measurement"));
  }
  result.kind = root.str("kind");
  result.complete = root.opt_bool("complete").value_or(true);
  Reader prov = root.child("provenance", ojson::value_t::object);
  Provenance& p = result.provenance;
  if (prov.get("tool") != nullptr) {
    Reader tool = prov.child("tool", ojson::value_t::object);
    p.tool_version = tool.str("version", false);
    p.git_commit = tool.str("git_commit", false);
  }
  p.created_utc = prov.str("created_utc", false);
  p.command_line = prov.string_list("command_line");
  if (prov.get("host") != nullptr) {
    Reader host = prov.child("host", ojson::value_t::object);
    p.hostname = host.str("hostname", false);
    p.os = host.str("os", false);
    p.cpu = host.str("cpu", false);
    p.cpus = host.str("cpus", false);  // since 1.3
  }
  p.software = prov.string_map("software");
  p.environment = prov.string_map("environment");
  p.tags = prov.string_map("tags");
  p.data_source = prov.str("data_source", false);
  if (prov.get("checks") != nullptr) {  // since 1.2
    Reader checks = prov.child("checks", ojson::value_t::array);
    for (std::size_t i = 0; i < checks.node().size(); ++i) {
      Reader c = checks.element(i);
      if (!c.node().is_object()) c.fail("", "expected an object {key, status, message}");
      p.checks.push_back({c.str("key"), c.str("status"), c.str("message", false)});
    }
  }
  if (root.get("gpus") != nullptr) {
    Reader gpus = root.child("gpus", ojson::value_t::array);
    for (std::size_t i = 0; i < gpus.node().size(); ++i) result.gpus.push_back(read_gpu(gpus.element(i)));
  }
  if (const auto* topo = root.get("topology")) result.topology = *topo;
  Reader records = root.child("records", ojson::value_t::array);
  for (std::size_t i = 0; i < records.node().size(); ++i) {
    Reader r = records.element(i);
    if (!r.node().is_object()) r.fail("", "expected an object");
    result.records.push_back(read_record(r));
  }
  return result;
}

namespace {

ojson parse_result_text(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  try {
    return ojson::parse(text);
  } catch (const ojson::parse_error& e) {
    throw DataError(path.string(), "", "", fmt::format("not valid JSON: {}", e.what()));
  }
}

}  // namespace

ResultSet read_result_file(const std::filesystem::path& path) {
  std::string foreign;
  if (auto set = read_result_file_or_skip(path, foreign)) return std::move(*set);
  throw DataError(path.string(), "", "", foreign);
}

std::optional<std::string> foreign_document_reason(const ojson& document) {
  if (!document.is_object()) return fmt::format("the top level is a JSON {}, not an object", document.type_name());
  for (const char* field : {"schema_version", "kind", "provenance", "records"}) {
    if (document.contains(field)) return std::nullopt;
  }
  std::string keys;
  int shown = 0;
  for (const auto& [key, value] : document.items()) {
    if (shown++ == 6) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + key;
  }
  return fmt::format("no schema_version, kind, provenance or records (top-level keys: {})",
                     keys.empty() ? "none" : keys);
}

std::optional<ResultSet> read_result_file_or_skip(const std::filesystem::path& path, std::string& skip_reason) {
  const ojson document = parse_result_text(path);
  if (auto foreign = foreign_document_reason(document)) {
    skip_reason = "not a gpuscout result file: " + *foreign;
    return std::nullopt;
  }
  skip_reason.clear();
  return result_from_json(document, path.string());
}

ResultFiles read_result_files(const std::vector<std::string>& paths) {
  ResultFiles files;
  for (const auto& path : paths) {
    std::string why;
    if (auto set = read_result_file_or_skip(path, why)) {
      files.read.emplace_back(path, std::move(*set));
    } else {
      files.skipped.emplace_back(path, std::move(why));
    }
  }
  return files;
}

void write_result_file(const std::filesystem::path& path, const ResultSet& result) {
  write_file_atomic(path, to_json(result).dump(2) + "\n");
}

Provenance local_provenance(int argc, const char* const* argv) {
  Provenance p;
  p.tool_version = kVersion;
  p.git_commit = kGitCommit;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &utc);
  p.created_utc = stamp;
  for (int i = 0; i < argc; ++i) p.command_line.emplace_back(argv[i]);
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) p.hostname = host;
  struct utsname uts {};
  if (::uname(&uts) == 0) p.os = fmt::format("{} {} {}", uts.sysname, uts.release, uts.machine);
  p.cpus = topo::cpu_list_from_mask(topo::process_cpu_mask());
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) {
      p.cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return p;
}

}  // namespace gpuscout::results
