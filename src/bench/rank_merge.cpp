#include "gpuscout/bench/rank_merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "gpuscout/bench/nccl_choice.hpp"

namespace gpuscout::bench {

nlohmann::ordered_json to_json(const RankInfo& info) {
  nlohmann::ordered_json j;
  j["rank"] = info.rank;
  j["local_rank"] = info.local_rank;
  j["host"] = info.host;
  j["pid"] = info.pid;
  j["gpu"] = info.gpu;
  j["gpu_name"] = info.gpu_name;
  j["pci_bus_id"] = info.pci_bus_id;
  j["uuid"] = info.uuid;
  return j;
}

RankInfo rank_info_from_json(const nlohmann::ordered_json& j) {
  RankInfo r;
  r.rank = j.value("rank", 0);
  r.local_rank = j.value("local_rank", 0);
  r.host = j.value("host", "");
  r.pid = j.value("pid", 0L);
  r.gpu = j.value("gpu", -1);
  r.gpu_name = j.value("gpu_name", "");
  r.pci_bus_id = j.value("pci_bus_id", "");
  r.uuid = j.value("uuid", "");
  return r;
}

report::Table rank_table(const std::vector<RankInfo>& ranks) {
  report::Table t;
  t.key = "ranks";
  t.title = "Ranks";
  t.add_column("rank", "Rank", "", -1, report::Align::right);
  t.add_column("host", "Host");
  t.add_column("pid", "PID", "", -1, report::Align::right);
  t.add_column("local_rank", "Local rank", "", -1, report::Align::right);
  t.add_column("gpu", "GPU", "", -1, report::Align::right);
  t.add_column("gpu_name", "Name");
  t.add_column("pci_bus_id", "PCI bus id");
  for (const RankInfo& r : ranks) {
    t.add_row({std::int64_t{r.rank}, r.host, std::int64_t{r.pid}, std::int64_t{r.local_rank}, std::int64_t{r.gpu},
               r.gpu_name, r.pci_bus_id});
  }
  return t;
}

int outcome_severity(results::Outcome outcome) {
  switch (outcome) {
    case results::Outcome::timeout:
      return 5;
    case results::Outcome::failed:
      return 4;
    case results::Outcome::incorrect:
      return 3;
    case results::Outcome::not_supported:
      return 2;
    case results::Outcome::skipped:
      return 1;
    case results::Outcome::passed:
      return 0;
  }
  return 0;
}

namespace {

bool is_distributed(const results::Record& r) {
  return r.extra.contains("distributed") && r.extra["distributed"].is_boolean() && r.extra["distributed"].get<bool>();
}

double param_number(const results::Record& r, const char* name, double fallback) {
  if (r.params.contains(name) && r.params[name].is_number()) return r.params[name].get<double>();
  return fallback;
}

results::Record merge_one(const std::vector<const results::Record*>& parts, const std::vector<int>& ranks) {
  results::Record out = *parts.front();
  std::set<int> gpus;
  std::uint64_t wrong = 0;
  bool any_wrong_field = false, verified = true, any_verified_field = false;
  std::vector<std::string> reasons;
  nlohmann::ordered_json per_rank_time = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const results::Record& p = *parts[i];
    for (int g : p.gpus) gpus.insert(g);
    if (outcome_severity(p.outcome) > outcome_severity(out.outcome)) out.outcome = p.outcome;
    if (!p.reason.empty()) {
      const std::string line = fmt::format("rank {}: {}", ranks[i], p.reason);
      if (std::find(reasons.begin(), reasons.end(), line) == reasons.end()) reasons.push_back(line);
    }
    if (p.extra.contains("wrong_values") && p.extra["wrong_values"].is_number()) {
      wrong += p.extra["wrong_values"].get<std::uint64_t>();
      any_wrong_field = true;
    }
    if (p.extra.contains("verified") && p.extra["verified"].is_boolean()) {
      verified = verified && p.extra["verified"].get<bool>();
      any_verified_field = true;
    }
    const results::Metric* t = p.find_metric("time");
    per_rank_time.push_back(t != nullptr ? nlohmann::ordered_json(t->value) : nlohmann::ordered_json(nullptr));
  }
  out.gpus.assign(gpus.begin(), gpus.end());
  if (parts.size() > 1) {
    out.reason.clear();
    for (std::size_t i = 0; i < reasons.size(); ++i) out.reason += (i ? "; " : "") + reasons[i];
  }
  if (any_wrong_field) out.extra["wrong_values"] = wrong;
  if (any_verified_field) out.extra["verified"] = verified;
  out.extra["ranks_merged"] = static_cast<int>(parts.size());
  // What NCCL chose, as each rank's plugin saw it: every rank's entries, summarised again.
  if (out.extra.contains("nccl_choice_by_rank")) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto* p : parts) {
      if (!p->extra.contains("nccl_choice_by_rank")) continue;
      for (const auto& e : p->extra["nccl_choice_by_rank"]) all.push_back(e);
    }
    out.extra["nccl_choice_by_rank"] = std::move(all);
    summarize_nccl_choice(out.extra);
  }
  out.extra["per_rank_time_us"] = per_rank_time;

  // Time: the mean over ranks of each rank's statistic (nccl-tests -a 1); spread: widest ends.
  std::vector<const results::Metric*> times;
  for (const auto* p : parts) {
    if (const auto* t = p->find_metric("time")) times.push_back(t);
  }
  if (times.size() != parts.size() || times.empty()) return out;
  results::Metric time = *times.front();
  double sum = 0;
  std::int64_t samples = 0;
  bool spreads = true;
  results::Spread s{1e300, 0, 0, 0, 0, 0};
  for (const auto* t : times) {
    sum += t->value;
    samples = std::max(samples, t->samples);
    if (!t->spread) {
      spreads = false;
      continue;
    }
    s.min = std::min(s.min, t->spread->min);
    s.max = std::max(s.max, t->spread->max);
    s.p10 += t->spread->p10 / static_cast<double>(times.size());
    s.p90 += t->spread->p90 / static_cast<double>(times.size());
    s.mean += t->spread->mean / static_cast<double>(times.size());
    s.stddev = std::max(s.stddev, t->spread->stddev);
  }
  time.value = sum / static_cast<double>(times.size());
  time.samples = samples;
  time.statistic = times.front()->statistic + ", mean over ranks";
  time.spread = spreads ? std::optional<results::Spread>(s) : std::nullopt;
  const double bytes = param_number(out, "bus_bytes", -1);
  const double factor = param_number(out, "busbw_factor", -1);
  for (results::Metric& m : out.metrics) {
    if (m.name == "time") {
      m = time;
    } else if ((m.name == "algbw" || m.name == "busbw") && bytes >= 0 && factor >= 0 && time.value > 0) {
      // Time in us; GB/s = bytes / 1e9 / s.
      const double f = m.name == "busbw" ? factor : 1.0;
      auto rate = [&](double us) { return us > 0 ? bytes / 1e3 / us * f : 0.0; };
      m.value = rate(time.value);
      m.samples = time.samples;
      m.statistic = time.statistic;
      if (time.spread) {
        const auto& ts = *time.spread;
        m.spread = results::Spread{rate(ts.max), rate(ts.min), rate(ts.p90), rate(ts.p10), rate(ts.mean), 0};
      } else {
        m.spread.reset();
      }
    }
  }
  return out;
}

}  // namespace

