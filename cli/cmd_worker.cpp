// `kverify __worker` (internal): the process that runs cases for run, replay, fuzz and
// drift (run/supervisor.hpp), loading the run's plugins and worker itself.
#include "cli/command.hpp"
#include "cli/common.hpp"
#include "ext/extensions.hpp"
#include "run/supervisor.hpp"
#ifdef KV_HAVE_CUDA
#include "device/calibrate.hpp"
#endif

namespace kv {

namespace {

struct WorkerArgs : CommandArgs {
  Common common;
  std::string run_id, repro_dir, outputs_dir, external, sources;
  std::vector<std::string> plugins;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_worker(CLI::App& sub) {
  auto a = std::make_unique<WorkerArgs>();
  sub.group("");
  sub.add_option("--device", a->common.device);
  sub.add_option("--device-profile", a->common.profile);
  sub.add_option("--contract", a->common.contract);
  sub.add_option("--run-id", a->run_id);
  sub.add_option("--repro-dir", a->repro_dir);
  sub.add_option("--outputs-dir", a->outputs_dir);
  sub.add_option("--plugin", a->plugins);
  sub.add_option("--external", a->external);
  sub.add_option("--impl-sources", a->sources);
  return a;
}

int run_worker(CommandArgs& args, const Argv&) {
  const WorkerArgs& a = static_cast<WorkerArgs&>(args);
  RunEnv env = make_env(a.common);
  env.run_id = a.run_id;
  env.repro_dir = a.repro_dir;
  env.outputs_dir = a.outputs_dir;
  if (!a.sources.empty()) env.sources = ImplSources::from_json(nlohmann::json::parse(a.sources));
#ifdef KV_HAVE_CUDA
  // Contracts are held to what this GPU's math functions measurably do.
  if (env.device.kind == "cuda") env.measured_ulps = calibrate_math().max_ulps;
#endif
  return worker_main(env, [&](FILE* to_parent) { load_extensions_in_worker(a.plugins, a.external, to_parent); });
}

}  // namespace kv
