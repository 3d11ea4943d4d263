// `kverify report`: results files and drift analyses -> report.html (self-contained,
// charts inlined), report.json and junit.xml.
#include <iostream>

#include "check/results.hpp"
#include "cli/command.hpp"
#include "cli/report_files.hpp"
#include "core/error.hpp"

namespace kv {

using json = nlohmann::json;

namespace {

struct ReportArgs : CommandArgs {
  std::vector<std::string> results, drifts;
  std::string run_id, out = "out/report", title;
  double safety = 2.0;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_report(CLI::App& sub) {
  auto a = std::make_unique<ReportArgs>();
  ReportArgs& r = *a;
  sub.add_option("--results", r.results, "results file (JSON Lines; repeatable)")->required();
  sub.add_option("--drift", r.drifts, "a drift.json from kverify drift to include (repeatable)");
  sub.add_option("--run-id", r.run_id, "only this run of the results files");
  sub.add_option("--safety", r.safety, "recommended (atol, rtol) = smallest covering pair x this factor (default 2)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--title", r.title, "the report's title (default: the GPU's name)");
  sub.add_option("--out", r.out, "directory to write the three files into (default out/report)");
  return a;
}

int run_report(CommandArgs& args, const Argv&) {
  const ReportArgs& r = static_cast<ReportArgs&>(args);
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

}  // namespace kv
