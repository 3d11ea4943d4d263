// Drift analysis over kept outputs.
#include "check/drift.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "check/results.hpp"

namespace kv {

namespace {

using nlohmann::json;

/// Bits as an integer that orders like the values (sign-magnitude to a number line), so
/// the difference of two is their distance in ulps.
int64_t ordered(uint32_t bits, int width) {
  const uint32_t sign = width == 4 ? 0x80000000u : 0x8000u;
  const int64_t mag = bits & (sign - 1);
  return (bits & sign) ? -mag : mag;
}

bool is_nan(uint32_t bits, DType d) { return is_float(d) && is_nan_bits(d, bits); }

bool inside(const json& r) {
  const std::string v = r.value("verdict", "");
  return v == "pass" || v == "unverifiable";
}

json stats_json(const DriftStats& s) {
  return {{"identical", s.n_diff == 0}, {"n_diff", s.n_diff}, {"max_ulps", std::isinf(s.max_ulps) ? json("inf") : json(s.max_ulps)}};
}

std::string fmt(double v) {
  if (std::isinf(v)) return "inf";
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

DriftStats compare_outputs(const StoredTensor& a, const StoredTensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size() || a.f64 || b.f64)
    throw std::runtime_error("outputs of different dtype or shape cannot be compared");
  const int w = static_cast<int>(dtype_size(a.dtype));
  const size_t n = a.bytes.size() / static_cast<size_t>(w);
  DriftStats s;
  for (size_t i = 0; i < n; ++i) {
    uint32_t x = 0, y = 0;
    std::memcpy(&x, a.bytes.data() + i * w, w);
    std::memcpy(&y, b.bytes.data() + i * w, w);
    if (x == y) continue;
    ++s.n_diff;
    const bool nx = is_nan(x, a.dtype), ny = is_nan(y, a.dtype);
    if (nx && ny) continue;  // two NaN payloads: the same value
    const double d = (nx || ny || a.dtype == DType::i32) ? std::numeric_limits<double>::infinity()
                                                          : std::fabs(static_cast<double>(ordered(x, w) - ordered(y, w)));
    s.max_ulps = std::max(s.max_ulps, d);
  }
  return s;
}

namespace {

/// One config's entry: verdicts, claims, run-to-run and forecast changes per output; a
/// broken run_to_run or gpu_invariant claim goes to `violations`.
json config_entry(const DriftConfig& c, const std::vector<std::string>& names, const std::string& forecast_profile,
                  json& violations) {
  auto violation = [&](const std::string& s) { violations.push_back(s); };
  json cj = {{"config", c.config}, {"verdicts", json::array()}, {"run_to_run", json::object()},
             {"forecast", json::object()}, {"claims", json::object()}};
  for (auto& r : c.repeats) cj["verdicts"].push_back(r.result.value("verdict", "?"));
  for (auto& n : names) {
    json claimed = json::array();
    for (const char* k : {"run_to_run", "config_invariant", "gpu_invariant", "batch_invariant"})
      if (claims(c.repeats[0].result, n, k)) claimed.push_back(k);
    cj["claims"][n] = claimed;
    DriftStats worst;
    for (size_t k = 1; k < c.repeats.size(); ++k) {
      DriftStats s = compare_outputs(c.repeats[0].outputs.at(n), c.repeats[k].outputs.at(n));
      if (s.n_diff > worst.n_diff) worst.n_diff = s.n_diff;
      worst.max_ulps = std::max(worst.max_ulps, s.max_ulps);
    }
    cj["run_to_run"][n] = stats_json(worst);
    if (worst.n_diff > 0 && claims(c.repeats[0].result, n, "run_to_run"))
      violation(n + " of config " + c.config + " claims run_to_run but " + std::to_string(worst.n_diff) +
                " elements changed between repeats (max " + fmt(worst.max_ulps) + " ulps)");
    if (c.forecast) {
      DriftStats f = compare_outputs(c.repeats[0].outputs.at(n), c.forecast->outputs.at(n));
      cj["forecast"][n] = stats_json(f);
      cj["forecast"][n]["changes"] = f.n_diff > 0;
      if (f.n_diff > 0 && claims(c.repeats[0].result, n, "gpu_invariant"))
        violation(n + " of config " + c.config + " claims gpu_invariant but its bits would change under " +
                  forecast_profile + " (" + std::to_string(f.n_diff) + " elements, max " + fmt(f.max_ulps) + " ulps)");
    }
  }
  return cj;
}

/// Output n across configs, first repeats: the max ulp distance matrix, each pair's class
/// and the groups of identical bits; a broken config_invariant claim goes to `violations`.
json across_configs(const std::vector<DriftConfig>& configs, const std::string& n, json& violations) {
  const size_t k = configs.size();
  json m = json::array(), cls = json::array(), groups = json::array();
  std::vector<int> group(k, -1);
  // Distances are symmetric and zero on the diagonal: each pair is compared once.
  std::vector<DriftStats> d(k * k);
  for (size_t i = 0; i < k; ++i)
    for (size_t j = i + 1; j < k; ++j)
      d[i * k + j] = d[j * k + i] = compare_outputs(configs[i].repeats[0].outputs.at(n), configs[j].repeats[0].outputs.at(n));
  for (size_t i = 0; i < k; ++i) {
    json row = json::array(), crow = json::array();
    for (size_t j = 0; j < k; ++j) {
      const DriftStats& s = d[i * k + j];
      row.push_back(std::isinf(s.max_ulps) ? json("inf") : json(s.max_ulps));
      const bool both_in = inside(configs[i].repeats[0].result) && inside(configs[j].repeats[0].result);
      crow.push_back(s.n_diff == 0 ? "identical" : (both_in ? "inside" : "outside"));
      if (s.n_diff == 0 && group[i] < 0 && j < i) group[i] = group[j];
    }
    if (group[i] < 0) {
      group[i] = static_cast<int>(groups.size());
      groups.push_back(json::array());
    }
    groups[group[i]].push_back(configs[i].config);
    m.push_back(row);
    cls.push_back(crow);
  }
  if (groups.size() > 1)
    for (size_t i = 0; i < k; ++i)
      if (claims(configs[i].repeats[0].result, n, "config_invariant")) {
        violations.push_back(n + " of config " + configs[i].config + " claims config_invariant but the configs give " +
                             std::to_string(groups.size()) + " different results");
        break;
      }
  return {{"max_ulps_matrix", m}, {"classes", cls}, {"identical_groups", groups}};
}

}  // namespace

json analyze_drift(const std::vector<DriftConfig>& configs, const std::string& forecast_profile) {
  json rep = {{"forecast_profile", forecast_profile}, {"configs", json::array()}, {"outputs", json::object()},
              {"violations", json::array()}};
  if (configs.empty() || configs[0].repeats.empty()) return rep;
  const json& r0 = configs[0].repeats[0].result;
  rep["op"] = r0.value("op", "");
  rep["impl"] = r0.value("impl", "");
  rep["input_id"] = r0.value("input_id", "");
  rep["repeat"] = configs[0].repeats.size();
  std::vector<std::string> names;
  for (auto& [n, t] : configs[0].repeats[0].outputs) names.push_back(n);
  for (auto& c : configs) rep["configs"].push_back(config_entry(c, names, forecast_profile, rep["violations"]));
  // Config x config, first repeats: max ulp distance and class; groups of identical bits.
  for (auto& n : names) rep["outputs"][n] = across_configs(configs, n, rep["violations"]);
  return rep;
}

std::string drift_markdown(const json& rep) {
  std::ostringstream o;
  o << "# Drift: " << rep.value("op", "") << " " << rep.value("impl", "") << "\n\n";
  o << "- " << rep["configs"].size() << " configs, " << rep.value("repeat", 0) << " runs each";
  if (!rep.value("forecast_profile", "").empty()) o << "; forecast under `" << rep["forecast_profile"].get<std::string>() << "`";
  o << "\n- violations: " << rep["violations"].size() << "\n";
  for (auto& v : rep["violations"]) o << "  - " << v.get<std::string>() << "\n";
  for (auto& [n, out] : rep["outputs"].items()) {
    o << "\n## " << n << "\n\n" << out["identical_groups"].size() << " groups of configs with identical bits:\n";
    int g = 0;
    for (auto& grp : out["identical_groups"]) {
      o << "- group " << g++ << ":";
      for (auto& c : grp) o << " `" << c.get<std::string>() << "`";
      o << "\n";
    }
    o << "\n| config | verdicts | claims | run to run | forecast |\n|---|---|---|---|---|\n";
    for (auto& c : rep["configs"]) {
      std::string verdicts, cl;
      for (auto& v : c["verdicts"]) verdicts += (verdicts.empty() ? "" : ",") + v.get<std::string>();
      for (auto& x : c["claims"][n]) cl += (cl.empty() ? "" : " ") + x.get<std::string>();
      const json& rr = c["run_to_run"][n];
      std::string r2r = rr["identical"].get<bool>() ? "identical" : std::to_string(rr["n_diff"].get<int64_t>()) + " differ, max " + rr["max_ulps"].dump() + " ulps";
      std::string fc = "-";
      if (c["forecast"].contains(n)) {
        const json& f = c["forecast"][n];
        fc = f["changes"].get<bool>() ? "**changes**: " + std::to_string(f["n_diff"].get<int64_t>()) + " elements, max " + f["max_ulps"].dump() + " ulps"
                                      : "same bits";
      }
      o << "| `" << c["config"].get<std::string>() << "` | " << verdicts << " | " << cl << " | " << r2r << " | " << fc << " |\n";
    }
  }
  return o.str();
}

}  // namespace kv
