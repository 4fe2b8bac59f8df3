#include "gpuscout/specs/spec_db.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpuscout/data/toml_reader.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::specs {
namespace {

using data::TomlEntry;

constexpr double kMaxValue = std::numeric_limits<double>::max();

// A required figure: a non-negative number; its source is filled in once [sources] is read.
Figure required_figure(const TomlEntry& table, std::string_view key) {
  return Figure{table.required_number(key, 0.0, kMaxValue), "", ""};
}

std::optional<Figure> optional_figure(const TomlEntry& table, std::string_view key) {
  auto value = table.optional_number(key, 0.0, kMaxValue);
  if (!value) return std::nullopt;
  return Figure{*value, "", ""};
}

const toml::table* sub_table(const toml::table& root, std::string_view key) {
  const toml::node* n = root.get(key);
  return n == nullptr ? nullptr : n->as_table();
}

void read_identity(const toml::table& root, const TomlEntry& top, GpuSpec& spec) {
  spec.aliases = top.string_list("aliases");
  spec.vendor = top.required_string("vendor");
  spec.architecture = top.required_string("architecture");
  spec.chip = top.required_string("chip");
  spec.compute_capability = top.optional_string("compute_capability");
  spec.gfx_target = top.optional_string("gfx_target");
  spec.form_factor = top.required_string("form_factor");
  spec.release_year = top.required_int("release_year", 1990, 2100);
  if (const toml::node* n = root.get("pci_device_ids")) {
    const toml::array* ids = n->as_array();
    if (ids == nullptr) top.fail("pci_device_ids", "expected an array of integers (0x2330)");
    for (const auto& id : *ids) {
      if (!id.is_integer() || **id.as_integer() <= 0 || **id.as_integer() > 0xffff) {
        top.fail("pci_device_ids", "expected an array of 16-bit PCI device ids (0x2330)");
      }
      spec.pci_device_ids.push_back(static_cast<std::uint32_t>(**id.as_integer()));
    }
  }
  spec.notes = top.string_list("notes");
  spec.cross_checks = top.string_list("cross_checks");
}

void read_memory_compute(const toml::table& root, const TomlEntry& top, GpuSpec& spec) {
  TomlEntry memory = top.required_table("memory");
  memory.reject_unknown_keys({"size_gb", "type", "bandwidth_gbs", "l2_mb"});
  spec.memory_gb = required_figure(memory, "size_gb");
  spec.memory_type = memory.required_string("type");
  spec.memory_bandwidth_gbs = required_figure(memory, "bandwidth_gbs");
  spec.l2_mb = optional_figure(memory, "l2_mb");

  TomlEntry compute = top.required_table("compute");
  compute.reject_unknown_keys({"sm_count", "boost_clock_mhz"});
  if (auto sms = compute.optional_int("sm_count", 1)) spec.sm_count = Figure{static_cast<double>(*sms), "", ""};
  spec.boost_clock_mhz = optional_figure(compute, "boost_clock_mhz");

  TomlEntry peak = top.required_table("peak_dense");
  const toml::table* peak_table = sub_table(root, "peak_dense");
  for (const auto& [key, value] : *peak_table) {
    (void)value;
    auto precision = parse_precision(key.str());
    if (!precision || to_string(*precision) != key.str()) {
      std::vector<std::string_view> names;
      for (Precision p : kAllPrecisions) names.push_back(to_string(p));
      peak.fail(key.str(), fmt::format("unknown precision; expected one of: {}", fmt::join(names, ", ")));
    }
    Figure figure{peak.required_number(key.str(), 0.0, kMaxValue), "", ""};
    if (figure.value == 0) {
      peak.fail(key.str(), "0 is not a peak; leave out a precision the hardware lacks");
    }
    spec.peak_dense[static_cast<std::size_t>(*precision)] = figure;
  }
  bool any = std::any_of(spec.peak_dense.begin(), spec.peak_dense.end(), [](const auto& f) { return f.has_value(); });
  if (!any) top.fail("peak_dense", "expected at least one precision (fp32 = 66.9)");
}

void read_interconnect_power(const TomlEntry& top, GpuSpec& spec) {
  TomlEntry link = top.required_table("interconnect");
  link.reject_unknown_keys({"scale_up", "nvlink_gen", "scale_up_bw_gbs_bidir", "bridge_only", "pcie_gen", "host_link"});
  spec.scale_up = link.required_choice("scale_up", {"nvlink", "infinity_fabric", "none"});
  spec.nvlink_gen = link.optional_int("nvlink_gen", 1, 10);
  if (spec.nvlink_gen && spec.scale_up != "nvlink") link.fail("nvlink_gen", "only allowed when scale_up = \"nvlink\"");
  if (!spec.nvlink_gen && spec.scale_up == "nvlink") link.fail("nvlink_gen", "missing; expected an integer");
  spec.scale_up_bw_gbs_bidir = optional_figure(link, "scale_up_bw_gbs_bidir");
  if (spec.scale_up != "none" && !spec.scale_up_bw_gbs_bidir) {
    link.fail("scale_up_bw_gbs_bidir", "missing; expected a number (GB/s, bidirectional)");
  }
  if (spec.scale_up == "none" && spec.scale_up_bw_gbs_bidir) {
    link.fail("scale_up_bw_gbs_bidir", "not allowed when scale_up = \"none\"");
  }
  spec.bridge_only = link.optional_bool("bridge_only").value_or(false);
  if (auto gen = link.optional_int("pcie_gen", 1, 10)) spec.pcie_gen = Figure{static_cast<double>(*gen), "", ""};
  spec.host_link = link.optional_string("host_link").value_or("");

  TomlEntry power = top.required_table("power");
  power.reject_unknown_keys({"tdp_w"});
  spec.tdp_w = required_figure(power, "tdp_w");

  TomlEntry features = top.required_table("features");
  features.reject_unknown_keys({"mig_max_instances", "fp8", "transformer_engine", "sparsity_2to4"});
  if (auto mig = features.optional_int("mig_max_instances", 0, 64)) {
    spec.mig_max_instances = Figure{static_cast<double>(*mig), "", ""};
  }
  spec.fp8 = features.required_bool("fp8");
  spec.transformer_engine = features.required_choice("transformer_engine", {"yes", "partial", "no"});
  spec.sparsity_2to4 = features.required_bool("sparsity_2to4");
  if (spec.fp8 != spec.peak(Precision::fp8).has_value()) {
    features.fail("fp8", "disagrees with [peak_dense] fp8 (present exactly when fp8 = true)");
  }
}

void read_prices(const TomlEntry& top, GpuSpec& spec) {
  auto prices = top.optional_table("prices");
  if (!prices) return;
  prices->reject_unknown_keys({"purchase", "cloud"});
  for (const TomlEntry& p : prices->array_of_tables("purchase")) {
    p.reject_unknown_keys({"usd", "date", "basis", "source", "uncertain"});
    spec.purchase_prices.push_back({p.required_number("usd", 0.0, kMaxValue), p.required_string("date"),
                                    p.required_string("basis"), p.required_string("source"),
                                    p.optional_string("uncertain").value_or("")});
  }
  for (const TomlEntry& c : prices->array_of_tables("cloud")) {
    c.reject_unknown_keys(
        {"usd_per_gpu_hr", "provider", "sku", "gpus_per_instance", "region", "pricing", "date", "source", "uncertain"});
    spec.cloud_prices.push_back({c.required_number("usd_per_gpu_hr", 0.0, kMaxValue), c.required_string("provider"),
                                 c.required_string("sku"), c.optional_int("gpus_per_instance", 1, 1024),
                                 c.optional_string("region").value_or(""), c.required_string("pricing"),
                                 c.required_string("date"), c.required_string("source"),
                                 c.optional_string("uncertain").value_or("")});
  }
}

bool known_figure_key(std::string_view key) {
  const auto fields = figure_fields();
  return std::any_of(fields.begin(), fields.end(), [&](const FigureField& f) { return f.key == key; });
}

// [sources] default / also / fields and [uncertain]: attach provenance to every figure.
void read_provenance(const TomlEntry& top, GpuSpec& spec) {
  TomlEntry sources = top.required_table("sources");
  sources.reject_unknown_keys({"default", "also", "fields"});
  spec.default_source = sources.required_string("default");
  spec.other_sources = sources.string_list("also");
  for (const auto& field : figure_fields()) {
    if (Figure* figure = find_figure(spec, field.key)) figure->source = spec.default_source;
  }
  if (auto fields = sources.optional_table("fields")) {
    for (const auto& [key, source] : fields->string_map()) {
      if (!known_figure_key(key)) fields->fail(key, "not a figure of the schema (see docs/spec-database.md)");
      Figure* figure = find_figure(spec, key);
      if (figure == nullptr) fields->fail(key, "names a figure this GPU does not have");
      if (source.empty()) fields->fail(key, "expected a non-empty source");
      figure->source = source;
    }
  }
  if (auto uncertain = top.optional_table("uncertain")) {
    for (const auto& [key, reason] : uncertain->string_map()) {
      if (reason.empty()) uncertain->fail(key, "expected a non-empty reason");
      if (key == "features.transformer_engine") {
        spec.transformer_engine_uncertain = reason;
        continue;
      }
      if (!known_figure_key(key)) uncertain->fail(key, "not a figure of the schema (see docs/spec-database.md)");
      Figure* figure = find_figure(spec, key);
      if (figure == nullptr) uncertain->fail(key, "names a figure this GPU does not have");
      figure->uncertain = reason;
    }
  }
}

// Memory as the driver reports it is in GiB-ish units close to the marketing GB of HBM parts
// (H200: 140.4 GiB for "141 GB"; B200: 178.4 GiB for "180 GB").
bool memory_fits(const GpuSpec& spec, std::uint64_t memory_bytes) {
  const double gib = static_cast<double>(memory_bytes) / (1024.0 * 1024.0 * 1024.0);
  return std::abs(gib - spec.memory_gb.value) <= 0.1 * spec.memory_gb.value;
}

}  // namespace

