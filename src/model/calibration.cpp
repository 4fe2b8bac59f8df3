// Calibration tables: parsing, building from result files, transfer by architecture, public fallbacks.
// Definitions: docs/modeling.md "Calibration".
#include "gpuscout/model/calibration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "gpuscout/data/toml_reader.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::model {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double element_bytes(const std::string& precision) {
  if (precision == "fp64" || precision == "fp32" || precision == "tf32") return precision == "fp64" ? 8 : 4;
  if (precision == "fp16" || precision == "bf16") return 2;
  if (precision == "fp8" || precision == "int8") return 1;
  return 0;
}

// An array of [x, y] number pairs under `key` (`pair` names the two, for errors), both > 0 and y <= `max_y`
// (`range` says so when one is not), sorted by x.
Curve parse_pairs(const data::TomlEntry& entry, const toml::table& table, std::string_view key, std::string_view pair,
                  double max_y, std::string_view range) {
  Curve out;
  const auto* array = table.get_as<toml::array>(key);
  if (!array) entry.fail(key, fmt::format("expected an array of [{}] pairs", pair));
  for (const auto& node : *array) {
    const auto* xy = node.as_array();
    if (!xy || xy->size() != 2) entry.fail(key, fmt::format("expected [{}] pairs", pair));
    const auto x = (*xy)[0].value<double>();
    const auto y = (*xy)[1].value<double>();
    if (!x || !y || *x <= 0 || *y <= 0 || *y > max_y) entry.fail(key, std::string(range));
    out.emplace_back(*x, *y);
  }
  if (out.empty()) entry.fail(key, "is empty");
  std::sort(out.begin(), out.end());
  return out;
}

Curve parse_curve(const data::TomlEntry& entry, const toml::table& table, std::string_view key) {
  return parse_pairs(entry, table, key, "x, efficiency", 1.2, "x must be > 0 and efficiency in (0, 1.2]");
}

std::string precision_name(specs::Precision p) {
  return std::string(specs::to_string(p));
}

double microseconds(const results::Metric& time) {
  return time.unit == "ms" ? time.value * 1e3 : time.unit == "s" ? time.value * 1e6 : time.value;
}

enum class CollectiveOp { all_reduce, alltoall };

// The collective a record measures, for the two the model uses; nullopt for any other record.
std::optional<CollectiveOp> collective_op(const results::Record& r) {
  if (r.key.starts_with("collectives/alltoall/")) return CollectiveOp::alltoall;
  if (r.key.starts_with("collectives/all_reduce") ||
      (r.benchmark.starts_with("collective") && r.key.find("all_reduce") != std::string::npos)) {
    return CollectiveOp::all_reduce;
  }
  return std::nullopt;
}

struct CollectivePoint {
  double bytes = 0;
  double us = 0;
  std::int64_t ranks = 2;
};

// α: median time of the smallest message; busbw: best at >= 64 MiB; the curve: median time per message
// size at the rank count most records have (as scripts/make-calibration.py).
std::optional<CollectiveModel> fit_collective(const std::vector<CollectivePoint>& points,
                                              const std::vector<double>& busbw, const std::string& what) {
  if (points.empty() || busbw.empty()) return std::nullopt;
  std::map<std::int64_t, int> per_ranks;
  for (const auto& p : points) ++per_ranks[p.ranks];
  const auto ranks = std::max_element(per_ranks.begin(), per_ranks.end(), [](const auto& a, const auto& b) {
                       return a.second < b.second;
                     })->first;
  std::map<double, std::vector<double>> by_bytes;
  for (const auto& p : points) {
    if (p.ranks == ranks) by_bytes[p.bytes].push_back(p.us);
  }
  CollectiveModel model;
  model.alpha_us = median(by_bytes.begin()->second);
  model.busbw_gbs = *std::max_element(busbw.begin(), busbw.end());
  model.curve_ranks = ranks;
  for (const auto& [bytes, us] : by_bytes) model.time_by_bytes.emplace_back(bytes, median(us));
  model.source = fmt::format(
      "measured {} records over {} ranks: the median time at each of {} message sizes, joined by straight lines "
      "(α {:.1f} us at the smallest; busbw {:.0f} GB/s, the best >= 64 MiB, past the largest)",
      what, ranks, model.time_by_bytes.size(), model.alpha_us, model.busbw_gbs);
  return model;
}

