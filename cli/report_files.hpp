// The report files kverify writes (`run` into its --out, `report`), and the JSON inputs
// of `report` and `compare`: write or read failures are usage errors (exit 2).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kv {

/// Writes s to p; UsageError naming p where it cannot.
void write_text(const std::filesystem::path& p, const std::string& s);

/// A JSON file (`what` names it in errors); UsageError where it cannot be read or parsed.
nlohmann::json read_json_file(const std::string& path, const char* what);

/// report.html, report.json and junit.xml for these lines in dir; returns the HTML's path.
std::string write_report_files(const std::string& dir, const std::vector<nlohmann::json>& lines,
                               const std::vector<nlohmann::json>& drifts, double safety, const std::string& title,
                               const std::vector<std::string>& sources);

}  // namespace kv
