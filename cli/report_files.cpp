// Report files (cli/report_files.hpp): writing them, and reading the JSON files that
// `report` and `compare` take.
#include "cli/report_files.hpp"

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "render/report.hpp"

namespace kv {

using json = nlohmann::json;

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

}  // namespace kv