// The α-β line alone (public figures, or a table without a measured curve).
CollectiveModel line_model(double alpha_us, double busbw_gbs, std::string source) {
  CollectiveModel model;
  model.alpha_us = alpha_us;
  model.busbw_gbs = busbw_gbs;
  model.source = std::move(source);
  return model;
}

// A [allreduce] / [alltoall] table (`entry`, whose TOML is `table`): alpha_us and busbw_gbs, optionally the
// measured curve time_by_bytes at `ranks` ranks.
CollectiveModel parse_collective(const data::TomlEntry& entry, const toml::table& table,
                                 const std::string& fallback_source) {
  auto model = line_model(entry.required_number("alpha_us", 0), entry.required_number("busbw_gbs", 0),
                          entry.optional_string("source").value_or(fallback_source));
  if (!entry.has("time_by_bytes")) return model;
  model.curve_ranks = entry.required_int("ranks", 2, 1 << 20);
  model.time_by_bytes =
      parse_pairs(entry, table, "time_by_bytes", "message bytes, time us", std::numeric_limits<double>::infinity(),
                  "expected [message bytes, time us] pairs, both > 0");
  for (std::size_t i = 1; i < model.time_by_bytes.size(); ++i) {
    if (model.time_by_bytes[i].first == model.time_by_bytes[i - 1].first) {
      entry.fail("time_by_bytes", "lists a message size twice");
    }
  }
  return model;
}

// Seconds of one collective whose bandwidth term carries `factor(n)` (2(n-1)/n all-reduce, (n-1)/n all-to-all).
double collective_seconds(const CollectiveModel& model, double bytes, std::int64_t gpus, double (*factor)(double)) {
  if (gpus <= 1) return 0;
  const double n = static_cast<double>(gpus);
  const auto& curve = model.time_by_bytes;
  if (curve.empty()) return model.alpha_us * 1e-6 + factor(n) * bytes / (model.busbw_gbs * 1e9);
  const double scale = factor(n) / factor(static_cast<double>(model.curve_ranks));
  double us = curve.front().second;
  if (bytes >= curve.back().first) {
    us = curve.back().second +
         (bytes - curve.back().first) * factor(static_cast<double>(model.curve_ranks)) / (model.busbw_gbs * 1e3);
  } else if (bytes > curve.front().first) {
    const auto hi = std::upper_bound(curve.begin(), curve.end(), bytes,
                                     [](double b, const auto& point) { return b < point.first; });
    const auto lo = hi - 1;
    us = lo->second + (bytes - lo->first) * (hi->second - lo->second) / (hi->first - lo->first);
  }
  return us * scale * 1e-6;
}

double allreduce_factor(double n) {
  return 2 * (n - 1) / n;
}
double alltoall_factor(double n) {
  return (n - 1) / n;
}

}  // namespace

double interpolate_log2(const Curve& curve, double x) {
  if (curve.empty()) return 0;
  if (x <= curve.front().first) return curve.front().second;
  if (x >= curve.back().first) return curve.back().second;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (x <= curve[i].first) {
      const double x0 = std::log2(curve[i - 1].first), x1 = std::log2(curve[i].first);
      const double f = (std::log2(x) - x0) / (x1 - x0);
      return curve[i - 1].second + f * (curve[i].second - curve[i - 1].second);
    }
  }
  return curve.back().second;
}

