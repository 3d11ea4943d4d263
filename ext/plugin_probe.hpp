// A plugin's code never runs in kverify's own process. The parent needs a plugin's impls
// (names, knobs) and, per case, its contract or the reason it refuses the case (validation,
// grouping, `list`); it asks a probe process (`kverify __plugin-probe PATH`) that loads the
// plugin, registers it and answers those questions one line at a time under a watchdog.
// A probe that crashes or hangs — in registration or in contract() — makes that plugin
// unusable for the rest of the run: its cases become `error` with the reason, the others
// run on. Cases run in the worker process, which loads the plugins itself (cli/supervisor).
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/child_io.hpp"
#include "core/registry.hpp"

namespace kv {

/// The probe process: loads the plugin at `path`, says which impls it registered (or why
/// it could not load), then answers contract questions until stdin closes.
int plugin_probe_main(const std::string& path);

class PluginProbe : public std::enable_shared_from_this<PluginProbe> {
 public:
  /// path as the user gave it (messages name it so); `timeout_s` bounds loading and each answer.
  PluginProbe(std::string path, double timeout_s);
  PluginProbe(const PluginProbe&) = delete;
  PluginProbe& operator=(const PluginProbe&) = delete;

  /// Starts the probe and registers the plugin's impls in `r` (each answering through
  /// this probe, which must be owned by a shared_ptr). Throws UsageError with the loader's
  /// reason, or HarnessError when the probe crashed or hung while loading.
  void start(Registry& r);

  /// The plugin's answer for one case: the reason it refuses it, or its contract. Throws
  /// HarnessError once the probe has failed (now or before), UsageError or HarnessError
  /// as the plugin's impl threw them.
  struct Answer {
    std::optional<std::string> declined, invalid;
    nlohmann::json contract;
    std::string error;
    bool usage_error = false;
  };
  const Answer& ask(const std::string& impl, const Case& c, const DeviceProfile& p);

  /// Why the plugin became unusable after it loaded (a crash or hang of its probe), or "".
  const std::string& failure() const { return failure_; }
  /// "plugin:<file stem>", as failures of extensions are named.
  std::string source() const;

 private:
  std::string path_;
  double timeout_s_;
  PipedChild child_;
  std::map<std::string, Answer> answers_;
  std::string failure_;
  bool loaded_ = false;
  /// One line from the probe within the watchdog; on a crash or hang the probe is
  /// stopped, failure_ set (`doing` says what it was doing) and HarnessError thrown.
  nlohmann::json exchange(const std::string& request, const std::string& doing);
};

/// Why a plugin impl registered through a probe cannot run (its probe failed, or its
/// accepts is malformed).
std::optional<std::string> probe_failure(const Impl& impl);

}  // namespace kv