GpuSpec parse_gpu_spec(const data::DataFile& file) {
  const toml::table root = data::parse_toml(file);
  TomlEntry top(root, file.origin, "");
  GpuSpec spec;
  spec.origin = file.origin;
  spec.name = top.required_string("name");
  top.set_entry(spec.name);
  top.reject_unknown_keys(
      {"name",         "aliases",      "vendor",       "architecture",   "chip",   "compute_capability",
       "gfx_target",   "form_factor",  "release_year", "pci_device_ids", "memory", "compute",
       "peak_dense",   "interconnect", "power",        "features",       "prices", "notes",
       "cross_checks", "sources",      "uncertain"});
  read_identity(root, top, spec);
  read_memory_compute(root, top, spec);
  read_interconnect_power(top, spec);
  read_prices(top, spec);
  read_provenance(top, spec);
  return spec;
}

SpecDb SpecDb::load(const data::DataSource& source) {
  std::vector<GpuSpec> specs;
  for (const auto& file : source.list("gpus", ".toml")) specs.push_back(parse_gpu_spec(file));
  return from_specs(std::move(specs));
}

SpecDb SpecDb::from_specs(std::vector<GpuSpec> specs) {
  SpecDb db;
  db.specs_ = std::move(specs);
  for (std::size_t id = 0; id < db.specs_.size(); ++id) {
    const GpuSpec& spec = db.specs_[id];
    // Name the colliding name or alias and both files, so either can be fixed.
    std::vector<std::pair<std::string, std::string>> keys{{"name", spec.name}};
    for (const auto& alias : spec.aliases) keys.emplace_back("aliases", alias);
    for (const auto& [field, key] : keys) {
      auto other = db.index_.find(key);
      if (other && *other != id) {
        const GpuSpec& first = db.specs_[*other];
        throw DataError(spec.origin, spec.name, field,
                        fmt::format("'{}' is already a name or alias of '{}' in {}", key, first.name, first.origin));
      }
    }
    db.index_.add(id, spec.name, spec.aliases);
  }
  return db;
}