double Calibration::gemm_efficiency(specs::Precision precision, double m) const {
  auto name = precision_name(precision);
  if (name == "fp64_tensor") name = "fp64";
  const auto bf16 = gemm.find("bf16");
  const auto it = gemm.find(name);
  if (it == gemm.end() || it->second.compute.empty()) {
    return bf16 != gemm.end() ? interpolate_log2(bf16->second.compute, m) : 0.7;
  }
  const auto& own = it->second.compute;
  if (own.size() >= 2 && own.front().first <= 2048) return interpolate_log2(own, m);
  if (bf16 == gemm.end() || bf16->second.compute.empty() || it == bf16) return interpolate_log2(own, m);
  // Shape of bf16's curve, level of this precision's large-m measurement.
  const double scale = own.back().second / interpolate_log2(bf16->second.compute, own.back().first);
  return std::min(interpolate_log2(own, m), interpolate_log2(bf16->second.compute, m) * scale);
}

double Calibration::weight_stream_efficiency(specs::Precision precision, double bytes, double m) const {
  const auto it = gemm.find(precision_name(precision));
  if (it != gemm.end() && bytes > 0 && !it->second.weight_stream_by_bytes.empty()) {
    const auto& rows = it->second.weight_stream_by_rows;
    return interpolate_log2(it->second.weight_stream_by_bytes, bytes) *
           (rows.empty() ? 1.0 : interpolate_log2(rows, std::max(m, 1.0)));
  }
  if (it != gemm.end() && it->second.weight_stream) return *it->second.weight_stream;
  const auto bf16 = gemm.find("bf16");
  if (bf16 != gemm.end() && bf16->second.weight_stream) return *bf16->second.weight_stream;
  return memory_efficiency(1e9);
}

double Calibration::memory_efficiency(double bytes) const {
  return memory.empty() ? 0.8 : interpolate_log2(memory, bytes);
}

double Calibration::error_band() const {
  if (tier == "measured") return 0.10;
  if (tier == "transferred") return 0.20;
  return 0.30;
}

Calibration parse_calibration(const data::DataFile& file) {
  const auto root = data::parse_toml(file);
  data::TomlEntry top(root, file.origin, file.name);
  const auto info = top.required_table("calibration");
  Calibration cal;
  cal.tier = "measured";
  cal.measured_gpu = info.required_string("gpu");
  cal.architecture = info.required_string("architecture");
  cal.bandwidth_gbs = info.optional_number("bandwidth_gbs", 1).value_or(0);
  cal.source = info.required_string("source");
  cal.files = info.string_list("files");
  if (const auto* gemm = root.get_as<toml::table>("gemm")) {
    for (const auto& [key, node] : *gemm) {
      const auto* t = node.as_table();
      if (!t) top.fail("gemm", "expected tables [gemm.<precision>]");
      data::TomlEntry entry(*t, file.origin, file.name, fmt::format("gemm.{}", key.str()));
      GemmCurve curve;
      curve.compute = parse_curve(entry, *t, "compute_efficiency");
      curve.weight_stream = entry.optional_number("weight_stream_efficiency", 0.01, 1.2);
      if (entry.has("weight_stream_by_bytes"))
        curve.weight_stream_by_bytes = parse_curve(entry, *t, "weight_stream_by_bytes");
      if (entry.has("weight_stream_by_rows"))
        curve.weight_stream_by_rows = parse_curve(entry, *t, "weight_stream_by_rows");
      cal.gemm[std::string(key.str())] = std::move(curve);
    }
  }
  if (const auto* memory = root.get_as<toml::table>("memory")) {
    data::TomlEntry entry(*memory, file.origin, file.name, "memory");
    cal.memory = parse_curve(entry, *memory, "efficiency_by_size");
  }
  if (const auto host = top.optional_table("host")) {
    cal.h2d_gbs = host->optional_number("h2d_gbs", 0);
    cal.d2h_gbs = host->optional_number("d2h_gbs", 0);
  }
  for (const auto& [name, target] : {std::pair{"allreduce", &cal.allreduce}, std::pair{"alltoall", &cal.alltoall}}) {
    if (const auto* table = root.get_as<toml::table>(name)) {
      *target = parse_collective(data::TomlEntry(*table, file.origin, file.name, name), *table, cal.source);
    }
  }
  return cal;
}

