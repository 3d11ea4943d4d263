// `kverify compare`: two reports (report.json, or results .jsonl) side by side ->
// compare.html and compare.json.
#include <filesystem>
#include <iostream>

#include "check/results.hpp"
#include "cli/command.hpp"
#include "cli/report_files.hpp"
#include "core/error.hpp"
#include "render/report.hpp"

namespace kv {

using json = nlohmann::json;

namespace {

struct CompareArgs : CommandArgs {
  std::string a, b, out = "out/compare";
};

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

std::unique_ptr<CommandArgs> setup_compare(CLI::App& sub) {
  auto a = std::make_unique<CompareArgs>();
  CompareArgs& c = *a;
  sub.add_option("a", c.a, "report.json (or results .jsonl) of A")->required();
  sub.add_option("b", c.b, "report.json (or results .jsonl) of B")->required();
  sub.add_option("--out", c.out, "directory to write compare.html and compare.json into (default out/compare)");
  return a;
}

int run_compare(CommandArgs& args, const Argv&) {
  const CompareArgs& c = static_cast<CompareArgs&>(args);
  const json cmp = build_comparison(load_report(c.a), load_report(c.b));
  std::filesystem::create_directories(c.out);
  const std::filesystem::path d(c.out);
  write_text(d / "compare.json", cmp.dump(1));
  write_text(d / "compare.html", render_compare_html(cmp));
  std::cout << "compare: " << (d / "compare.html").string() << "\n";
  return 0;
}

}  // namespace kv
