// The report's first screen: one row per op and impl answering the three questions a reader
// opens the page with. Is it fine on this GPU (verdicts, unverifiable share, headroom)? Which
// assert_close tolerance do I set (per dtype, beside PyTorch's default and the upstream's)?
// What drifts (determinism claims held or broken, the forecast)? Above it, every failure and
// unverifiable case with a replay line that one click selects.
#include "render/report_glance.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "check/results.hpp"
#include "render/html.hpp"
#include "render/report.hpp"

namespace kv {

using json = nlohmann::json;
using html::esc;
using html::num;

namespace {

using Key = std::pair<std::string, std::string>;  // op, impl

struct Row {
  std::map<std::string, int64_t> verdicts;
  int64_t cases = 0;
  double headroom = -1;  // see headroom_value
  bool from_ratio = false;
};

struct Tol {
  double atol = 0, rtol = 0;
  double share = 0;  // of PyTorch's default allowance, at the worst element (see tol_share)
  bool na = false, covers = true;
  std::string why, drives, upstream;
};


std::map<Key, Row> rows_of(const json& r) {
  std::map<Key, Row> rows;
  for (auto& g : r["groups"]) {
    Row& x = rows[{g["op"], g["impl"]}];
    x.cases += g.value("cases", int64_t(0));
    for (auto& [v, n] : g["verdicts"].items()) x.verdicts[v] += n.get<int64_t>();
    for (auto& [name, a] : g["outputs"].items()) x.headroom = std::max(x.headroom, headroom_value(a, x.from_ratio));
  }
  return rows;
}

/// Per op, impl and case dtype: the pair covering every output and value distribution (the
/// largest atol and the largest rtol: each row's pair is covered by it).
std::map<Key, std::map<std::string, Tol>> tolerances_of(const json& r, std::set<std::string>& dtypes) {
  std::map<Key, std::map<std::string, Tol>> out;
  for (auto& t : r["tolerances"]) {
    const std::string dt = t["dtype"];
    dtypes.insert(dt);
    Tol& x = out[{t["op"], t["impl"]}][dt];
    if (!t.contains("recommended")) {
      x.na = true;
      x.why = t.value("note", "no covering pair");
      continue;
    }
    const json& p = t["recommended"];
    const double a = p["atol"].get<double>(), rt = p["rtol"].is_number() ? p["rtol"].get<double>() : 0;
    if (a > x.atol || rt > x.rtol)
      x.drives = t["output"].get<std::string>() + " (" + t["output_dtype"].get<std::string>() + "), " + t["dist"].get<std::string>() + " inputs";
    x.atol = std::max(x.atol, a), x.rtol = std::max(x.rtol, rt);
    x.covers = x.covers && t["torch_default"].value("covers", false);
    if (t["torch_default"].contains("share")) x.share = std::max(x.share, result_number_value(t["torch_default"]["share"]));
    if (!t["upstream"].is_null() && x.upstream.empty())
      x.upstream = "atol " + num(t["upstream"]["atol"], 2) +
                   (t["upstream"]["rtol"].is_null() ? "" : " rtol " + num(t["upstream"]["rtol"], 2));
  }
  return out;
}

/// A share of PyTorch's default allowance: "24%", or "15×" beyond it.
std::string share_text(double share) {
  return share <= 1 ? num(100 * share, 2) + "%" : num(share, 2) + "×";
}

std::string tol_cell(const Tol* t) {
  if (!t) return "<td class='none'>—</td>";
  if (t->na) return "<td class='unverifiable' title='" + esc(t->why) + "'>n/a <small>" + esc(t->why.substr(0, 40)) + "</small></td>";
  // PyTorch's default: covering with room (green), covering with under half of its allowance
  // left (amber: a test with the default passes here but may flake on other inputs), too tight.
  const char* cls = !t->covers ? "fail" : t->share > 0.5 ? "unverifiable" : "pass";
  std::string s = "<td class='tol " + std::string(cls) + "' title='largest: " + esc(t->drives) + "; the worst element takes " +
                  esc(share_text(t->share)) + " of PyTorch&#39;s default allowance'>atol " + esc(num(t->atol, 2)) + " · rtol " +
                  esc(num(t->rtol, 2)) + (t->covers ? " ✓" : " <b>✗</b>") + " <small>" + esc(share_text(t->share)) + "</small>";
  if (!t->upstream.empty()) s += "<br><small>upstream: " + esc(t->upstream) + "</small>";
  return s + "</td>";
}

/// Drift per op and impl: claims held or broken over the configs analysed, and which outputs
/// the forecast profile changes.
std::map<Key, std::string> drift_of(const json& r) {
  std::map<Key, std::string> out;
  for (auto& d : r["drift"]) {
    const Key k{d.value("op", ""), d.value("impl", "")};
    const size_t broken = d["violations"].size(), configs = d["configs"].size();
    std::string s = broken ? "<b class='fail'>" + std::to_string(broken) + " claims broken</b>"
                           : "<span class='pass'>claims held</span> (" + std::to_string(configs) + " configs)";
    std::string fc;
    for (auto& f : r["forecast"]) {
      if (f.value("op", "") != k.first || f.value("impl", "") != k.second) continue;
      if (f["changes"].empty() && f["run_to_run"].empty()) continue;
      std::string what;
      if (!f["changes"].empty()) what = std::to_string(f["changes"].size()) + " configs change under " + esc(f["profile"]);
      if (!f["run_to_run"].empty())
        what += (what.empty() ? "" : ", ") + std::to_string(f["run_to_run"].size()) + " run to run";
      fc += "<br><small class='changes'>" + esc(f["output"]) + ": " + what + "</small>";
    }
    const std::string fp = d.value("forecast_profile", "");
    out[k] = s + (fc.empty() && !fp.empty() ? "<br><small>same bits under " + esc(fp) + "</small>" : fc);
  }
  return out;
}

std::string verdict_cell(const Row& x) {
  std::string s;
  for (const char* v : {"fail", "error", "unverifiable", "skip"}) {
    auto it = x.verdicts.find(v);
    if (it != x.verdicts.end() && it->second > 0) s += " <span class='" + std::string(v) + "'>" + std::to_string(it->second) + " " + v + "</span>";
  }
  const int64_t pass = x.verdicts.count("pass") ? x.verdicts.at("pass") : 0;
  return "<td>" + std::to_string(pass) + "/" + std::to_string(x.cases) + " pass" + s + "</td>";
}

/// A headroom bar: red above 1 (outside), neutral below (near 1 is no alarm by itself: see
/// the Headroom section), as wide as the share up to 1.
std::string headroom_bar(double h) {
  const char* col = h > 1 ? "#d62728" : "#5b8def";
  const double w = std::isfinite(h) ? std::min(1.0, h) * 100 : 100;
  return "<div class='bar' style='width:" + num(w, 4) + "%;background:" + col + "'></div>";
}

std::string headroom_cell(double h, bool from_ratio) {
  if (h < 0) return "<td class='n'>—</td>";
  if (from_ratio) return "<td class='n' title='result lines from before kverify recorded max_used: the error over the "
                         "half-width, which reads 1 for a correctly rounded value'>" + esc(num(h, 2)) + " <small>(ratio)</small></td>";
  return "<td class='n' title='largest share of an admissible half-width used before the output&#39;s own rounding "
         "(above 1 fails)'>" + esc(num(h, 2)) + headroom_bar(h) + "</td>";
}

void banner(std::ostringstream& o, const json& r) {
  const json& v = r["summary"]["verdicts"];
  const int64_t bad = v.value("fail", int64_t(0)) + v.value("error", int64_t(0)), unv = v.value("unverifiable", int64_t(0));
  const int64_t cases = r["summary"].value("cases", int64_t(0)), pass = v.value("pass", int64_t(0));
  std::string dev;
  for (auto& d : r["identity"]["devices"]) {
    dev += (dev.empty() ? "" : ", ") + esc(d.value("name", ""));
    if (d.value("kind", "") == "host") dev += " (host run, no GPU)";
    else dev += " · cc " + esc(d.value("compute_capability", "")) + " · " + std::to_string(d["profile"].value("sm_count", 0)) + " SMs";
  }
  std::string build;
  for (auto& b : r["identity"]["builds"]) build += " · build <code>" + esc(b.value("commit", "").substr(0, 10)) + "</code>" + (b.value("dirty", false) ? " (dirty)" : "");
  o << "<p class='banner " << (bad ? "fail" : unv ? "unverifiable" : "pass") << "'><b>"
    << (bad ? std::to_string(bad) + " of " + std::to_string(cases) + " cases fail or err"
            : pass == cases ? "All " + std::to_string(cases) + " cases pass" : std::to_string(pass) + " of " + std::to_string(cases) + " cases pass")
    << "</b>" << (unv ? " · " + std::to_string(unv) + " unverifiable" : "") << " · " << dev << build << "</p>";
}

void needs_a_look(std::ostringstream& o, const json& r) {
  std::vector<const json*> items;
  for (auto& f : r["failures"]) items.push_back(&f);
  if (r.contains("unverifiable"))
    for (auto& f : r["unverifiable"]) items.push_back(&f);
  if (items.empty()) return;
  const size_t shown = std::min<size_t>(items.size(), 5);
  o << "<table class='look'><tr><th>verdict</th><th>op · impl</th><th>reason</th><th>replay (click to select)</th></tr>";
  for (size_t i = 0; i < shown; ++i) {
    const json& f = *items[i];
    const std::string why = f.value("reason", "");
    o << "<tr><td class='" << esc(f["verdict"]) << "'>" << esc(f["verdict"]) << "</td><td>" << esc(f["op"]) << " · " << esc(f["impl"])
      << "</td><td title='" << esc(why) << "'>" << esc(why.size() > 90 ? why.substr(0, 90) + "…" : why)
      << "</td><td><code class='copy'>" << esc(f["replay"]) << "</code></td></tr>";
  }
  o << "</table>";
  if (items.size() > shown) o << "<p class='note'>" << items.size() - shown << " more in <a href='#failures'>Failures</a>.</p>";
}

}  // namespace

double headroom_value(const json& a, bool& from_ratio) {
  auto val = [](const json& m) { return m.is_number() ? m.get<double>() : (m.is_null() ? -1 : INFINITY); };
  if (a.contains("used") && !a["used"].is_null()) return val(a["used"]);
  from_ratio = true;
  return val(a["ratio"]["max"]);
}

/// Headroom: per op, impl, dtypes and config, the largest share of an admissible half-width
/// used before the output's own rounding, closest to failing first (the early warning a
/// hand-set tolerance lacks: a kernel at 0.9 passes today and fails on the next input that
/// pushes it).
void headroom_section(std::ostringstream& o, const json& r) {
  struct Row {
    double used;
    const json* g;
    std::string out;
    bool from_ratio;
  };
  std::vector<Row> rows;
  for (auto& g : r["groups"]) {
    Row x{-1, &g, "", false};
    for (auto& [name, a] : g["outputs"].items()) {
      bool fr = false;
      const double v = headroom_value(a, fr);
      if (v > x.used) x.used = v, x.out = name, x.from_ratio = fr;
    }
    if (x.used >= 0) rows.push_back(x);
  }
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.used > b.used; });
  o << "<h2>Headroom</h2><details><summary>Every op, impl, dtype and config (" << rows.size()
    << " groups), closest to the edge first; the first screen has the largest per op and impl</summary><p class='note'>Per op, impl, dtypes and config: the largest share of an element's admissible "
       "half-width that the output uses before its own final rounding (the distance from the reference to the near "
       "edge of the output's rounding interval, over the contract's bound on that side), at the output where it is "
       "largest, closest to the edge first. 0: every element is the correctly rounded value; above 1: outside the set, "
       "a failure. The set is a proof over the arithmetic the contract declares, so a kernel computing exactly that "
       "arithmetic never leaves it, yet reaches a share near 1 at its worst element wherever the bound is tight: an "
       "intermediate rounded near a midpoint takes its whole half-ulp (elementwise ops, rope, the final roundings of "
       "the norms). There 1 means kernel and contract agree exactly, not that the kernel is about to fail. Where the "
       "bound is a worst case over a sum's roundings, rarely attained, a share approaching 1 says the kernel's "
       "reduction error nears what its contract allows: that is the early warning. (The warning for a hand-set "
       "tolerance is in the first table: the share of PyTorch's default allowance.) Red above 1. "
       "Rows marked (ratio) come from result lines written before kverify recorded this share: they show the error "
       "over the half-width, which reads 1 for a correctly rounded value.</p><table style='width:100%'><tr><th>op</th><th>impl</th>"
       "<th>dtype</th><th>config</th><th>output</th><th>cases</th><th>share used</th><th style='width:14em'></th></tr>";
  for (const Row& x : rows) {
    const json& g = *x.g;
    o << "<tr><td>" << esc(g["op"]) << "</td><td>" << esc(g["impl"]) << "</td><td><span title='" << esc(g["dtypes"]) << "'>"
      << esc(g["dtype"]) << "</span></td><td>" << esc(g["config"]) << "</td><td>" << esc(x.out) << "</td><td class='n'>"
      << esc(num(g["cases"], 15)) << "</td><td" << (x.used > 1 ? " class='fail'" : "") << ">" << esc(num(x.used, 3))
      << (x.from_ratio ? " <small>(ratio)</small>" : "") << "</td>"
      << "<td>" << headroom_bar(x.used) << "</td></tr>";
  }
  o << "</table></details>\n";
}