std::vector<Calibration> load_calibrations(const data::DataSource& source) {
  std::vector<Calibration> out;
  for (const auto& file : source.list("calibration", ".toml")) out.push_back(parse_calibration(file));
  return out;
}

Calibration calibration_from_results(const std::vector<results::ResultSet>& sets, const specs::GpuSpec& spec,
                                     const std::string& exclude_key) {
  const double bandwidth = spec.memory_bandwidth_gbs.value * 1e9;
  std::map<std::string, std::map<double, std::vector<double>>> compute;
  std::map<std::string, std::vector<double>> stream;
  // Memory-bound GEMM times by precision, shape (n, k) and m: the bytes curve takes each shape at its
  // fewest rows, the rows curve each shape's times at more rows against its time at one row.
  struct StreamPoint {
    double seconds, bytes;
  };
  std::map<std::string, std::map<std::pair<double, double>, std::map<double, std::vector<StreamPoint>>>> stream_shapes;
  std::map<double, std::vector<double>> memory;
  std::vector<double> h2d, d2h;
  std::vector<CollectivePoint> ar_points;  // all-reduce records
  std::vector<double> ar_busbw;
  std::vector<CollectivePoint> a2a_points;
  std::vector<double> a2a_busbw;
  // A left-out collective takes its twins at the same size with it (the header says why).
  std::optional<std::pair<CollectiveOp, double>> excluded_size;
  for (const auto& set : sets) {
    for (const auto& r : set.records) {
      if (r.key == exclude_key && collective_op(r))
        excluded_size.emplace(*collective_op(r), r.params.value("bytes", 0.0));
    }
  }
  Calibration cal;
  cal.tier = "measured";
  cal.measured_gpu = spec.name;
  cal.architecture = spec.architecture;
  cal.bandwidth_gbs = spec.memory_bandwidth_gbs.value;
  for (const auto& set : sets) {
    bool other_gpu = false;
    for (const auto& g : set.gpus) {
      if (!g.spec_name.empty() && g.spec_name != spec.name) other_gpu = true;
    }
    if (other_gpu) continue;
    bool used = false;
    for (const auto& r : set.records) {
      if (r.outcome != results::Outcome::passed || r.key == exclude_key) continue;
      const auto& p = r.params;
      if (r.benchmark == "gemm") {
        const auto* tp = r.find_metric("throughput");
        if (!tp || !p.contains("precision")) continue;
        std::string prec = p["precision"].get<std::string>();
        const auto peak_prec = specs::parse_precision(prec == "fp64" ? "fp64_tensor" : prec);
        const double eb = element_bytes(prec);
        if (!peak_prec || eb == 0 || !spec.peak_tflops(*peak_prec)) continue;
        const double peak = *spec.peak_tflops(*peak_prec) * 1e12;
        const double m = p.value("m", 0.0), n = p.value("n", 0.0), k = p.value("k", 0.0);
        const double flops = 2 * m * n * k, bytes = (m * k + k * n + m * n) * eb;
        const double t = flops / (tp->value * 1e12);
        if (flops / bytes > peak / bandwidth) {
          compute[prec][m].push_back(tp->value * 1e12 / peak);
        } else {
          stream[prec].push_back(bytes / t / bandwidth);
          stream_shapes[prec][{n, k}][m].push_back({t, bytes});
        }
        used = true;
      } else if (r.benchmark == "memory") {
        const auto* bw = r.find_metric("bandwidth");
        if (!bw || p.value("l2_resident", false) || p.value("op", "") == "ce_copy") continue;
        memory[p.value("array_bytes", 0.0)].push_back(bw->value * 1e9 / bandwidth);
        used = true;
      } else if (r.benchmark == "transfer") {
        const auto* bw = r.find_metric("bandwidth");
        if (!bw) continue;
        if (r.key.starts_with("transfer/h2d_ce_pinned/")) h2d.push_back(bw->value);
        if (r.key.starts_with("transfer/d2h_ce_pinned/")) d2h.push_back(bw->value);
        used = true;
      } else if (const auto op = collective_op(r)) {
        const bool a2a = *op == CollectiveOp::alltoall;
        const auto* time = r.find_metric("time");
        const auto* busbw = r.find_metric("busbw");
        const double bytes = p.value("bytes", 0.0);
        if (excluded_size && *excluded_size == std::pair{*op, bytes}) continue;
        const auto ranks = p.value("ranks", std::int64_t{2});
        if (time && bytes > 0) (a2a ? a2a_points : ar_points).push_back({bytes, microseconds(*time), ranks});
        if (busbw && bytes >= 64.0 * (1 << 20)) (a2a ? a2a_busbw : ar_busbw).push_back(busbw->value);
        used = true;
      }
    }
    if (used) cal.files.push_back(set.provenance.command_line.empty() ? set.kind : set.provenance.command_line[0]);
  }
  for (auto& [prec, by_m] : compute) {
    GemmCurve curve;
    for (auto& [m, v] : by_m) curve.compute.emplace_back(m, median(v));
    if (stream.contains(prec)) curve.weight_stream = median(stream[prec]);
    cal.gemm[prec] = std::move(curve);
  }
  for (auto& [prec, v] : stream) {
    if (!cal.gemm.contains(prec)) cal.gemm[prec].weight_stream = median(v);
    std::map<double, std::vector<double>> by_bytes, by_rows;
    for (auto& [shape, by_m] : stream_shapes[prec]) {
      const auto& [m0, fewest] = *by_m.begin();
      std::vector<double> t0;
      for (const auto& point : fewest) {
        by_bytes[point.bytes].push_back(point.bytes / point.seconds / bandwidth);
        t0.push_back(point.seconds);
      }
      if (m0 != 1) continue;
      const double one_row = median(t0);
      for (const auto& [m, points] : by_m) {
        if (m == m0) continue;
        std::vector<double> t;
        for (const auto& point : points) t.push_back(point.seconds);
        by_rows[m].push_back(one_row / median(t));
      }
    }
    auto& curve = cal.gemm[prec];
    for (auto& [bytes, e] : by_bytes) curve.weight_stream_by_bytes.emplace_back(bytes, median(e));
    if (!by_rows.empty()) curve.weight_stream_by_rows.emplace_back(1, 1.0);
    for (auto& [m, r] : by_rows) curve.weight_stream_by_rows.emplace_back(m, median(r));
  }
  for (auto& [bytes, v] : memory) cal.memory.emplace_back(bytes, median(v));
  if (!h2d.empty()) cal.h2d_gbs = median(h2d);
  if (!d2h.empty()) cal.d2h_gbs = median(d2h);
  cal.allreduce = fit_collective(ar_points, ar_busbw, "all-reduce");
  cal.alltoall = fit_collective(a2a_points, a2a_busbw, "all-to-all");
  if (cal.gemm.empty() && cal.memory.empty() && !cal.allreduce && !cal.alltoall) {
    throw UsageError(
        fmt::format("--calibration: no passed gemm, memory or collective records of {} in the files", spec.name));
  }
  cal.source = fmt::format("measured: {} result file(s) of {}", sets.size(), spec.name);
  return cal;
}