const GpuSpec* SpecDb::find(std::string_view name) const {
  auto id = index_.find(name);
  return id ? &specs_[*id] : nullptr;
}

const GpuSpec& SpecDb::get(std::string_view name) const {
  if (const GpuSpec* spec = find(name)) return *spec;
  throw NotFoundError("GPU", std::string(name), index_.suggest(name));
}

const GpuSpec* SpecDb::match_device(std::string_view driver_name, std::optional<std::uint32_t> pci_device_id,
                                    std::optional<std::uint64_t> memory_bytes) const {
  auto closest_memory = [&](const std::vector<const GpuSpec*>& candidates) -> const GpuSpec* {
    if (candidates.empty()) return nullptr;
    if (!memory_bytes) return candidates.size() == 1 ? candidates.front() : nullptr;
    const GpuSpec* best = nullptr;
    for (const GpuSpec* c : candidates) {
      if (!memory_fits(*c, *memory_bytes)) continue;
      if (best == nullptr || std::abs(c->memory_gb.value - static_cast<double>(*memory_bytes) / (1 << 30)) <
                                 std::abs(best->memory_gb.value - static_cast<double>(*memory_bytes) / (1 << 30))) {
        best = c;
      }
    }
    return best;
  };

  // 1. PCI device id: authoritative when unique, else the memory size picks among the entries.
  if (pci_device_id) {
    std::vector<const GpuSpec*> by_pci;
    for (const auto& spec : specs_) {
      if (std::find(spec.pci_device_ids.begin(), spec.pci_device_ids.end(), *pci_device_id) !=
          spec.pci_device_ids.end()) {
        by_pci.push_back(&spec);
      }
    }
    if (by_pci.size() == 1) return by_pci.front();
    if (const GpuSpec* spec = closest_memory(by_pci)) return spec;
  }

  // 2. The driver's name, exactly (after normalization) or containing a known name or alias.
  std::vector<const GpuSpec*> by_name;
  if (const GpuSpec* exact = find(driver_name)) {
    by_name.push_back(exact);
  } else {
    const std::string wanted = normalize_name(driver_name);
    std::size_t longest = 0;
    for (const auto& spec : specs_) {
      std::vector<std::string> keys{spec.name};
      keys.insert(keys.end(), spec.aliases.begin(), spec.aliases.end());
      for (const auto& key : keys) {
        const std::string k = normalize_name(key);
        if (k.size() < 2 || wanted.find(k) == std::string::npos) continue;
        if (k.size() > longest) {
          longest = k.size();
          by_name.assign(1, &spec);
        } else if (k.size() == longest && std::find(by_name.begin(), by_name.end(), &spec) == by_name.end()) {
          by_name.push_back(&spec);
        }
      }
    }
  }
  if (by_name.empty()) return nullptr;
  if (!memory_bytes) return by_name.size() == 1 ? by_name.front() : nullptr;

  // 3. Memory size: keep a name match that fits, else look among its siblings (same chip and form
  // factor: A100 SXM4 40GB vs 80GB) for one that does.
  if (const GpuSpec* spec = closest_memory(by_name)) return spec;
  std::vector<const GpuSpec*> siblings;
  for (const GpuSpec* match : by_name) {
    for (const auto& spec : specs_) {
      if (spec.chip == match->chip && spec.form_factor == match->form_factor) siblings.push_back(&spec);
    }
  }
  return closest_memory(siblings);
}

}  // namespace gpuscout::specs
