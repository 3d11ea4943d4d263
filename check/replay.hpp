// Replay lines: the one place a `kverify replay ...` command is built, from the case and
// what the run needs to find the same impl on the same device again (device kind,
// profile overrides, plugins, worker command). Results, case.json, failures.jsonl, the
// reports and the gate all print what this gives.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.hpp"

namespace kv {

/// Where a run's impls come from besides the build: what a replay must load again.
struct ImplSources {
  std::vector<std::string> plugins;  // absolute paths
  std::string worker;                // the --worker command, as given
  double worker_timeout_s = 0;       // 0: the default

  bool empty() const { return plugins.empty() && worker.empty(); }
  nlohmann::json to_json() const;
  /// Reads to_json's object; throws UsageError on anything else.
  static ImplSources from_json(const nlohmann::json& j);
};

/// s as one shell word: bare when it holds only characters no shell treats specially,
/// else in single quotes (a ' inside written as '\'').
std::string shell_quote(const std::string& s);

/// `kverify replay '<case>' --device K [--device-profile P] [--plugin ABS]... [--worker 'CMD']
/// [--worker-timeout S]` and `flags` (e.g. " --sanitize memcheck"), ready for a shell.
std::string replay_command(const std::string& case_str, const DeviceInfo& device, const ImplSources& sources,
                           const std::string& flags = "");

/// The replay line of a result line: the `replay` field the run wrote into it, else one built
/// from its case, device and `impl_sources` (lines from builds before the field); `flags`
/// appended.
std::string replay_command(const nlohmann::json& result, const std::string& flags = "");

/// `kverify drift` over the case of a result line (every config, two runs each, and a
/// `--forecast` profile when given), with the line's device and impl sources: what reruns a
/// broken run_to_run, config_invariant or (with the other GPU's profile) gpu_invariant
/// claim, which one case alone cannot show.
std::string drift_command(const nlohmann::json& result, const std::string& forecast = "");

}  // namespace kv