std::vector<results::Record> merge_rank_records(const std::vector<std::vector<results::Record>>& by_rank) {
  std::vector<results::Record> out;
  const bool several = by_rank.size() > 1;
  // Distributed records by key, in first-seen order (rank 0 first).
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::vector<const results::Record*>, std::vector<int>>> groups;
  struct Slot {
    bool distributed;
    std::string key;
    const results::Record* record;
    int rank;
  };
  std::vector<Slot> slots;
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    for (const results::Record& rec : by_rank[r]) {
      if (is_distributed(rec)) {
        auto& g = groups[rec.key];
        if (g.first.empty()) slots.push_back({true, rec.key, nullptr, static_cast<int>(r)});
        g.first.push_back(&rec);
        g.second.push_back(static_cast<int>(r));
      } else {
        slots.push_back({false, rec.key, &rec, static_cast<int>(r)});
      }
    }
  }
  for (const Slot& s : slots) {
    if (s.distributed) {
      const auto& g = groups[s.key];
      results::Record merged = merge_one(g.first, g.second);
      if (several && g.first.size() != by_rank.size()) {
        std::vector<int> missing;
        for (int r = 0; r < static_cast<int>(by_rank.size()); ++r) {
          if (std::find(g.second.begin(), g.second.end(), r) == g.second.end()) missing.push_back(r);
        }
        merged.extra["missing_ranks"] = missing;
        if (outcome_severity(merged.outcome) < outcome_severity(results::Outcome::failed)) {
          merged.outcome = results::Outcome::failed;
          merged.reason = fmt::format("{} of {} ranks reported this case", g.first.size(), by_rank.size());
        }
      }
      out.push_back(std::move(merged));
    } else {
      results::Record copy = *s.record;
      if (several) {
        copy.key = fmt::format("rank{}/{}", s.rank, copy.key);
        copy.extra["rank"] = s.rank;
      }
      out.push_back(std::move(copy));
    }
  }
  return out;
}

}  // namespace gpuscout::bench
