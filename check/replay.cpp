// Building replay lines (check/replay.hpp).
#include "check/replay.hpp"

#include <sstream>

#include "core/case.hpp"
#include "core/error.hpp"

namespace kv {

nlohmann::json ImplSources::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (!plugins.empty()) j["plugins"] = plugins;
  if (!worker.empty()) j["worker"] = worker;
  if (worker_timeout_s > 0) j["worker_timeout_s"] = worker_timeout_s;
  return j;
}

ImplSources ImplSources::from_json(const nlohmann::json& j) {
  ImplSources s;
  try {
    for (auto& [k, v] : j.items()) {
      if (k == "plugins")
        s.plugins = v.get<std::vector<std::string>>();
      else if (k == "worker")
        s.worker = v.get<std::string>();
      else if (k == "worker_timeout_s")
        s.worker_timeout_s = v.get<double>();
      else
        throw UsageError("unknown field '" + k + "'");
    }
  } catch (const std::exception& e) {
    throw UsageError(std::string("malformed impl sources ") + j.dump() + ": " + e.what());
  }
  return s;
}

std::string shell_quote(const std::string& s) {
  static const std::string safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+./=,:@%";
  if (!s.empty() && s.find_first_not_of(safe) == std::string::npos) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

namespace {

/// " --device K [--device-profile P] [--plugin ABS]... [--worker 'CMD'] [--worker-timeout S]"
std::string run_options(const DeviceInfo& device, const ImplSources& sources) {
  std::string r = " --device " + shell_quote(device.kind.empty() ? "host" : device.kind);
  if (!device.profile.overrides.empty()) r += " --device-profile " + shell_quote(device.profile.overrides);
  for (auto& p : sources.plugins) r += " --plugin " + shell_quote(p);
  if (!sources.worker.empty()) r += " --worker " + shell_quote(sources.worker);
  if (sources.worker_timeout_s > 0) {
    std::ostringstream t;
    t << sources.worker_timeout_s;
    r += " --worker-timeout " + t.str();
  }
  return r;
}

/// The run options of a result line: its device kind and profile overrides, its impl sources.
std::string run_options(const nlohmann::json& result) {
  DeviceInfo d;
  if (result.contains("device") && result["device"].is_object()) {
    d.kind = result["device"].value("kind", "host");
    if (result["device"].contains("profile")) d.profile.overrides = result["device"]["profile"].value("overrides", "");
  }
  ImplSources s;
  try {
    if (result.contains("impl_sources")) s = ImplSources::from_json(result["impl_sources"]);
  } catch (const UsageError&) {
    // A line written by another build: its device alone.
  }
  return run_options(d, s);
}

}  // namespace

std::string replay_command(const std::string& case_str, const DeviceInfo& device, const ImplSources& sources,
                           const std::string& flags) {
  return "kverify replay " + shell_quote(case_str) + run_options(device, sources) + flags;
}

std::string replay_command(const nlohmann::json& result, const std::string& flags) {
  if (result.contains("replay") && result["replay"].is_string()) return result["replay"].get<std::string>() + flags;
  return "kverify replay " + shell_quote(result.value("case", "")) + run_options(result) + flags;
}

std::string drift_command(const nlohmann::json& result, const std::string& forecast) {
  Case c;
  try {
    c = Case::parse(result.value("case", ""));
  } catch (const UsageError&) {
    return replay_command(result);
  }
  std::string dt, at;
  for (auto& [k, d] : c.dtypes) append_sep(dt, ",", k + ":" + std::string(dtype_name(d)));
  for (auto& [k, v] : c.attrs) append_sep(at, ",", k + "=" + v);
  std::string r = "kverify drift --op " + shell_quote(c.op) + " --impl " + shell_quote(c.impl) + " --shape " +
                  shape_str(c.shape) + " --dist " + shell_quote(c.dist) + " --seed " + std::to_string(c.seed) +
                  " --repeat 2";
  if (!dt.empty()) r += " --dtype " + shell_quote(dt);
  if (!at.empty()) r += " --attrs " + shell_quote(at);
  if (!forecast.empty()) r += " --forecast " + shell_quote(forecast);
  return r + run_options(result);
}

}  // namespace kv
