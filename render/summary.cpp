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

}  // namespace

void write_summary_html(const std::string& path, const std::vector<nlohmann::json>& lines, const std::string& run_id) {
  std::ofstream f(path);
  if (!f) throw UsageError("cannot write '" + path + "'");
  std::map<std::string, int> counts;
  for (auto& j : lines) ++counts[j.value("verdict", "error")];
  f << "<!doctype html><html><head><meta charset='utf-8'><title>kverify run " << esc(run_id) << "</title><style>"
    << "body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}"
    << "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}"
    << ".pass{background:#e6f4e6}.fail,.error{background:#f9d6d5}.unverifiable,.skip{background:#fff3cd}"
    << "code{font-size:12px;word-break:break-all}td{max-width:28em;vertical-align:top}</style></head><body>\n";
  f << "<h1>kverify run " << esc(run_id) << "</h1>\n";
  if (!lines.empty()) {
    auto& j = lines.front();
    const auto& d = j["device"];
    if (str(d["kind"]) == "host")
      f << "<p>Device: <b>" << esc(j.value("device_name", "")) << "</b> (a host run on this machine's CPU, no GPU; profile "
        << kv_cells(d["profile"]) << ")<br>Build: commit ";
    else
      f << "<p>Device: <b>" << esc(j.value("device_name", "")) << "</b> (" << esc(str(d["kind"])) << ", UUID "
        << esc(str(d["uuid"])) << ", compute capability " << esc(str(d["compute_capability"])) << ", driver "
        << esc(str(d["driver_version"])) << ", CUDA runtime " << esc(str(d["runtime_version"])) << ", MIG "
        << esc(str(d["mig_mode"])) << ", profile " << kv_cells(d["profile"]) << ")<br>Build: commit ";
    f << esc(str(j["build"]["commit"]))
      << (j["build"].value("dirty", false) ? " (dirty)" : "") << ", " << esc(str(j["build"]["compiler"])) << "</p>\n";
  }
  f << "<p>" << lines.size() << " cases:";
  for (auto& [k, v] : counts) f << " <span class='" << esc(k) << "'>" << v << " " << esc(k) << "</span>";
  f << "</p>\n<p>Failing, erroring and unverifiable cases first. Click a column to sort by it; filter: "
    << "<input id='filter' placeholder='op, impl, dtype, reason...' size='40'></p>\n"
    << "<table id='cases'><thead><tr><th>verdict</th><th>op</th><th>impl</th><th>dtypes</th><th>shape</th><th>attrs</th>"
    << "<th>config</th><th>dist</th><th>worst ratio</th><th>max ulps</th><th>reference</th><th>kernel (ms)</th>"
    << "<th>time (s)</th><th>reason / replay</th></tr></thead><tbody>\n";
  std::vector<const nlohmann::json*> order;
  for (auto& j : lines) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
    return verdict_rank(a->value("verdict", "error")) < verdict_rank(b->value("verdict", "error"));
  });
  for (const nlohmann::json* jp : order) {
    const nlohmann::json& j = *jp;
    std::string v = j.value("verdict", "error");
    double worst = 0, ulps = 0;
    bool inf = false;
    if (j.contains("outputs"))
      for (auto& [n, o] : j["outputs"].items()) {
        if (o["max_ratio"].is_number()) worst = std::max(worst, o["max_ratio"].get<double>());
        else inf = true;
        if (o["max_ulps"].is_number()) ulps = std::max(ulps, o["max_ulps"].get<double>());
      }
    const bool has_t = j.contains("timings");
    f << "<tr class='" << esc(v) << "'><td data-v='" << verdict_rank(v) << "'>" << esc(v) << "</td><td>"
      << esc(j.value("op", "")) << "</td><td>" << esc(j.value("impl", "")) << "</td><td>" << kv_cells(j["dtypes"])
      << "</td><td>" << shape_text(j["shape"]) << "</td><td>" << kv_cells(j["attrs"]) << "</td><td>"
      << kv_cells(j["config"]) << "</td><td>" << esc(j.value("dist", "")) << "</td><td data-v='"
      << (inf ? std::string("1e308") : std::to_string(worst)) << "'>" << (inf ? std::string("inf") : html::num(worst))
      << "</td><td data-v='" << ulps << "'>" << html::num(ulps) << "</td><td>"
      << esc(j.contains("reference") ? str(j["reference"]["method"]) : "") << "</td><td>"
      << (has_t && j["timings"].contains("kernel_ms") ? html::num(j["timings"]["kernel_ms"].get<double>()) : std::string())
      << "</td><td>" << (has_t ? html::num(j["timings"].value("total_s", 0.0)) : std::string()) << "</td><td>";
    if (j.contains("reason")) f << esc(str(j["reason"]));
    if (v == "fail" || v == "error") f << "<br><code>" << esc(replay_command(j)) << "</code>";
    f << "</td></tr>\n";
  }
  f << "</tbody></table>" << kTriageScript << "</body></html>\n";
}

}  // namespace kv
