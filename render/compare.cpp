// Two tolerance reports side by side (two GPUs, or two builds on one GPU type).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "check/results.hpp"
#include "check/tolerance.hpp"
#include "render/html.hpp"
#include "render/report.hpp"

namespace kv {

using json = nlohmann::json;
using html::esc;
using html::num;

namespace {

std::string device_names(const json& r) {
  std::set<std::string> n;
  for (auto& d : r["identity"]["devices"]) n.insert(d.value("name", "") + (d["profile"].value("overrides", "").empty() ? "" : " [" + d["profile"]["overrides"].get<std::string>() + "]"));
  std::string s;
  for (auto& x : n) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string commits(const json& r) {
  std::string s;
  for (auto& b : r["identity"]["builds"])
    s += (s.empty() ? "" : ", ") + b.value("commit", "").substr(0, 12) + (b.value("dirty", false) ? " (dirty)" : "");
  return s;
}


json groups_joined(const json& a, const json& b) {
  std::map<std::string, std::pair<const json*, const json*>> m;
  auto key = [](const json& g) { return g["op"].get<std::string>() + "|" + g["impl"].get<std::string>() + "|" +
                                        g["dtypes"].get<std::string>() + "|" + g["config"].get<std::string>(); };
  for (auto& g : a["groups"]) m[key(g)].first = &g;
  for (auto& g : b["groups"]) m[key(g)].second = &g;
  json out = json::array();
  for (auto& [k, p] : m) {
    if (!p.first || !p.second) continue;
    const json &ga = *p.first, &gb = *p.second;
    json r = {{"op", ga["op"]}, {"impl", ga["impl"]}, {"dtypes", ga["dtypes"]}, {"config", ga["config"]},
              {"verdicts_a", ga["verdicts"]}, {"verdicts_b", gb["verdicts"]}, {"outputs", json::object()}};
    for (auto& [name, oa] : ga["outputs"].items()) {
      if (!gb["outputs"].contains(name)) continue;
      const json& ob = gb["outputs"][name];
      r["outputs"][name] = {{"max_ulps", {oa["ulps"]["max"], ob["ulps"]["max"]}}, {"p99_ratio", {oa["ratio"]["p99"], ob["ratio"]["p99"]}}};
    }
    if (ga.contains("speed") && gb.contains("speed") && ga["speed"]["shape"] == gb["speed"]["shape"])
      r["speed"] = {{"shape", ga["speed"]["shape"]}, {"kernel_ms", {ga["speed"]["kernel_ms_median"], gb["speed"]["kernel_ms_median"]}}};
    out.push_back(r);
  }
  return out;
}

json tolerances_joined(const json& a, const json& b, double safety) {
  std::map<std::string, std::pair<const json*, const json*>> m;
  auto key = [](const json& t) { return t["op"].get<std::string>() + "|" + t["impl"].get<std::string>() + "|" + t["dtype"].get<std::string>() +
                                        "|" + t["dist"].get<std::string>() + "|" + t["output"].get<std::string>(); };
  for (auto& t : a["tolerances"]) m[key(t)].first = &t;
  for (auto& t : b["tolerances"]) m[key(t)].second = &t;
  json out = json::array();
  for (auto& [k, p] : m) {
    if (!p.first || !p.second || !p.first->contains("frontier") || !p.second->contains("frontier")) continue;
    const json &ta = *p.first, &tb = *p.second;
    auto pts = tol_points_from_json(ta["frontier"]), pb = tol_points_from_json(tb["frontier"]);
    pts.insert(pts.end(), pb.begin(), pb.end());
    const auto [da, dr] = torch_default_tolerance(ta["output_dtype"]);
    const TolPair both = smallest_pair(tol_frontier(pts), da, dr);
    out.push_back({{"op", ta["op"]}, {"impl", ta["impl"]}, {"dtype", ta["dtype"]}, {"dist", ta["dist"]}, {"output", ta["output"]},
                   {"recommended_a", ta.value("recommended", json())}, {"recommended_b", tb.value("recommended", json())},
                   {"recommended_both", {{"atol", both.atol * safety}, {"rtol", both.rtol * safety}}}});
  }
  return out;
}

/// Bits of the same case on both sides: identical, different with both passing (a
/// reordering inside the enclosures), or different with either failing.
json bits_joined(const json& a, const json& b) {
  std::map<std::string, std::map<std::string, int64_t>> by;  // op|impl|dtype -> counts
  for (auto& [id, da] : a["digests"].items()) {
    if (!b["digests"].contains(id)) continue;
    const json& db = b["digests"][id];
    auto& c = by[da["op"].get<std::string>() + " · " + da["impl"].get<std::string>() + " · " + da["dtype"].get<std::string>()];
    ++c["cases"];
    for (auto& [name, x] : da["outputs"].items()) {
      if (!db["outputs"].contains(name)) continue;
      if (x == db["outputs"][name]) ++c["identical"];
      else if (da["verdict"] == "pass" && db["verdict"] == "pass") ++c["inside"];
      else ++c["outside"];
    }
  }
  json out = json::array();
  for (auto& [k, c] : by)
    out.push_back({{"group", k}, {"cases", c["cases"]}, {"identical", c["identical"]}, {"inside", c["inside"]}, {"outside", c["outside"]}});
  return out;
}

}  // namespace

json build_comparison(const json& a, const json& b) {
  const double safety = std::max(a.value("safety_factor", 2.0), b.value("safety_factor", 2.0));
  return {{"schema", "kverify-compare/1"},
          {"a", {{"title", a.value("title", "")}, {"devices", device_names(a)}, {"commits", commits(a)}, {"summary", a["summary"]}}},
          {"b", {{"title", b.value("title", "")}, {"devices", device_names(b)}, {"commits", commits(b)}, {"summary", b["summary"]}}},
          {"safety_factor", safety},
          {"groups", groups_joined(a, b)},
          {"tolerances", tolerances_joined(a, b, safety)},
          {"bits", bits_joined(a, b)}};
}

std::string render_compare_html(const json& c) {
  std::ostringstream o;
  const std::string an = c["a"]["devices"].get<std::string>(), bn = c["b"]["devices"].get<std::string>();
  o << html::page_head("kverify: " + an + " vs " + bn, true) << "<h1>" << esc(an) << " (A) vs " << esc(bn) << " (B)</h1>"
    << "<p>A: " << esc(c["a"]["title"]) << ", build " << esc(c["a"]["commits"]) << " · B: " << esc(c["b"]["title"])
    << ", build " << esc(c["b"]["commits"]) << "</p><h2>Verdicts</h2><table><tr><th>op</th><th>A</th><th>B</th></tr>";
  std::set<std::string> ops;
  for (auto& [op, x] : c["a"]["summary"]["by_op"].items()) ops.insert(op);
  for (auto& [op, x] : c["b"]["summary"]["by_op"].items()) ops.insert(op);
  auto counts = [](const json& m) {
    std::string s;
    for (auto& [v, n] : m.items()) s += std::to_string(n.get<int64_t>()) + " " + v + " ";
    return s;
  };
  for (auto& op : ops)
    o << "<tr><td>" << esc(op) << "</td><td>" << counts(c["a"]["summary"]["by_op"].value(op, json::object())) << "</td><td>"
      << counts(c["b"]["summary"]["by_op"].value(op, json::object())) << "</td></tr>";
  o << "</table><h2>Bits of the same cases</h2><p class='note'>Per output of every case run on both sides: identical bits, "
       "different bits with both inside their enclosures (a reordering), or different with either outside.</p>"
       "<table><tr><th>op · impl · dtype</th><th>cases</th><th>identical</th><th>differ, both inside</th><th>differ, outside</th></tr>";
  for (auto& b : c["bits"])
    o << "<tr><td>" << esc(b["group"]) << "</td><td class='n'>" << b["cases"] << "</td><td class='n identical'>" << b["identical"]
      << "</td><td class='n" << (b["inside"].get<int64_t>() ? " inside" : "") << "'>" << b["inside"] << "</td><td class='n"
      << (b["outside"].get<int64_t>() ? " outside" : "") << "'>" << b["outside"] << "</td></tr>";
  o << "</table><h2>Recommended tolerances</h2><p class='note'>Each side's recommendation, and one pair covering both "
       "(the smallest pair over both sides' observations × safety factor "
    << esc(num(c["safety_factor"])) << ").</p><table><tr><th>op</th><th>impl</th><th>dtype</th><th>values</th><th>output</th>"
       "<th>A</th><th>B</th><th>both</th></tr>";
  auto pr = [](const json& p) {
    return p.is_null() ? std::string("— (failing cases)") : "atol " + esc(num(p["atol"], 2)) + ", rtol " + esc(num(p["rtol"], 2));
  };
  for (auto& t : c["tolerances"])
    o << "<tr><td>" << esc(t["op"]) << "</td><td>" << esc(t["impl"]) << "</td><td>" << esc(t["dtype"]) << "</td><td>"
      << esc(t["dist"]) << "</td><td>" << esc(t["output"]) << "</td><td>" << pr(t["recommended_a"]) << "</td><td>"
      << pr(t["recommended_b"]) << "</td><td><b>" << pr(t["recommended_both"]) << "</b></td></tr>";
  o << "</table><h2>Error and speed per group</h2><table><tr><th>op</th><th>impl</th><th>dtypes</th><th>config</th>"
       "<th>output</th><th>max ulps A / B</th><th>p99 ratio A / B</th><th>kernel ms A / B (shape)</th><th>B/A time</th></tr>";
  json pts = json::array(), speed = json::array();
  for (auto& g : c["groups"]) {
    for (auto& [name, x] : g["outputs"].items()) {
      o << "<tr><td>" << esc(g["op"]) << "</td><td>" << esc(g["impl"]) << "</td><td>" << esc(g["dtypes"]) << "</td><td>"
        << esc(g["config"]) << "</td><td>" << esc(name) << "</td><td class='n'>" << esc(num(x["max_ulps"][0])) << " / "
        << esc(num(x["max_ulps"][1])) << "</td><td class='n'>" << esc(num(x["p99_ratio"][0])) << " / " << esc(num(x["p99_ratio"][1]))
        << "</td>";
      if (g.contains("speed")) {
        const double ta = result_number_value(g["speed"]["kernel_ms"][0]), tb = result_number_value(g["speed"]["kernel_ms"][1]);
        o << "<td class='n'>" << esc(num(ta, 4)) << " / " << esc(num(tb, 4)) << " (" << esc(g["speed"]["shape"]) << ")</td><td class='n'>"
          << esc(num(tb / ta)) << "</td>";
        if (std::isfinite(ta) && std::isfinite(tb) && ta > 0 && tb > 0) speed.push_back({{"x", ta}, {"y", tb}});
      } else {
        o << "<td></td><td></td>";
      }
      o << "</tr>";
      const double pa = result_number_value(x["p99_ratio"][0]), pb = result_number_value(x["p99_ratio"][1]);
      if (pa > 0 && pb > 0 && std::isfinite(pa) && std::isfinite(pb)) pts.push_back({{"x", pa}, {"y", pb}});
    }
  }
  o << "</table><div class='chart'><canvas id='chart-p99'></canvas></div><div class='chart'><canvas id='chart-speed'></canvas></div>";
  json charts = json::array();
  charts.push_back({{"canvas", "chart-p99"}, {"type", "scatter"}, {"title", "p99 error / half-width, per group and output"},
                    {"x", "A"}, {"y", "B"}, {"logx", true}, {"logy", true}, {"datasets", {{{"label", "groups"}, {"data", pts}}}}});
  charts.push_back({{"canvas", "chart-speed"}, {"type", "scatter"}, {"title", "kernel ms at the largest shape, per group"},
                    {"x", "A"}, {"y", "B"}, {"logx", true}, {"logy", true}, {"datasets", {{{"label", "groups"}, {"data", speed}}}}});
  o << html::data_block({{"charts", charts}}) << html::chart_script() << html::layout_probe() << "</body></html>\n";
  return o.str();
}

}  // namespace kv
