// `kverify report` (results and drift analyses -> report.html, report.json, junit.xml) and
// `kverify compare` (two reports -> compare.html, compare.json).
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kv {

struct ReportCommand {
  std::vector<std::string> results, drifts;
  std::string run_id, out = "out/report", title;
  double safety = 2.0;
};

struct CompareCommand {
  std::string a, b, out = "out/compare";
};

CLI::App* add_report_command(CLI::App& app, ReportCommand& r);
CLI::App* add_compare_command(CLI::App& app, CompareCommand& c);
/// Writes the report files; throws UsageError on unreadable or malformed input.
int run_report_command(const ReportCommand& r);
int run_compare_command(const CompareCommand& c);

/// report.html, report.json and junit.xml for these lines in dir; returns the HTML's path.
std::string write_report_files(const std::string& dir, const std::vector<nlohmann::json>& lines,
                               const std::vector<nlohmann::json>& drifts, double safety, const std::string& title,
                               const std::vector<std::string>& sources);

}  // namespace kv
