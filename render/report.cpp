// Building the tolerance report's JSON model from result lines (see report.hpp).
#include "render/report.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "check/results.hpp"
#include "check/tolerance.hpp"
#include "core/case.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace kv {

using json = nlohmann::json;

namespace {

std::string joined(const json& obj, char kv_sep) {
  std::string s;
  if (!obj.is_object()) return s;
  for (auto& [k, v] : obj.items()) s += (s.empty() ? "" : ",") + k + kv_sep + (v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// The upstream tolerances OPS.md quotes ("What the upstream tests did").
json upstream_tolerance(const std::string& op, const std::string& dtype) {
  const std::string base = op.substr(0, op.find('.'));
  if (base == "rms_norm" && dtype == "bf16") return {{"atol", 0.2}, {"rtol", nullptr}, {"source", "OPS.md: RMSNorm bf16 atol 0.2"}};
  if (base == "swiglu" && dtype == "bf16") return {{"atol", 1e4}, {"rtol", nullptr}, {"source", "OPS.md: SwiGLU bf16 atol 1e4"}};
  return nullptr;
}

/// Identity: devices by UUID (with profile overrides), builds, runs.
json identity(const std::vector<json>& lines, const ReportOptions& opt) {
  std::map<std::string, json> devices, builds;
  std::set<std::string> runs;
  for (auto& j : lines) {
    if (j.contains("device")) {
      json d = j["device"];
      devices[d.value("uuid", "") + "|" + d["profile"].value("overrides", "")] = d;
    }
    if (j.contains("build")) builds[j["build"].dump()] = j["build"];
    runs.insert(j.value("run_id", ""));
  }
  json id = {{"devices", json::array()}, {"builds", json::array()}, {"runs", runs}, {"sources", opt.sources}};
  for (auto& [k, d] : devices) id["devices"].push_back(d);
  for (auto& [k, b] : builds) id["builds"].push_back(b);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  id["generated"] = buf;
  return id;
}

struct OutAcc {
  int64_t elements = 0, unverifiable = 0, fail = 0, diff_rn = 0, cases = 0;
  // -1: no case recorded it (result lines from before kverify wrote p50 and p99 ulps).
  double p50_ulps = -1, p99_ulps = -1, max_ulps = -1, p50_ratio = -1, p99_ratio = -1, max_ratio = -1;
  double bias_weighted = 0;  // sum of bias_ulps x elements
  double max_used = -1;       // null in the model when any case lacks it (lines from before max_used)
  int64_t used_missing = 0;
  void add(const json& o) {
    const int64_t n = o.value("n", int64_t(0));
    ++cases, elements += n, unverifiable += o.value("n_unverifiable", int64_t(0)), fail += o.value("n_fail", int64_t(0));
    diff_rn += o.value("n_diff_rn", int64_t(0));
    auto mx = [&](double& a, const char* k) { if (o.contains(k)) a = std::max(a, result_number_value(o[k])); };
    mx(p50_ulps, "p50_ulps"), mx(p99_ulps, "p99_ulps"), mx(max_ulps, "max_ulps");
    mx(p50_ratio, "p50_ratio"), mx(p99_ratio, "p99_ratio"), mx(max_ratio, "max_ratio");
    if (o.contains("max_used")) mx(max_used, "max_used"); else ++used_missing;
    if (o.contains("bias_ulps")) bias_weighted += result_number_value(o["bias_ulps"]) * static_cast<double>(n);
  }
  json to_json() const {
    const double e = static_cast<double>(std::max<int64_t>(elements, 1));
    auto q = [](double x) { return x < 0 ? json() : result_number(x); };
    return {{"cases", cases}, {"elements", elements}, {"n_fail", fail},
            {"unverifiable_share", static_cast<double>(unverifiable) / e}, {"diff_rn_share", static_cast<double>(diff_rn) / e},
            {"ulps", {{"p50", q(p50_ulps)}, {"p99", q(p99_ulps)}, {"max", q(max_ulps)}}},
            {"ratio", {{"p50", q(p50_ratio)}, {"p99", q(p99_ratio)}, {"max", q(max_ratio)}}},
            {"used", used_missing ? json() : q(max_used)},
            {"bias_ulps", bias_weighted / e}};
  }
};

struct Group {
  json key;
  std::map<std::string, int64_t> verdicts;
  std::map<std::string, OutAcc> outs;
  int64_t largest = -1;
  std::string largest_shape;
  std::vector<double> kernel_ms;  // at the largest shape
};

json groups_of(const std::vector<json>& lines) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Group> g;
  for (auto& j : lines) {
    const std::string op = j.value("op", ""), impl = j.value("impl", ""), dt = joined(j.value("dtypes", json::object()), ':'),
                      cfg = joined(j.value("config", json::object()), '=');
    Group& gr = g[{op, impl, dt, cfg}];
    gr.key = {{"op", op}, {"impl", impl}, {"dtype", j.value("dtype", "")}, {"dtypes", dt}, {"config", cfg}};
    ++gr.verdicts[j.value("verdict", "error")];
    if (j.contains("outputs"))
      for (auto& [name, o] : j["outputs"].items()) gr.outs[name].add(o);
    if (j.contains("shape") && j.contains("timings") && j["timings"].contains("kernel_ms")) {
      const auto shape = j["shape"].get<std::vector<int64_t>>();
      const int64_t n = numel(shape);
      if (n > gr.largest) gr.largest = n, gr.largest_shape = shape_str(shape), gr.kernel_ms.clear();
      if (n == gr.largest) gr.kernel_ms.push_back(result_number_value(j["timings"]["kernel_ms"]));
    }
  }
  json out = json::array();
  for (auto& [k, gr] : g) {
    json r = gr.key;
    r["verdicts"] = gr.verdicts;
    int64_t cases = 0;
    for (auto& [v, c] : gr.verdicts) cases += c;
    r["cases"] = cases;
    r["outputs"] = json::object();
    for (auto& [name, acc] : gr.outs) r["outputs"][name] = acc.to_json();
    if (gr.largest >= 0) r["speed"] = {{"shape", gr.largest_shape}, {"kernel_ms_median", result_number(median(gr.kernel_ms))},
                                       {"runs", gr.kernel_ms.size()}};
    out.push_back(r);
  }
  return out;
}

json tolerances_of(const std::vector<json>& lines, double safety) {
  struct Acc {
    json key;
    std::vector<TolPoint> pts;
    int64_t cases = 0, elements = 0, failing = 0;
    bool have_points = true;
  };
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, Acc> t;
  for (auto& j : lines) {
    if (!j.contains("outputs") || j.value("verdict", "") == "error") continue;
    for (auto& [name, o] : j["outputs"].items()) {
      const std::string out_dt = j["dtypes"].value(name, j.value("dtype", ""));
      Acc& a = t[{j.value("op", ""), j.value("impl", ""), j.value("dtype", ""), j.value("dist", ""), name}];
      a.key = {{"op", j.value("op", "")}, {"impl", j.value("impl", "")}, {"dtype", j.value("dtype", "")},
               {"dist", j.value("dist", "")}, {"output", name}, {"output_dtype", out_dt}};
      ++a.cases, a.elements += o.value("n", int64_t(0));
      if (o.value("verdict", "") == "fail") ++a.failing;
      if (!o.contains("tol_points")) {
        a.have_points = false;
        continue;
      }
      auto p = tol_points_from_json(o["tol_points"]);
      a.pts.insert(a.pts.end(), p.begin(), p.end());
    }
  }
  json out = json::array();
  for (auto& [k, a] : t) {
    json r = a.key;
    r["cases"] = a.cases, r["elements"] = a.elements;
    const auto [da, dr] = torch_default_tolerance(a.key["output_dtype"]);
    const auto front = tol_frontier(a.pts);
    r["torch_default"] = {{"atol", da}, {"rtol", dr}, {"covers", tol_covers(front, {da, dr})},
                          {"share", result_number(tol_share(front, {da, dr}))}};
    r["upstream"] = upstream_tolerance(a.key["op"], a.key["output_dtype"]);
    if (!a.have_points) {
      r["note"] = "result lines without tol_points (written before kverify recorded them)";
    } else {
      const TolPair p = smallest_pair(front, da, dr);
      r["observed"] = {{"atol", p.atol}, {"rtol", p.rtol}};
      // The two single-term pairs, for tests that take one knob only.
      double atol_only = 0, rtol_only = 0;
      const TolPoint* worst = nullptr;  // the element that sets rtol alone
      for (const TolPoint& q : front) {
        atol_only = std::max(atol_only, q.err);
        const double rel = q.v > 0 ? q.err / q.v : INFINITY;
        if (rel > rtol_only || !worst) rtol_only = rel, worst = &q;
      }
      r["atol_only"] = result_number(atol_only * safety);
      // A relative tolerance of 1 or more admits any value of the right sign: no rtol alone
      // means anything there (elements at or near 0 need atol); said so rather than 2.6e+275.
      if (rtol_only * safety < 1) {
        r["rtol_only"] = result_number(rtol_only * safety);
      } else {
        r["rtol_only"] = nullptr;
        std::ostringstream why;
        why << "n/a: an element with |expected| " << worst->v << " errs by " << worst->err << " (relative "
            << (worst->v > 0 ? worst->err / worst->v : INFINITY) << "); near 0 only atol covers it";
        r["rtol_only_note"] = why.str();
      }
      // A tolerance fitted to a kernel that fails its contract would bless the bug.
      if (a.failing > 0) r["note"] = std::to_string(a.failing) + " of " + std::to_string(a.cases) + " cases fail: none recommended";
      else r["recommended"] = {{"atol", p.atol * safety}, {"rtol", p.rtol * safety}};
      r["frontier"] = tol_points_json(front);
    }
    out.push_back(r);
  }
  return out;
}

/// Per op, per case and output: reduction length (the row length for impls whose contract
/// reduces along rows; the number of rows for the parameter gradients dw and db, which sum
/// over rows), and at the worst element (largest error over the enclosure's half-width) the
/// error and the half-width, both in the output's ulps there.
json reduction_of(const std::vector<json>& lines) {
  json by_op = json::object();
  for (auto& j : lines) {
    if (!j.contains("outputs") || !j.contains("contract") || !j["contract"].contains("reductions") ||
        !j["contract"]["reductions"].contains("row") || !j.contains("shape") || j["shape"].empty())
      continue;
    const int64_t row = j["shape"].back().get<int64_t>();
    const int64_t rows = numel(j["shape"].get<std::vector<int64_t>>()) / std::max<int64_t>(row, 1);
    for (auto& [name, o] : j["outputs"].items()) {
      auto dt = parse_dtype(j["dtypes"].value(name, ""));
      if (!dt || !o.contains("bound")) continue;
      const json& b = o["bound"];
      const double v = result_number_value(b["v"]), out = result_number_value(b["out"]), lo = result_number_value(b["admissible_lo"]), hi = result_number_value(b["admissible_hi"]);
      const double u = ulp(*dt, std::isfinite(v) ? v : max_finite(*dt));
      const double hw = std::max(hi - v, v - lo) / u, err = std::fabs(out - v) / u;
      if (!std::isfinite(hw) || !std::isfinite(err)) continue;
      const bool over_rows = name == "dw" || name == "db";
      by_op[j.value("op", "")].push_back({{"impl", j.value("impl", "")}, {"dtype", j.value("dtype", "")}, {"output", name},
                                          {"n", over_rows ? rows : row}, {"err_ulps", err}, {"half_width_ulps", hw},
                                          {"v", result_number(v)}, {"output_dtype", dtype_name(*dt)}});
    }
  }
  return by_op;
}

/// Per drift analysis and output: which configs' bits change under the forecast profile
/// (deterministic ones: a prediction for a GPU of that profile), which keep them, and which
/// change run to run already.
json forecast_of(const std::vector<json>& drifts) {
  json out = json::array();
  for (auto& d : drifts) {
    const std::string fp = d.value("forecast_profile", "");
    if (fp.empty() || !d.contains("outputs")) continue;
    for (auto& [name, o] : d["outputs"].items()) {
      json r = {{"op", d.value("op", "")}, {"impl", d.value("impl", "")}, {"output", name}, {"profile", fp},
                {"changes", json::array()}, {"same", json::array()}, {"run_to_run", json::array()}};
      for (auto& c : d["configs"]) {
        const json rr = c.value("run_to_run", json::object()).value(name, json::object());
        const json f = c.value("forecast", json::object()).value(name, json::object());
        if (!rr.value("identical", true)) r["run_to_run"].push_back(c["config"]);
        else if (f.value("changes", false)) r["changes"].push_back(c["config"]);
        else r["same"].push_back(c["config"]);
      }
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

std::pair<double, double> torch_default_tolerance(const std::string& dtype) {
  if (dtype == "fp16") return {1e-5, 1e-3};
  if (dtype == "bf16") return {1e-5, 1.6e-2};
  if (dtype == "fp64") return {1e-7, 1e-7};
  return {1e-5, 1.3e-6};
}

/// The unverifiable cases listed with their replay lines (the counts are in summary).
constexpr size_t kUnverifiableListed = 100;

json build_report(const std::vector<json>& lines, const std::vector<json>& drifts, const ReportOptions& opt) {
  json r = {{"schema", "kverify-report/1"}, {"title", opt.title}};
  r["identity"] = identity(lines, opt);
  std::map<std::string, std::map<std::string, int64_t>> by_op;
  std::map<std::string, int64_t> all;
  json failures = json::array(), unverifiable = json::array(), digests = json::object();
  for (auto& j : lines) {
    const std::string v = j.value("verdict", "error");
    ++all[v], ++by_op[j.value("op", "")][v];
    const bool failed = v == "fail" || v == "error";
    if (failed || (v == "unverifiable" && unverifiable.size() < kUnverifiableListed))
      (failed ? failures : unverifiable)
          .push_back({{"case", j.value("case", "")}, {"verdict", v}, {"op", j.value("op", "")}, {"impl", j.value("impl", "")},
                      {"reason", j.value("reason", "")}, {"replay", replay_command(j)}});
    if (j.contains("outputs")) {
      json d = {{"verdict", v}, {"op", j.value("op", "")}, {"impl", j.value("impl", "")}, {"dtype", j.value("dtype", "")},
                {"outputs", json::object()}};
      for (auto& [name, o] : j["outputs"].items())
        if (o.contains("digest")) d["outputs"][name] = o["digest"].value("xxh64", "");
      digests[j.value("case_id", "")] = d;
    }
  }
  r["summary"] = {{"cases", lines.size()}, {"verdicts", all}, {"by_op", by_op}};
  r["safety_factor"] = opt.safety;
  r["tolerance_reference"] =
      "expected = kverify's reference value v for each element (a float64 within 2^-16 of the enclosure's half-width "
      "of the exact result), actual = the kernel's output cast to float64; torch.testing.assert_close(actual, expected, "
      "atol, rtol) passes when |actual - expected| <= atol + rtol * |expected|";
  r["groups"] = groups_of(lines);
  r["tolerances"] = tolerances_of(lines, opt.safety);
  r["reduction"] = reduction_of(lines);
  r["drift"] = drifts;
  r["forecast"] = forecast_of(drifts);
  r["failures"] = failures;
  r["unverifiable"] = unverifiable;
  r["digests"] = digests;
  return r;
}

}  // namespace kv