Calibration calibration_from_files(const std::vector<std::string>& files, const specs::SpecDb& db,
                                   const specs::GpuSpec* fallback) {
  std::vector<results::ResultSet> sets;
  for (const auto& f : files) sets.push_back(results::read_result_file(f));
  std::string spec_name;
  for (const auto& set : sets) {
    for (const auto& g : set.gpus) {
      if (!g.spec_name.empty() && spec_name.empty()) spec_name = g.spec_name;
    }
  }
  if (spec_name.empty() && !fallback) {
    throw UsageError(fmt::format("--calibration: {} names no GPU of the spec DB (gpus[].spec_name)", files.front()));
  }
  const auto& spec = spec_name.empty() ? *fallback : db.get(spec_name);
  auto cal = calibration_from_results(sets, spec);
  cal.files = files;
  cal.source = fmt::format("measured: --calibration {} ({})", fmt::join(files, " "), spec.name);
  return cal;
}

Calibration public_calibration(const specs::GpuSpec& target) {
  Calibration cal;
  cal.tier = "public";
  cal.architecture = target.architecture;
  cal.source =
      "public anchors: GEMM 0.33 @ m=64 -> 0.92 @ m=8192 (LLMCompass A100 cuBLAS FP16, C03), HBM 0.8 "
      "(aiconfigurator default; kipply/FT 0.77)";
  // m=64 on 12288^2 is memory-bound; the compute curve starts where the A100 GEMM turns compute-bound.
  GemmCurve bf16;
  bf16.compute = {{1024, 0.80}, {8192, 0.92}};
  bf16.weight_stream = 0.80;
  cal.gemm["bf16"] = bf16;
  cal.memory = {{1e9, 0.80}};
  cal.notes.push_back(
      "assumption: the A100 FP16 GEMM curve (C03) holds for every precision of this GPU; 1024 -> 0.80 is "
      "interpolated between C03's K=N=1024 M=8192 point (185/312 = 0.59 for small N·K) and its large-shape 0.92");
  return cal;
}

