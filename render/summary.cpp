// HTML summary: identity, verdict counts, one row per case, replay commands for failures.
#include "render/summary.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <vector>

#include "core/case.hpp"
#include "core/error.hpp"
#include "render/html.hpp"
#include "render/report.hpp"

namespace kv {

namespace {

using html::esc;

std::string str(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}

/// {"x": "bf16", "w": "fp32"} or {"eps": "0x1.0c6f7a0b5ed8dp-20"} as "k=v, k=v", hex floats in
/// decimal with the exact hex on hover.
std::string kv_cells(const nlohmann::json& j) {
  if (!j.is_object()) return esc(str(j));
  std::string out;
  for (auto& [k, v] : j.items()) {
    const std::string t = str(v);
    std::string cell = esc(t);
    if (t.rfind("0x", 0) == 0 || t.rfind("-0x", 0) == 0) {
      char* end = nullptr;
      const double d = std::strtod(t.c_str(), &end);
      if (end && *end == 0) cell = "<span title='" + esc(t) + "'>" + esc(html::num(d)) + "</span>";
    }
    out += (out.empty() ? "" : ", ") + esc(k) + "=" + cell;
  }
  return out;
}

/// {"rstd": "fp32", "w": "bf16", "x": "bf16", "y": "bf16"} as "w,x,y=bf16 rstd=fp32": the
/// tensors grouped by dtype, the most common first.
std::string dtypes_text(const nlohmann::json& j) {
  if (!j.is_object()) return esc(str(j));
  std::map<std::string, std::string> by;
  std::map<std::string, int> n;
  for (auto& [k, v] : j.items()) by[str(v)] += (by[str(v)].empty() ? "" : ",") + k, ++n[str(v)];
  std::vector<std::string> order;
  for (auto& [d, names] : by) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) { return n[a] > n[b]; });
  std::string out;
  for (auto& d : order) out += (out.empty() ? "" : " ") + esc(by[d]) + "=" + esc(d);
  return out;
}

std::string shape_text(const nlohmann::json& j) {
  try {
    return shape_str(j.get<std::vector<int64_t>>());
  } catch (const nlohmann::json::exception&) {
    return esc(str(j));  // not a list of integers: shown as it is
  }
}

/// Triage order: what needs a look first.
int verdict_rank(const std::string& v) {
  if (v == "fail") return 0;
  if (v == "error") return 1;
  if (v == "unverifiable") return 2;
  if (v == "skip") return 3;
  return 4;
}

/// Click a header to sort by it (again: reversed); type in the box to keep matching rows.
const char* kTriageScript = R"js(<script>
(function () {
  var body = document.body;
  body.dataset.errors = 0;
  window.addEventListener('error', function () { body.dataset.errors = +body.dataset.errors + 1; });
  var t = document.getElementById('cases'), f = document.getElementById('filter');
  f.addEventListener('input', function () {
    var q = f.value.toLowerCase();
    Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
      r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
  Array.prototype.forEach.call(t.tHead.rows[0].cells, function (th, i) {
    th.style.cursor = 'pointer';
    th.addEventListener('click', function () {
      var rows = Array.prototype.slice.call(t.tBodies[0].rows), dir = th.dataset.dir === 'asc' ? -1 : 1;
      th.dataset.dir = dir > 0 ? 'asc' : 'desc';
      var key = function (r) { var c = r.cells[i]; return c.dataset.v !== undefined ? c.dataset.v : c.textContent; };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
        if (!isNaN(nx) && !isNaN(ny)) return dir * (nx - ny);
        return dir * x.localeCompare(y);
      });
      rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
    });
  });
})();
</script>)js";

void identity_header(std::ofstream& f, const nlohmann::json& j) {
  const auto& d = j["device"];
  if (str(d["kind"]) == "host")
    f << "<p>Device: <b>" << esc(j.value("device_name", "")) << "</b> (a host run on this machine's CPU, no GPU; profile "
      << kv_cells(d["profile"]) << ")<br>Build: commit ";
  else
    f << "<p>Device: <b>" << esc(j.value("device_name", "")) << "</b> (" << esc(str(d["kind"])) << ", compute capability "
      << esc(str(d["compute_capability"])) << ", " << esc(str(d["profile"].value("sm_count", 0))) << " SMs, driver "
      << esc(str(d["driver_version"])) << ", CUDA runtime " << esc(str(d["runtime_version"])) << ", MIG "
      << esc(str(d["mig_mode"])) << ", <span title='" << esc(str(d["uuid"])) << "'>UUID</span>)<br>Build: commit ";
  f << "<code>" << esc(str(j["build"]["commit"])) << "</code>" << (j["build"].value("dirty", false) ? " (dirty)" : "") << ", "
    << esc(str(j["build"]["compiler"])) << "</p>\n";
}

