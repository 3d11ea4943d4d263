// Running a case under compute-sanitizer and reading its log.
#include "run/sanitize.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "run/supervisor.hpp"
#include "core/child_io.hpp"
#include "core/error.hpp"

namespace kv {

namespace {

std::string find_sanitizer() {
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("PATH")) {
    std::stringstream ss(p);
    std::string d;
    while (std::getline(ss, d, ':')) dirs.push_back(d);
  }
  dirs.push_back("/usr/local/cuda/bin");
  for (auto& d : dirs) {
    auto f = std::filesystem::path(d) / "compute-sanitizer";
    if (access(f.c_str(), X_OK) == 0) return f.string();
  }
  return "";
}

}  // namespace

void check_sanitize_tools(const std::vector<std::string>& tools) {
  static const std::set<std::string> known = {"memcheck", "racecheck", "initcheck", "synccheck"};
  for (auto& t : tools)
    if (!known.count(t)) throw UsageError("--sanitize: unknown tool '" + t + "' (memcheck, racecheck, initcheck, synccheck)");
}

nlohmann::json sanitize_case(const Case& c, const RunEnv& env, const std::vector<std::string>& worker_args,
                             double timeout_s, const std::vector<std::string>& tools, const std::string& log_dir) {
  nlohmann::json out = nlohmann::json::object();
  const std::string tool_path = env.device.kind == "cuda" ? find_sanitizer() : "";
  for (auto& t : tools) {
    if (env.device.kind != "cuda") {
      out[t] = {{"skipped", "the run's device is the host: no CUDA kernels to check"}};
      continue;
    }
    if (tool_path.empty()) {
      out[t] = {{"skipped", "compute-sanitizer not found on PATH or in /usr/local/cuda/bin"}};
      continue;
    }
    std::filesystem::create_directories(log_dir);
    const std::string log = (std::filesystem::path(log_dir) / (hex64(c.case_id()) + "." + t + ".log")).string();
    std::filesystem::remove(log);
    {
      // Sanitized kernels run 10-100x slower: a generous watchdog, one worker per tool.
      Supervisor sup(worker_args, timeout_s * 20);
      sup.set_wrapper({tool_path, "--tool", t, "--log-file", log, "--print-limit", "20"});
      nlohmann::json r = sup.run(c, env);
      if (r.value("verdict", "") == "error") {
        out[t] = {{"skipped", "the case ended in error under " + t + ": " + r.value("reason", "")}, {"log", log}};
        continue;
      }
    }  // the worker exits here, and the tool writes its summary
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    out[t] = parse_sanitizer_log(text);
    out[t]["log"] = log;
  }
  return out;
}

nlohmann::json parse_sanitizer_log(const std::string& text) {
  std::smatch m;
  // memcheck, initcheck, synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK
  // SUMMARY: H hazards displayed (E errors, W warnings)".
  static const std::regex summary("ERROR SUMMARY: ([0-9]+) error");
  static const std::regex races("RACECHECK SUMMARY: [0-9]+ hazards? displayed \\(([0-9]+) errors?, ([0-9]+) warnings?\\)");
  if (std::regex_search(text, m, races)) return {{"errors", std::stoll(m[1].str())}, {"warnings", std::stoll(m[2].str())}};
  if (std::regex_search(text, m, summary)) return {{"errors", std::stoll(m[1].str())}};
  return {{"skipped", "no summary from the tool: " + last_line(text)}};
}

int64_t sanitizer_errors(const nlohmann::json& s) {
  int64_t n = 0;
  for (auto& [t, r] : s.items()) n += r.value("errors", int64_t(0));
  return n;
}

}  // namespace kv