namespace {

double best_efficiency(const Curve& curve) {
  double best = 0;
  for (const auto& point : curve) best = std::max(best, point.second);
  return best;
}

// One efficiency moved by transfer_stream_curve's rule (ratio: target over source bandwidth).
double moved_efficiency(double efficiency, double best, double ratio) {
  return 1 / (1 / best + ratio * (1 / efficiency - 1 / best));
}

}  // namespace

Curve transfer_stream_curve(const Curve& curve, double from_gbs, double to_gbs) {
  if (curve.empty() || from_gbs <= 0 || to_gbs <= 0 || from_gbs == to_gbs) return curve;
  const double best = best_efficiency(curve);
  Curve out;
  out.reserve(curve.size());
  for (const auto& [bytes, eff] : curve) out.emplace_back(bytes, moved_efficiency(eff, best, to_gbs / from_gbs));
  return out;
}

Calibration calibration_for(const specs::GpuSpec& target, const std::vector<Calibration>& measured) {
  for (const auto& cal : measured) {
    if (cal.measured_gpu == target.name) return cal;
  }
  const double target_gbs = target.memory_bandwidth_gbs.value;
  // How far a table's curves would move: |log| of the bandwidth ratio; unknown bandwidths last.
  auto distance = [&](const Calibration& cal) {
    return cal.bandwidth_gbs > 0 && target_gbs > 0 ? std::abs(std::log(cal.bandwidth_gbs / target_gbs))
                                                   : std::numeric_limits<double>::infinity();
  };
  const Calibration* nearest = nullptr;
  for (const auto& cal : measured) {
    if (cal.architecture.empty() || cal.architecture != target.architecture) continue;
    if (!nearest || distance(cal) < distance(*nearest)) nearest = &cal;
  }
  if (!nearest) return public_calibration(target);
  const Calibration& cal = *nearest;
  Calibration out = cal;
  out.tier = "transferred";
  const double from = cal.bandwidth_gbs, to = target_gbs;
  const bool move = from > 0 && to > 0 && from != to;
  out.source = move ? fmt::format(
                          "transferred from {} ({} family; peaks and bandwidth of {}, compute efficiencies shared, "
                          "memory-bound ones moved to that bandwidth): {}",
                          cal.measured_gpu, cal.architecture, target.name, cal.source)
                    : fmt::format("transferred from {} ({} family; efficiencies shared, peaks and bandwidth of {}): {}",
                                  cal.measured_gpu, cal.architecture, target.name, cal.source);
  if (move) {
    for (auto& [precision, curve] : out.gemm) {
      // The median over shapes has no size: moved as a point of the bytes curve, whose best it shares.
      const double best = std::max(best_efficiency(curve.weight_stream_by_bytes), curve.weight_stream.value_or(0));
      if (curve.weight_stream) curve.weight_stream = moved_efficiency(*curve.weight_stream, best, to / from);
      curve.weight_stream_by_bytes = transfer_stream_curve(curve.weight_stream_by_bytes, from, to);
    }
    out.memory = transfer_stream_curve(out.memory, from, to);
    out.notes.push_back(
        fmt::format("ASSUMPTION: memory-bound efficiencies moved from {:.0f} to {:.0f} GB/s with their time above the "
                    "best point's rate kept as fixed latency (calibration.hpp, transfer_stream_curve)",
                    from, to));
  }
  out.allreduce.reset();  // fabrics differ between SKUs (H800, H20): use the spec of the target
  out.alltoall.reset();
  out.h2d_gbs.reset();
  out.d2h_gbs.reset();
  return out;
}

