// Impls from outside kverify for one run: plugins (--plugin, repeatable) and an external
// worker (--worker 'CMD'). In the parent each plugin is loaded by a probe process of its
// own (ext/plugin_probe.hpp: plugin code never runs in the parent) and the worker is
// started once; the process that runs cases loads the same plugins and reaches the worker
// through the parent (ext/external_impl.hpp). A plugin or worker that cannot be used —
// refused, crashed or hung, when loading or later in contract() — is reported, its
// selected cases become `error` with the reason, and the run goes on.
#pragma once
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/registry.hpp"

namespace kv {

struct ExtensionOptions {
  std::vector<std::string> plugins;
  std::string worker;
  double worker_timeout_s = 300;
  double plugin_timeout_s = 60;  // a plugin's loading, and each contract() its probe answers
};

class WorkerClient;
class ExternalTransport;
class PluginProbe;

class Extensions {
 public:
  /// Loads the plugins and starts the worker (hello). out_dir receives worker.log.
  Extensions(const ExtensionOptions& o, const std::string& out_dir, const DeviceInfo& dev);
  ~Extensions();
  Extensions(const Extensions&) = delete;
  Extensions& operator=(const Extensions&) = delete;

  struct Failure {
    std::string source;  // "worker" or "plugin:<file stem>"
    std::string reason;
  };
  /// Those found when loading, and plugins whose probe crashed or hung since.
  std::vector<Failure> failures() const;
  /// Arguments for the case-running process (plugins that loaded, the worker's impls).
  std::vector<std::string> worker_args() const;
  /// Answers a relayed request from the case-running process (null without a worker).
  nlohmann::json relay(const nlohmann::json& req);
  bool has_worker() const { return transport_ != nullptr; }
  /// For each failure, impls standing in for what it would have offered: each name in
  /// `impls` unknown to the registry, or the failure's source when none is named, on
  /// every op in `ops`. Their cases end as `error` with the failure's reason.
  void register_stand_ins(const std::vector<std::string>& ops, const std::vector<std::string>& impls,
                          const std::string& device);

 private:
  std::vector<std::string> loaded_plugins_;
  std::vector<std::shared_ptr<PluginProbe>> probes_;
  std::vector<Failure> failures_;
  std::string io_dir_;
  std::unique_ptr<WorkerClient> worker_;
  std::shared_ptr<ExternalTransport> transport_;
};

/// In the case-running process: the same plugins, and the worker's impls through the relay.
void load_extensions_in_worker(const std::vector<std::string>& plugins, const std::string& external_dir,
                               FILE* to_parent);

/// Why an impl cannot run (it stands in for a plugin or worker that failed to load, or its
/// plugin's probe crashed or hung).
std::optional<std::string> unavailable_reason(const Impl& impl);

}  // namespace kv
