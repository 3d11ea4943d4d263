// Options and setup shared by the subcommands that run cases (cli/common.hpp).
#include "cli/common.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>
#include <unistd.h>

#include "core/error.hpp"
#include "core/inputs.hpp"
#ifdef KV_HAVE_CUDA
#include "device/cuda_device.hpp"
#endif

namespace kv {

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& s) {
        try {
          parse_seed(s);
          return std::string();
        } catch (const UsageError& e) {
          return std::string(e.what());
        }
      },
      "SEED");
}

CLI::Validator seconds_check() {
  return CLI::Validator(
      [](std::string& s) {
        try {
          const double v = parse_real(s, "number of seconds");
          return std::isfinite(v) && v > 0 ? std::string() : "seconds must be a finite number above 0, not '" + s + "'";
        } catch (const UsageError& e) {
          return std::string(e.what());
        }
      },
      "SECONDS");
}

std::string dist_names() {
  std::string s;
  for (const std::string& d : known_dists()) s += (s.empty() ? "" : ", ") + d;
  return s;
}

void make_out_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError("cannot write to output directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
}

void add_extension_options(CLI::App* app, ExtensionOptions& o) {
  // One value per --plugin, so a positional after it (replay's case) is not taken as a second.
  app->add_option("--plugin", o.plugins, "a plugin (.so) registering impls (repeatable; include/kverify/plugin.h)")
      ->allow_extra_args(false);
  app->add_option("--worker", o.worker, "an external worker command, started once (examples/worker/PROTOCOL.md)");
  app->add_option("--worker-timeout", o.worker_timeout_s, "watchdog seconds per worker request (default 300)")
      ->check(seconds_check());
  app->add_option("--plugin-timeout", o.plugin_timeout_s,
                  "watchdog seconds for loading a plugin and for each contract() answer of it (default 60)")
      ->check(seconds_check());
}

void add_common(CLI::App* app, Common& c) {
  app->add_option("--device", c.device, "cuda|host (default: cuda when a GPU is present, else host)")
      ->check(CLI::IsMember({"auto", "cuda", "host"}));
  app->add_option("--device-profile", c.profile, "override launch-relevant device facts, e.g. sm_count=108,warp_size=64");
  app->add_option("--timeout", c.timeout_s, "watchdog seconds per case (the worker is killed and restarted; default 600)")
      ->check(seconds_check());
  app->add_option("--out", c.out, "output directory (results.jsonl is appended to; summary.html)");
  add_extension_options(app, c.ext);
}

void add_contract_option(CLI::App* app, Common& c) {
  app->add_option("--contract", c.contract,
                  "declared (default): judge under each impl's declared contract; audited: measure each case's "
                  "reduction shapes (kverify audit) and judge under those where measured, once per impl version "
                  "and case geometry")
      ->check(CLI::IsMember({"declared", "audited"}));
}

void add_sanitize_options(CLI::App* app, Common& c) {
  app->add_option("--sanitize", c.sanitize.tools,
                  "re-run a sample of the cases under compute-sanitizer tools: memcheck,racecheck,initcheck,synccheck")
      ->delimiter(',');
  app->add_option("--sanitize-every", c.sanitize.every,
                  "sample every k-th case (default " + std::to_string(c.sanitize.every) + "; the first included)")
      ->check(CLI::PositiveNumber);
}

RunEnv make_env(const Common& c) {
  RunEnv env;
  std::string kind = c.device;
#ifdef KV_HAVE_CUDA
  std::string why;
  if (kind == "auto") kind = cuda_device_count(&why) > 0 ? "cuda" : "host";
  if (kind == "cuda") {
    if (cuda_device_count(&why) == 0) throw UsageError("--device cuda: no usable GPU (" + why + ")");
    env.device = cuda_device(0);
  } else {
    env.device = host_device();
  }
#else
  if (kind == "auto") kind = "host";
  if (kind == "cuda") throw UsageError("this build has no CUDA support (configure with -DKVERIFY_CUDA=ON)");
  env.device = host_device();
#endif
  env.device.profile.apply_overrides(c.profile);
  env.audited = c.contract == "audited";
  for (auto& p : c.ext.plugins) env.sources.plugins.push_back(std::filesystem::absolute(p).string());
  env.sources.worker = c.ext.worker;
  if (!c.ext.worker.empty() && c.ext.worker_timeout_s != ExtensionOptions{}.worker_timeout_s)
    env.sources.worker_timeout_s = c.ext.worker_timeout_s;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  std::random_device rd;
  env.run_id = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "-" +
               hex64((static_cast<uint64_t>(rd()) << 32) | rd()).substr(8);
  return env;
}

std::vector<std::string> worker_args(const Common& c, const RunEnv& env, const Extensions& ext) {
  std::vector<std::string> a = {"__worker", "--device", env.device.kind, "--run-id", env.run_id, "--repro-dir",
                                (std::filesystem::absolute(c.out) / "repro").string()};
  if (!c.profile.empty()) a.insert(a.end(), {"--device-profile", c.profile});
  if (env.audited) a.insert(a.end(), {"--contract", "audited"});
  if (!env.sources.empty()) a.insert(a.end(), {"--impl-sources", env.sources.to_json().dump()});
  for (auto& x : ext.worker_args()) a.push_back(x);
  return a;
}

/// Loads the run's plugins and starts its worker; says on stderr what could not be used.
std::unique_ptr<Extensions> load_extensions(const Common& c, const RunEnv& env) {
  auto ext = std::make_unique<Extensions>(c.ext, c.out, env.device);
  for (auto& f : ext->failures()) std::cerr << "kverify: " << f.source << " unusable, its cases will be errors: " << f.reason << "\n";
  return ext;
}

}  // namespace kv
