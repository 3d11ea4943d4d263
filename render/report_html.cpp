// The tolerance report as one self-contained HTML page: tables rendered here, charts drawn
// in the browser by the inlined Chart.js from the data block.
#include <map>
#include <set>
#include <sstream>

#include "render/html.hpp"
#include "render/report.hpp"
#include "render/report_glance.hpp"

namespace kv {

using json = nlohmann::json;
using html::esc;
using html::num;

namespace {

std::string td(const std::string& s, const std::string& cls = "") {
  return "<td" + (cls.empty() ? "" : " class='" + cls + "'") + ">" + s + "</td>";
}
std::string tdn(const json& v, int digits = 3) { return "<td class='n'>" + esc(num(v, digits)) + "</td>"; }

const char* verdict_color(const std::string& v) {
  if (v == "pass") return "#4caf50";
  if (v == "fail") return "#d62728";
  if (v == "error") return "#7b1fa2";
  if (v == "unverifiable") return "#ffb300";
  return "#9e9e9e";
}

void identity_section(std::ostringstream& o, const json& r) {
  const json& id = r["identity"];
  bool gpu = false;
  for (auto& d : id["devices"]) gpu = gpu || d.value("kind", "") != "host";
  if (!gpu) {  // a host run: the GPU's columns would only be empty cells
    o << "<h2>Device and build</h2><p class='note'>A host run: the impls ran on this machine's CPU, no GPU "
         "(no compute capability, driver or CUDA runtime applies).</p><table><tr><th>device</th><th>kind</th>"
         "<th>profile SMs (notional: the host impls' per-SM partials)</th><th>lanes per warp</th><th>profile overrides</th></tr>";
    for (auto& d : id["devices"])
      o << "<tr>" << td(esc(d.value("name", ""))) << td(esc(d.value("kind", ""))) << tdn(d["profile"].value("sm_count", 0))
        << tdn(d["profile"].value("warp_size", 0)) << td(esc(d["profile"].value("overrides", ""))) << "</tr>";
  } else {
    o << "<h2>GPU and build</h2><table><tr><th>device</th><th>kind</th><th>UUID</th><th>compute capability</th>"
         "<th>SMs</th><th>driver</th><th>CUDA runtime</th><th>MIG</th><th>profile overrides</th></tr>";
    const std::string na = td("<span class='note'>n/a (host)</span>");
    for (auto& d : id["devices"]) {
      const bool host = d.value("kind", "") == "host";
      o << "<tr>" << td(esc(d.value("name", ""))) << td(esc(d.value("kind", "")));
      if (host) o << na << na << na << na << na << na;
      else
        o << td(esc(d.value("uuid", ""))) << td(esc(d.value("compute_capability", ""))) << tdn(d["profile"].value("sm_count", 0))
          << td(esc(d.value("driver_version", ""))) << td(esc(d.value("runtime_version", ""))) << td(esc(d.value("mig_mode", "")));
      o << td(esc(d["profile"].value("overrides", ""))) << "</tr>";
    }
  }
  o << "</table><table><tr><th>build commit</th><th>dirty</th><th>compiler</th><th>flags</th></tr>";
  for (auto& b : id["builds"])
    o << "<tr>" << td("<code>" + esc(b.value("commit", "")) + "</code>") << td(b.value("dirty", false) ? "yes" : "no")
      << td(esc(b.value("compiler", ""))) << td("<code>" + esc(b.value("flags", "")) + "</code>") << "</tr>";
  o << "</table><p class='note'>Runs: ";
  for (auto& run : id["runs"]) o << "<code>" << esc(run.get<std::string>()) << "</code> ";
  o << "· from ";
  for (auto& s : id["sources"]) o << "<code>" << esc(s.get<std::string>()) << "</code> ";
  o << "· generated " << esc(id.value("generated", "")) << "</p>\n";
}

void summary_section(std::ostringstream& o, const json& r, json& charts) {
  const std::vector<std::string> kinds{"pass", "fail", "error", "unverifiable", "skip"};
  o << "<h2>Verdicts</h2><p><b>" << r["summary"]["cases"] << " cases</b>:";
  for (auto& [v, n] : r["summary"]["verdicts"].items()) o << " <span class='" << esc(v) << "'>" << n << " " << esc(v) << "</span>";
  o << "</p><table><tr><th>op</th>";
  for (auto& k : kinds) o << "<th>" << k << "</th>";
  o << "</tr>";
  json labels = json::array(), ds = json::array();
  for (auto& k : kinds) ds.push_back({{"label", k}, {"data", json::array()}, {"color", verdict_color(k)}});
  for (auto& [op, counts] : r["summary"]["by_op"].items()) {
    o << "<tr>" << td(esc(op));
    labels.push_back(op);
    for (size_t i = 0; i < kinds.size(); ++i) {
      const int64_t n = counts.value(kinds[i], int64_t(0));
      o << "<td class='n" << (n > 0 && kinds[i] != "pass" ? " " + kinds[i] : "") << "'>" << n << "</td>";
      ds[i]["data"].push_back(n);
    }
    o << "</tr>";
  }
  o << "</table><div class='chart'><canvas id='chart-verdicts'></canvas></div>\n";
  charts.push_back({{"canvas", "chart-verdicts"}, {"type", "bar"}, {"title", "Verdicts per op"}, {"x", "op"},
                    {"y", "cases"}, {"stacked", true}, {"labels", labels}, {"datasets", ds}});
}

std::string pair_text(const json& p) {
  if (p.is_null()) return "—";
  return "atol " + esc(num(p["atol"], 2)) + (p["rtol"].is_null() ? "" : ", rtol " + esc(num(p["rtol"], 2)));
}

void tolerance_section(std::ostringstream& o, const json& r) {
  o << "<h2>Recommended tolerances</h2><details><summary>Every op, impl, dtype, input distribution and output ("
    << r["tolerances"].size() << " rows; the first screen has them per op and dtype)</summary><p class='note'>For "
       "<code>torch.testing.assert_close</code>: "
    << esc(r.value("tolerance_reference", "")) << ". <b>Observed</b>: the covering pair that minimizes atol/atol₀ + "
    << "rtol/rtol₀ (atol₀, rtol₀: PyTorch's defaults for the output dtype), over every element with a finite output "
       "and reference (elements binned by |expected|, 8 bins per binade, each bin taking its smallest |expected| and "
       "largest error, so the pair covers every element). <b>Recommended</b> = observed × safety factor "
    << esc(num(r.value("safety_factor", 2.0))) << "; <b>atol alone</b> (rtol = 0) and <b>rtol alone</b> (atol = 0) are "
       "the covering single-term choices, times the same factor (rtol alone is inf where an element with expected 0 "
       "errs). Non-finite elements must match exactly (equal_nan).</p>"
    << "<table><tr><th>op</th><th>impl</th><th>dtype</th><th>values</th><th>output</th><th>cases</th><th>elements</th>"
       "<th>recommended</th><th>observed</th><th>atol alone</th><th>rtol alone</th><th>PyTorch default</th>"
       "<th>upstream (OPS.md)</th></tr>";
  for (auto& t : r["tolerances"]) {
    const json& d = t["torch_default"];
    o << "<tr>" << td(esc(t["op"])) << td(esc(t["impl"])) << td(esc(t["dtype"])) << td(esc(t["dist"]))
      << td(esc(t["output"].get<std::string>() + " (" + t["output_dtype"].get<std::string>() + ")")) << tdn(t["cases"], 15)
      << tdn(t["elements"], 15) << (t.contains("recommended") ? td("<b>" + pair_text(t["recommended"]) + "</b>") : td(esc(t.value("note", "")), "fail"))
      << td(t.contains("observed") ? pair_text(t["observed"]) : esc(t.value("note", "")))
      << tdn(t.value("atol_only", json()), 2)
      << (t.contains("rtol_only_note") ? td("n/a<br><small>" + esc(t["rtol_only_note"].get<std::string>()) + "</small>")
                                       : tdn(t.value("rtol_only", json()), 2))
      << td(pair_text(d) + (d["covers"].get<bool>() ? " (covers)" : " (<b>too tight</b>)"), d["covers"].get<bool>() ? "" : "fail")
      << td(t["upstream"].is_null() ? "—" : pair_text(t["upstream"]) + "<br><small>" + esc(t["upstream"]["source"]) + "</small>")
      << "</tr>";
  }
  o << "</table></details>\n";
}

/// Under a chart whose largest passing error is many ulps: why that passes. Either the case
/// computes in a narrower type than the output's (bf16 arithmetic stored to fp32: each of its
/// roundings is 2^16 output ulps), or the reference lies near 0 against the terms of its sum
/// (cancellation: one ulp there is tiny against their rounding).
std::string many_ulps_caption(const std::string& op, const json& pts) {
  const json* top = nullptr;
  for (auto& p : pts)
    if (p["err_ulps"].get<double>() <= p["half_width_ulps"].get<double>() &&
        (!top || p["err_ulps"].get<double>() > (*top)["err_ulps"].get<double>()))
      top = &p;
  if (!top || (*top)["err_ulps"].get<double>() < 1000) return "";
  const json& p = *top;
  const std::string in = p.value("dtype", ""), out = p.value("output_dtype", "");
  const bool narrower = !out.empty() && in != out && out == "fp32";
  const std::string why =
      narrower ? "the case computes in " + esc(in) + " and stores to " + esc(out) + ": each " + esc(in) +
                     " rounding that any correct kernel under its contract makes spans many " + esc(out) + " ulps"
               : "its reference, " + esc(num(p.value("v", json()), 3)) + ", is small against the terms of its sum "
                 "(cancellation), so one of its ulps is tiny while the rounding of those terms, which any correct kernel "
                 "incurs, spans that many";
  return "<p class='note'>" + esc(op) + ": the largest error inside its bound, " + esc(num(p["err_ulps"], 2)) + " ulps of " +
         esc(p["output"]) + " (" + esc(out.empty() ? in : out) + ", reduction length " + esc(num(p["n"], 15)) +
         "), lies under a half-width of " + esc(num(p["half_width_ulps"], 2)) + " ulps: " + why +
         ". It passes; ulps there say nothing about the kernel's quality (the headroom does).</p>";
}

void reduction_section(std::ostringstream& o, const json& r, json& charts) {
  if (r["reduction"].empty()) return;
  o << "<h2>Error against reduction length</h2><p class='note'>Per case and output, at its worst element (the largest "
       "error over the enclosure's half-width): the error (filled circles) and the enclosure's half-width (hollow "
       "triangles of the same colour) in output ulps, against the reduction length (the row length; the number of rows "
       "for dw and db). A circle above its triangle is a failure. Zeros are not drawn on the log scale.</p>";
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#bcbd22"};
  int k = 0;
  for (auto& [op, pts] : r["reduction"].items()) {
    std::map<std::string, std::pair<json, json>> by;  // "output dtype" -> (errors, half-widths)
    for (auto& p : pts) {
      auto& e = by[p["output"].get<std::string>() + " " + p["dtype"].get<std::string>()];
      if (p["err_ulps"].get<double>() > 0) e.first.push_back({{"x", p["n"]}, {"y", p["err_ulps"]}});
      if (p["half_width_ulps"].get<double>() > 0) e.second.push_back({{"x", p["n"]}, {"y", p["half_width_ulps"]}});
    }
    json ds = json::array();
    int c = 0;
    for (auto& [label, e] : by) {
      const char* col = colors[c++ % 8];
      ds.push_back({{"label", "error " + label}, {"data", e.first.is_null() ? json::array() : e.first}, {"color", col}});
      ds.push_back({{"label", "half-width " + label}, {"data", e.second.is_null() ? json::array() : e.second},
                    {"point", "triangle"}, {"radius", 5}, {"color", col}, {"hollow", true}});
    }
    const std::string id = "chart-reduction-" + std::to_string(k++);
    o << "<div class='chart'><canvas id='" << id << "'></canvas></div>" << many_ulps_caption(op, pts);
    charts.push_back({{"canvas", id}, {"type", "scatter"}, {"title", op}, {"x", "reduction length"}, {"y", "ulps"},
                      {"logx", true}, {"logy", true}, {"datasets", ds}});
  }
  o << "\n";
}

void groups_section(std::ostringstream& o, const json& r, json& charts) {
  o << "<h2>Error and speed per op, dtype and config</h2><p class='note'>Error in output ulps and as a fraction of the "
       "enclosure's half-width (ratio; a pass needs every element ≤ 1 after widening by the reference's error). Per group "
       "each quantile is the largest of its cases' quantiles (an upper bound on the pooled quantile). Kernel time: median "
       "over the group's cases at its largest shape (CUDA events).</p>";
  std::map<std::string, std::vector<const json*>> by_op;
  for (auto& g : r["groups"]) by_op[g["op"]].push_back(&g);
  int k = 0;
  for (auto& [op, gs] : by_op) {
    o << "<details id='op-" << esc(op) << "'" << (by_op.size() <= 4 ? " open" : "") << "><summary>" << esc(op) << " (" << gs.size()
      << " groups)</summary><table><tr><th>impl</th><th>dtype</th><th>config</th><th>cases</th><th>verdicts</th>"
         "<th>output</th><th>ulps p50 / p99 / max</th><th>ratio p50 / p99 / max</th><th>unverifiable</th>"
         "<th>bias (ulps)</th><th>kernel ms (shape)</th></tr>";
    std::map<std::string, json> speed;  // dtype -> points
    for (auto* g : gs) {
      const json& outs = (*g)["outputs"];
      const size_t rows = std::max<size_t>(outs.size(), 1);
      std::string verdicts;
      for (auto& [v, n] : (*g)["verdicts"].items())
        verdicts += "<span class='" + esc(v) + "'>" + std::to_string(n.get<int64_t>()) + " " + esc(v) + "</span> ";
      std::string sp = g->contains("speed") ? esc(num((*g)["speed"]["kernel_ms_median"], 4)) + " (" +
                                                  esc((*g)["speed"]["shape"].get<std::string>()) + ")" : "—";
      std::string head = "<td rowspan='" + std::to_string(rows) + "'>";
      o << "<tr>" << head << esc((*g)["impl"]) << "</td>" << head << "<span title='" << esc((*g)["dtypes"]) << "'>" << esc((*g)["dtype"]) << "</span></td>" << head
        << esc((*g)["config"]) << "</td>" << head << (*g)["cases"] << "</td>" << head << verdicts << "</td>";
      bool first = true;
      double worst_p99 = 0;
      for (auto& [name, a] : outs.items()) {
        if (!first) o << "<tr>";
        o << td(esc(name)) << td(esc(num(a["ulps"]["p50"])) + " / " + esc(num(a["ulps"]["p99"])) + " / " + esc(num(a["ulps"]["max"])))
          << td(esc(num(a["ratio"]["p50"])) + " / " + esc(num(a["ratio"]["p99"])) + " / " + esc(num(a["ratio"]["max"])),
                a["n_fail"].get<int64_t>() > 0 ? "fail" : "")
          << tdn(100.0 * a["unverifiable_share"].get<double>(), 2) << tdn(a["bias_ulps"]);
        if (a["ratio"]["p99"].is_number()) worst_p99 = std::max(worst_p99, a["ratio"]["p99"].get<double>());
        if (first) o << "<td rowspan='" << rows << "' class='n'>" << sp << "</td>";
        o << "</tr>";
        first = false;
      }
      if (outs.empty()) o << "<td colspan='5'></td><td>" << sp << "</td></tr>";
      if (g->contains("speed") && (*g)["speed"]["kernel_ms_median"].is_number() && worst_p99 > 0)
        speed[(*g)["dtype"]].push_back({{"x", (*g)["speed"]["kernel_ms_median"]}, {"y", worst_p99}});
    }
    o << "</table>";
    if (!speed.empty()) {
      json ds = json::array();
      for (auto& [dt, pts] : speed) ds.push_back({{"label", dt}, {"data", pts}});
      const std::string id = "chart-speed-" + std::to_string(k++);
      o << "<div class='chart'><canvas id='" << id << "'></canvas></div>";
      charts.push_back({{"canvas", id}, {"type", "scatter"}, {"title", op + ": speed against accuracy, one point per config"},
                        {"x", "kernel ms at the largest shape"}, {"y", "p99 error / enclosure half-width"},
                        {"logy", true}, {"datasets", ds}});
    }
    o << "</details>\n";
  }
}

void drift_section(std::ostringstream& o, const json& r) {
  if (r["drift"].empty()) return;
  o << "<h2>Reduction-order drift</h2>";
  if (!r["forecast"].empty()) {
    o << "<h3>Forecast</h3><p class='note'>Each impl's configs run on this GPU under another device profile. A "
         "deterministic config whose bits change there orders its reduction by that device fact: its bits are "
         "<b>predicted</b> to differ on such a GPU. Configs that change run to run are listed apart.</p><table><tr>"
         "<th>op</th><th>impl</th><th>output</th><th>profile</th><th>bits predicted to change</th><th>same bits</th>"
         "<th>change run to run</th></tr>";
    auto list = [](const json& a) {
      std::string s;
      for (auto& x : a) s += (s.empty() ? "" : ", ") + esc(x.get<std::string>());
      return s.empty() ? std::string("—") : s;
    };
    for (auto& f : r["forecast"])
      o << "<tr>" << td(esc(f["op"])) << td(esc(f["impl"])) << td(esc(f["output"])) << td("<code>" + esc(f["profile"]) + "</code>")
        << td(list(f["changes"]), f["changes"].empty() ? "" : "changes") << td(list(f["same"]))
        << td(list(f["run_to_run"]), f["run_to_run"].empty() ? "" : "changes") << "</tr>";
    o << "</table>";
  }
  for (auto& d : r["drift"]) {
    const std::string fp = d.value("forecast_profile", "");
    o << "<h3>" << esc(d.value("op", "")) << " · " << esc(d.value("impl", "")) << "</h3><p class='note'>Input: <code>"
      << esc(d.value("case", "")) << "</code> on " << esc(d["device"].value("name", "")) << " ("
      << d["device"]["profile"].value("sm_count", 0) << " SMs); every config run " << d.value("repeat", 1) << " times"
      << (fp.empty() ? "" : "; forecast: the same configs under <code>--device-profile " + esc(fp) +
                                "</code>. A deterministic config whose bits change there follows the SM count in its "
                                "reduction order; that its bits would change on such a GPU is a <b>prediction</b>.")
      << "</p>";
    if (!d["violations"].empty()) {
      o << "<p class='violation'><b>Determinism claims broken:</b></p><ul>";
      for (auto& v : d["violations"]) o << "<li>" << esc(v.is_string() ? v.get<std::string>() : v.dump()) << "</li>";
      o << "</ul>";
    }
    for (auto& [name, out] : d["outputs"].items()) {
      o << "<h4>" << esc(name) << "</h4><table><tr><th>config</th><th>claims</th><th>run to run</th>";
      if (!fp.empty()) o << "<th>under " << esc(fp) << "</th>";
      o << "</tr>";
      for (auto& c : d["configs"]) {
        std::string claims;
        if (c["claims"].contains(name))
          for (auto& x : c["claims"][name]) claims += (claims.empty() ? "" : ", ") + x.get<std::string>();
        const json& rr = c["run_to_run"].value(name, json::object());
        const bool rr_same = rr.value("identical", true);
        o << "<tr>" << td(esc(c["config"])) << td(claims.empty() ? "none" : esc(claims))
          << td(rr_same ? "identical" : "<b>changes</b>: " + std::to_string(rr.value("n_diff", int64_t(0))) +
                                            " elements, max " + esc(num(rr.value("max_ulps", json(0)))) + " ulps",
                rr_same ? "identical" : "changes");
        if (!fp.empty()) {
          const json& f = c.contains("forecast") ? c["forecast"].value(name, json::object()) : json::object();
          if (!rr_same) o << td("n/a: changes run to run");
          else if (f.value("changes", false))
            o << td("reduction order changes; <b>bits predicted to change</b> (" + std::to_string(f.value("n_diff", int64_t(0))) +
                        " elements, max " + esc(num(f.value("max_ulps", json(0)))) + " ulps here)", "changes");
          else o << td("same bits", "identical");
        }
        o << "</tr>";
      }
      o << "</table><details><summary>config × config max-ulp matrix</summary><table><tr><th></th>";
      const json& cfgs = d["configs"];
      for (size_t i = 0; i < cfgs.size(); ++i) o << "<th>" << i << "</th>";
      o << "</tr>";
      for (size_t i = 0; i < cfgs.size() && i < out["max_ulps_matrix"].size(); ++i) {
        o << "<tr><th>" << i << " " << esc(cfgs[i]["config"]) << "</th>";
        for (size_t k = 0; k < out["max_ulps_matrix"][i].size(); ++k)
          o << "<td class='n " << esc(out["classes"][i][k]) << "'>" << esc(num(out["max_ulps_matrix"][i][k])) << "</td>";
        o << "</tr>";
      }
      o << "</table></details><p class='note'>Configs with identical bits:";
      for (auto& g : out["identical_groups"]) {
        o << " {";
        for (size_t i = 0; i < g.size(); ++i) o << (i ? ", " : "") << esc(g[i]);
        o << "}";
      }
      o << "</p>";
    }
  }
}

void failures_section(std::ostringstream& o, const json& r) {
  o << "<h2 id='failures'>Failures</h2>";
  if (r["failures"].empty()) {
    o << "<p>None.</p>";
    return;
  }
  o << "<table><tr><th>verdict</th><th>op</th><th>impl</th><th>reason</th><th>reproduce</th></tr>";
  for (auto& f : r["failures"])
    o << "<tr class='" << esc(f["verdict"]) << "'>" << td(esc(f["verdict"])) << td(esc(f["op"])) << td(esc(f["impl"]))
      << td(esc(f["reason"])) << td("<code>" + esc(f["replay"]) + "</code>") << "</tr>";
  o << "</table>";
}

}  // namespace

std::string render_report_html(const json& r) {
  std::ostringstream o;
  json charts = json::array();
  const std::string title = r.value("title", "").empty() ? "kverify tolerance report" : r["title"].get<std::string>();
  o << html::page_head(title, true) << "<h1>" << esc(title) << "</h1>\n";
  glance_section(o, r);  // the first screen; then the drill-down
  failures_section(o, r);
  reduction_section(o, r, charts);
  groups_section(o, r, charts);
  drift_section(o, r);
  headroom_section(o, r);
  tolerance_section(o, r);
  summary_section(o, r, charts);
  identity_section(o, r);
  o << html::data_block({{"charts", charts}}) << html::chart_script() << html::layout_probe() << "</body></html>\n";
  return o.str();
}

}  // namespace kv