CollectiveModel collective_model(const specs::GpuSpec& target, const Calibration& cal, std::int64_t gpus) {
  if (gpus > 8) {
    const bool ndr = target.release_year >= 2022;
    return line_model(ndr ? 40.0 : 60.0, ndr ? 40.0 : 20.0,
                      ndr ? "public: InfiniBand NDR 400 Gb/s per GPU ~40-45 GB/s busbw, α >= 60 us cross-node "
                            "(modeling.md 4.5; C02: 17.5 GB/s at 2 A100 nodes) - assumption 40 GB/s, 40 us"
                          : "public: InfiniBand HDR 200 Gb/s per GPU, 20 GB/s busbw (C02: 17.5 GB/s), α 60 us");
  }
  if (cal.allreduce && cal.tier == "measured") return *cal.allreduce;
  if (target.scale_up == "nvlink" && target.scale_up_bw_gbs_bidir && !target.bridge_only) {
    const double uni = target.scale_up_bw_gbs_bidir->value / 2;
    const int gen = static_cast<int>(target.nvlink_gen.value_or(4));
    if (gen >= 4) {
      return line_model(20, uni * 0.82,
                        fmt::format("public: NVLink{} {:.0f} GB/s/dir x 0.82 (C01: 365-374 GB/s busbw on 8xH100); "
                                    "α 20 us (C01 fit 20-40 us)",
                                    gen, uni));
    }
    return line_model(45, uni * 0.58,
                      fmt::format("public: NVLink{} {:.0f} GB/s/dir x 0.58 (C02: 174 GB/s busbw on 8xA100); α 45 "
                                  "us (C02 fit 45-90 us)",
                                  gen, uni));
  }
  const double pcie_gen = target.pcie_gen ? target.pcie_gen->value : 4;
  return line_model(30, pcie_gen >= 5 ? 45.0 : 20.0,
                    "public: PCIe Gen4/5 x16 all-reduce busbw ~20/45 GB/s (modeling.md 4.5), α 30 us");
}

CollectiveModel alltoall_model(const specs::GpuSpec& target, const Calibration& cal, std::int64_t gpus) {
  if (gpus <= 8 && cal.alltoall && cal.tier == "measured") return *cal.alltoall;
  auto model = collective_model(target, cal, gpus);
  if (gpus <= 8) model.source = "ASSUMPTION: all-to-all busbw = the all-reduce figure; " + model.source;
  return model;
}

double alltoall_seconds(const CollectiveModel& model, double bytes, std::int64_t gpus) {
  return collective_seconds(model, bytes, gpus, alltoall_factor);
}

double allreduce_seconds(const CollectiveModel& model, double bytes, std::int64_t gpus) {
  return collective_seconds(model, bytes, gpus, allreduce_factor);
}

}  // namespace gpuscout::model
