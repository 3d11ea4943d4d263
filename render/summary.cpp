// HTML summary: identity, verdict counts, one row per case, replay commands for failures.
#include "render/summary.hpp"

#include <fstream>
#include <map>

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
    << "code{font-size:12px}</style></head><body>\n";
  f << "<h1>kverify run " << esc(run_id) << "</h1>\n";
  if (!lines.empty()) {
    auto& j = lines.front();
    const auto& d = j["device"];
    if (str(d["kind"]) == "host")
      f << "<p>Device: <b>" << esc(j.value("device_name", "")) << "</b> (a host run on this machine's CPU, no GPU; profile "
        << esc(str(d["profile"])) << ")<br>Build: commit ";
    else
      f << "<p>Device: <b>" << esc(j.value("device_name", "")) << "</b> (" << esc(str(d["kind"])) << ", UUID "
        << esc(str(d["uuid"])) << ", compute capability " << esc(str(d["compute_capability"])) << ", driver "
        << esc(str(d["driver_version"])) << ", CUDA runtime " << esc(str(d["runtime_version"])) << ", MIG "
        << esc(str(d["mig_mode"])) << ", profile " << esc(str(d["profile"])) << ")<br>Build: commit ";
    f << esc(str(j["build"]["commit"]))
      << (j["build"].value("dirty", false) ? " (dirty)" : "") << ", " << esc(str(j["build"]["compiler"])) << "</p>\n";
  }
  f << "<p>" << lines.size() << " cases:";
  for (auto& [k, v] : counts) f << " <span class='" << esc(k) << "'>" << v << " " << esc(k) << "</span>";
  f << "</p>\n<table><tr><th>verdict</th><th>op</th><th>impl</th><th>dtypes</th><th>shape</th><th>attrs</th>"
    << "<th>config</th><th>dist</th><th>worst ratio</th><th>max ulps</th><th>reference</th><th>kernel (ms)</th><th>time (s)</th>"
    << "<th>reason / replay</th></tr>\n";
  for (auto& j : lines) {
    std::string v = j.value("verdict", "error");
    double worst = 0, ulps = 0;
    bool inf = false;
    if (j.contains("outputs"))
      for (auto& [n, o] : j["outputs"].items()) {
        if (o["max_ratio"].is_number()) worst = std::max(worst, o["max_ratio"].get<double>());
        else inf = true;
        if (o["max_ulps"].is_number()) ulps = std::max(ulps, o["max_ulps"].get<double>());
      }
    f << "<tr class='" << esc(v) << "'><td>" << esc(v) << "</td><td>" << esc(j.value("op", "")) << "</td><td>"
      << esc(j.value("impl", "")) << "</td><td>" << esc(str(j["dtypes"])) << "</td><td>" << esc(str(j["shape"]))
      << "</td><td>" << esc(str(j["attrs"])) << "</td><td>" << esc(str(j["config"])) << "</td><td>"
      << esc(j.value("dist", "")) << "</td><td>" << (inf ? std::string("inf") : std::to_string(worst)) << "</td><td>"
      << ulps << "</td><td>" << esc(j.contains("reference") ? str(j["reference"]["method"]) : "") << "</td><td>"
      << (j.contains("timings") && j["timings"].contains("kernel_ms") ? std::to_string(j["timings"]["kernel_ms"].get<double>())
                                                                      : std::string())
      << "</td><td>"
      << (j.contains("timings") ? std::to_string(j["timings"].value("total_s", 0.0)) : "") << "</td><td>";
    if (j.contains("reason")) f << esc(str(j["reason"]));
    if (v == "fail" || v == "error") f << "<br><code>" << esc(replay_command(j)) << "</code>";
    f << "</td></tr>\n";
  }
  f << "</table></body></html>\n";
}

}  // namespace kv