/// Headroom of a case: the largest share of an admissible half-width its outputs use before
/// their own rounding (max_used), or the error over the half-width for lines from before.
std::string headroom_cell(const nlohmann::json& j) {
  double worst = -1;
  bool inf = false, ratio = false;
  if (j.contains("outputs"))
    for (auto& [n, o] : j["outputs"].items()) {
      const char* k = o.contains("max_used") ? "max_used" : "max_ratio";
      ratio = ratio || !o.contains("max_used");
      if (o[k].is_number()) worst = std::max(worst, o[k].get<double>());
      else if (!o[k].is_null()) inf = true;
    }
  if (worst < 0 && !inf) return "<td data-v='-1'></td>";
  return "<td class='n' data-v='" + (inf ? std::string("1e308") : std::to_string(worst)) + "'>" +
         (inf ? std::string("inf") : html::num(worst)) + (ratio ? " <small title='error over the half-width (a line from "
                                                                  "before kverify recorded max_used)'>(ratio)</small>" : "") + "</td>";
}

void case_row(std::ofstream& f, const nlohmann::json& j) {
  const std::string v = j.value("verdict", "error");
  double ulps = 0;
  if (j.contains("outputs"))
    for (auto& [n, o] : j["outputs"].items())
      if (o["max_ulps"].is_number()) ulps = std::max(ulps, o["max_ulps"].get<double>());
  const bool has_t = j.contains("timings");
  const std::string method = j.contains("reference") ? str(j["reference"]["method"]) : "";
  f << "<tr class='" << esc(v) << "'><td data-v='" << verdict_rank(v) << "' title='reference: " << esc(method) << "'>" << esc(v)
    << "</td><td>" << esc(j.value("op", "")) << "</td><td>" << esc(j.value("impl", "")) << "</td><td>" << dtypes_text(j["dtypes"])
    << "</td><td>" << shape_text(j["shape"]) << "</td><td>" << kv_cells(j["attrs"]) << "</td><td>" << kv_cells(j["config"])
    << "</td><td>" << esc(j.value("dist", "")) << "</td>" << headroom_cell(j) << "<td class='n' data-v='" << ulps << "'>"
    << html::num(ulps) << "</td><td class='n' title='case total "
    << (has_t ? html::num(j["timings"].value("total_s", 0.0)) + " s" : std::string("—")) << "'>"
    << (has_t && j["timings"].contains("kernel_ms") ? html::num(j["timings"]["kernel_ms"].get<double>()) : std::string())
    << "</td><td class='why'>";
  if (j.contains("reason")) {
    const std::string why = str(j["reason"]);
    f << "<span title='" << esc(why) << "'>" << esc(why.size() > 110 ? why.substr(0, 110) + "…" : why) << "</span>";
  }
  if (v == "fail" || v == "error" || v == "unverifiable") f << "<br><code class='copy'>" << esc(replay_command(j)) << "</code>";
  f << "</td></tr>\n";
}

}  // namespace

void write_summary_html(const std::string& path, const std::vector<nlohmann::json>& lines, const std::string& run_id) {
  std::ofstream f(path);
  if (!f) throw UsageError("cannot write '" + path + "'");
  std::map<std::string, int> counts;
  for (auto& j : lines) ++counts[j.value("verdict", "error")];
  const std::string device = lines.empty() ? "" : lines.front().value("device_name", "");
  f << "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>kverify: " << lines.size() << " cases"
    << (device.empty() ? "" : " on " + esc(device)) << "</title><style>"
    << "body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:12px}"
    << "td,th{border:1px solid #ccc;padding:2px 5px;text-align:left;vertical-align:top}th{background:#eee}"
    << "td.n{text-align:right;font-variant-numeric:tabular-nums}table#cases{width:100%}td.why{width:30%}h1{margin:.2em 0}"
    << ".pass{background:#e6f4e6}.fail,.error{background:#f9d6d5}.unverifiable,.skip{background:#fff3cd}"
    << "code{font-size:11px;word-break:break-all}code.copy{user-select:all}td{max-width:16em}</style></head><body>\n";
  f << "<h1>kverify: " << lines.size() << " cases" << (device.empty() ? "" : " on " + esc(device)) << "</h1>\n<p><small>"
    << esc(run_id) << "</small></p>\n";
  if (!lines.empty()) identity_header(f, lines.front());
  f << "<p>" << lines.size() << " cases:";
  for (auto& [k, v] : counts) f << " <span class='" << esc(k) << "'>" << v << " " << esc(k) << "</span>";
  f << "</p>\n<p>Failing, erroring and unverifiable cases first, each with its replay line (one click selects it). "
    << "Click a column to sort by it; filter: <input id='filter' placeholder='op, impl, dtype, reason...' size='40'></p>\n"
    << "<table id='cases'><thead><tr><th>verdict</th><th>op</th><th>impl</th><th>dtypes</th><th>shape</th><th>attrs</th>"
    << "<th>config</th><th>dist</th><th title='largest share of an admissible half-width used before the output&#39;s own "
    << "rounding (above 1 fails)'>headroom used</th><th>max ulps</th><th title='hover a cell: the case total'>kernel ms</th>"
    << "<th>reason / replay</th></tr></thead><tbody>\n";
  std::vector<const nlohmann::json*> order;
  for (auto& j : lines) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
    return verdict_rank(a->value("verdict", "error")) < verdict_rank(b->value("verdict", "error"));
  });
  for (const nlohmann::json* jp : order) case_row(f, *jp);
  f << "</tbody></table>" << kTriageScript << html::layout_probe() << "</body></html>\n";
}

}  // namespace kv