void glance_section(std::ostringstream& o, const json& r) {
  o << "<section id='first-screen'>";
  banner(o, r);
  needs_a_look(o, r);
  std::set<std::string> dts;
  const auto rows = rows_of(r);
  const auto tols = tolerances_of(r, dts);
  const auto drift = drift_of(r);
  std::vector<std::string> order;
  for (const char* d : {"fp32", "fp16", "bf16"})
    if (dts.count(d)) order.push_back(d);
  for (auto& d : dts)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  o << "<table class='glance'><tr><th rowspan='2'>op</th><th rowspan='2'>impl</th><th rowspan='2'>verdicts</th>"
       "<th rowspan='2'>headroom</th><th colspan='" << order.size() << "'>assert_close tolerance to set (covers every output "
       "and input distribution here, × " << num(r.value("safety_factor", 2.0)) << ")</th><th rowspan='2'>drift</th></tr><tr>";
  for (auto& d : order) {
    const auto p = torch_default_tolerance(d);
    o << "<th>" << esc(d) << " <small>PyTorch default: atol " << num(p.first, 2) << " · rtol " << num(p.second, 2)
      << " (% of it used)</small></th>";
  }
  o << "</tr>";
  for (auto& [k, x] : rows) {
    o << "<tr><td><a href='#op-" << esc(k.first) << "' onclick=\"document.getElementById('op-" << esc(k.first)
      << "').open=true\">" << esc(k.first) << "</a></td><td>" << esc(k.second) << "</td>" << verdict_cell(x) << headroom_cell(x.headroom, x.from_ratio);
    auto t = tols.find(k);
    for (auto& d : order) {
      const Tol* c = nullptr;
      if (t != tols.end() && t->second.count(d)) c = &t->second.at(d);
      o << tol_cell(c);
    }
    auto dr = drift.find(k);
    o << (dr == drift.end() ? "<td class='none' title='no drift analysis given (kverify drift, then report --drift)'>not analysed</td>"
                            : "<td>" + dr->second + "</td>")
      << "</tr>";
  }
  o << "</table><p class='note'>Tolerance: the recommended pair (hover: the output and inputs that set it), and how "
       "much of PyTorch's default allowance (atol + rtol |expected| for each output's dtype) the worst element takes: "
       "green under 50%, amber from 50% (a test with the default passes here but has little room: the flaky kind), red "
       "above 100% (✗: the default is too tight). Headroom: the largest share of an admissible half-width an output "
       "uses before its own rounding (above 1 fails; near 1 is expected where the contract is tight, see Headroom). "
       "Click an op for its details.</p></section>\n";
}

}  // namespace kv
