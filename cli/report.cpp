#include "cli/report.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "check/results.hpp"
#include "core/error.hpp"
#include "render/report.hpp"

namespace kv {

using json = nlohmann::json;

namespace {

void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p);
  if (!f) throw UsageError("cannot write '" + p.string() + "'");
  f << s;
  if (!f.flush()) throw UsageError("cannot write '" + p.string() + "'");
}

json read_json_file(const std::string& path, const char* what) {
  std::ifstream f(path);
  if (!f) throw UsageError("cannot open " + std::string(what) + " '" + path + "'");
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    throw UsageError(std::string(what) + " '" + path + "' is not valid JSON: " + e.what());
  }
}

/// A report from a report.json, or built from a results file (.jsonl).
json load_report(const std::string& path) {
  if (path.size() >= 6 && path.substr(path.size() - 6) == ".jsonl") {
    ReportOptions opt;
    opt.sources = {path};
    return build_report(read_results(path), {}, opt);
  }
  json r = read_json_file(path, "report");
  if (!r.is_object() || r.value("schema", "") != "kverify-report/1")
    throw UsageError("'" + path + "' is not a kverify report (report.json, schema kverify-report/1) nor a results file (.jsonl)");
  return r;
}

}  // namespace

std::string write_report_files(const std::string& dir, const std::vector<json>& lines, const std::vector<json>& drifts,
                               double safety, const std::string& title, const std::vector<std::string>& sources) {
  ReportOptions opt;
  opt.title = title, opt.safety = safety, opt.sources = sources;
  const json rep = build_report(lines, drifts, opt);
  std::filesystem::create_directories(dir);
  const std::filesystem::path d(dir);
  write_text(d / "report.json", rep.dump(1));
  write_text(d / "junit.xml", render_junit(lines));
  write_text(d / "report.html", render_report_html(rep));
  return (d / "report.html").string();
}

CLI::App* add_report_command(CLI::App& app, ReportCommand& r) {
  auto* c = app.add_subcommand("report", "the tolerance report of results files: report.html (self-contained, charts "
                                         "inlined), report.json and junit.xml");
  c->add_option("--results", r.results, "results file (JSON Lines; repeatable)")->required();
  c->add_option("--drift", r.drifts, "a drift.json from kverify drift to include (repeatable)");
  c->add_option("--run-id", r.run_id, "only this run of the results files");
  c->add_option("--safety", r.safety, "recommended (atol, rtol) = smallest covering pair x this factor (default 2)")
      ->check(CLI::PositiveNumber);
  c->add_option("--title", r.title, "the report's title (default: the GPU's name)");
  c->add_option("--out", r.out, "directory to write the three files into (default out/report)");
  return c;
}

CLI::App* add_compare_command(CLI::App& app, CompareCommand& c) {
  auto* s = app.add_subcommand("compare", "two reports side by side (two GPUs, or two builds): compare.html and compare.json");
  s->add_option("a", c.a, "report.json (or results .jsonl) of A")->required();
  s->add_option("b", c.b, "report.json (or results .jsonl) of B")->required();
  s->add_option("--out", c.out, "directory to write compare.html and compare.json into (default out/compare)");
  return s;
}

int run_report_command(const ReportCommand& r) {
  std::vector<json> lines;
  int64_t skipped = 0;  // malformed lines cost only themselves, but the exit code says so
  for (auto& f : r.results) {
    auto l = read_results_skipping(f, r.run_id, skipped);
    lines.insert(lines.end(), l.begin(), l.end());
  }
  if (lines.empty()) throw UsageError("no result lines" + (r.run_id.empty() ? std::string() : " for run " + r.run_id));
  std::vector<json> drifts;
  for (auto& f : r.drifts) {
    json d = read_json_file(f, "drift analysis");
    if (!d.is_object() || !d.contains("configs") || !d.contains("outputs"))
      throw UsageError("'" + f + "' is not a drift analysis (kverify drift's drift.json)");
    drifts.push_back(std::move(d));
  }
  std::string title = r.title;
  if (title.empty()) title = "kverify tolerance report: " + lines.front().value("device_name", "unknown device");
  std::vector<std::string> sources = r.results;
  sources.insert(sources.end(), r.drifts.begin(), r.drifts.end());
  const std::string html = write_report_files(r.out, lines, drifts, r.safety, title, sources);
  std::cout << "report: " << html << " (" << lines.size() << " cases, " << drifts.size() << " drift analyses)\n";
  if (skipped) std::cout << "report: " << skipped << " malformed result lines skipped (named above)\n";
  return skipped ? 1 : 0;
}

int run_compare_command(const CompareCommand& c) {
  const json cmp = build_comparison(load_report(c.a), load_report(c.b));
  std::filesystem::create_directories(c.out);
  const std::filesystem::path d(c.out);
  write_text(d / "compare.json", cmp.dump(1));
  write_text(d / "compare.html", render_compare_html(cmp));
  std::cout << "compare: " << (d / "compare.html").string() << "\n";
  return 0;
}

}  // namespace kv
