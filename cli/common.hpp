// Options and setup shared by the subcommands that run cases (run, replay, fuzz): the
// device, its profile, the watchdog, the output directory and the external impls.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "run/runner.hpp"
#include "run/sanitize.hpp"
#include "ext/extensions.hpp"

namespace kv {

struct Common {
  std::string shard;
  std::string device = "auto";
  std::string profile;
  double timeout_s = 600;
  std::string out = "out";
  bool resume = false;  // run: skip cases already in out/results.jsonl
  ExtensionOptions ext;
  SanitizeOptions sanitize;  // run and replay
  std::string contract = "declared";  // declared|audited (RunEnv::audited)
};

/// A seed option's check: decimal digits only (CLI11 alone would read -1 as 2^64 - 1).
CLI::Validator seed_check();
/// A duration's check: a finite number of seconds above 0 (CLI11's PositiveNumber lets nan through).
CLI::Validator seconds_check();
/// Creates the output directory and checks it is writable: UsageError (exit 2) naming it otherwise.
void make_out_dir(const std::string& dir);
/// Every value distribution, comma-separated (help texts of --dist).
std::string dist_names();

/// --plugin, --worker, --worker-timeout, --plugin-timeout (list has these alone).
void add_extension_options(CLI::App* app, ExtensionOptions& o);
/// --device, --device-profile, --timeout, --out, --plugin, --worker, --worker-timeout.
void add_common(CLI::App* app, Common& c);
/// --contract declared|audited (run, replay, fuzz, gate).
void add_contract_option(CLI::App* app, Common& c);
/// --sanitize and --sanitize-every (run, replay and fuzz; the default sample is c.sanitize.every).
void add_sanitize_options(CLI::App* app, Common& c);
/// The device (throws UsageError when it is not there) and a fresh run id.
RunEnv make_env(const Common& c);
/// Arguments of the case-running worker process (run/supervisor.hpp).
std::vector<std::string> worker_args(const Common& c, const RunEnv& env, const Extensions& ext);
/// Loads the run's plugins and starts its worker; says on stderr what could not be used.
std::unique_ptr<Extensions> load_extensions(const Common& c, const RunEnv& env);

}  // namespace kv
