// --sanitize: a sample of a run's cases is run again, once per compute-sanitizer tool
// (memcheck, racecheck, initcheck, synccheck), in a worker started under the tool; what
// the tool reports goes beside the case's verdict. Where the tool is missing or refuses,
// the case says so (a visible skip with the reason).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/runner.hpp"
#include "core/case.hpp"

namespace kv {

struct SanitizeOptions {
  std::vector<std::string> tools;  // empty: off
  int every = 10;                  // every k-th case of the run (the first included)
};

/// Throws UsageError for an unknown tool.
void check_sanitize_tools(const std::vector<std::string>& tools);

/// Per tool: {"errors": N, "log": path} or {"skipped": why}.
nlohmann::json sanitize_case(const Case& c, const RunEnv& env, const std::vector<std::string>& worker_args,
                             double timeout_s, const std::vector<std::string>& tools, const std::string& log_dir);

/// A tool's log: {"errors": N[, "warnings": W]}, or {"skipped": its last line} without a summary.
nlohmann::json parse_sanitizer_log(const std::string& text);

/// Errors found in a sanitize_case() result (skips count none).
int64_t sanitizer_errors(const nlohmann::json& s);

}  // namespace kv
