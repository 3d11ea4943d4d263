// `kverify fuzz` (fuzz/campaign.hpp): campaign cases run in the same worker process as
// `run` (a crash or hang becomes `error` and the worker restarts); --devices and
// --jobs-per-device run shards of it in campaign workers of their own (fuzz/devices.hpp).
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "cli/batch_check.hpp"
#include "cli/command.hpp"
#include "cli/common.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "fuzz/batch.hpp"
#include "fuzz/campaign.hpp"
#include "fuzz/devices.hpp"
#include "fuzz/state.hpp"
#include "run/repro.hpp"
#include "run/runner.hpp"
#include "run/sanitize.hpp"
#include "run/supervisor.hpp"

namespace kv {

namespace {

struct FuzzArgs : CommandArgs {
  Common common;
  CampaignOptions opts;
  uint64_t seed = 0;
  int64_t budget_cases = 0, max_elements = 0;
  double budget_seconds = 0;
  std::string shard, curated, memory_budget, devices = "1";
  int jobs_per_device = 1;
  std::vector<std::string> args;  // the command line after `fuzz` (what --devices hands its workers)
  CLI::Option *seed_opt = nullptr, *cases_opt = nullptr, *seconds_opt = nullptr, *max_opt = nullptr,
              *shard_opt = nullptr, *curated_opt = nullptr;
};

/// "8GiB", "512MiB", "1.5GB", "1000000" (bytes).
double parse_bytes(const std::string& s, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = s.substr(used);
  static const std::map<std::string, double> units = {{"", 1},      {"B", 1},        {"KiB", 0x1p10}, {"MiB", 0x1p20},
                                                      {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"KB", 1e3},     {"MB", 1e6},
                                                      {"GB", 1e9},     {"TB", 1e12}};
  auto it = units.find(unit);
  if (used == 0 || it == units.end() || !(v > 0))
    throw UsageError(what + " must be a positive size like 8GiB, 512MiB or a byte count, not '" + s + "'");
  return v * it->second;
}

/// The campaign's options from the command line: those given override what a resumed
/// campaign stored.
void apply_options(FuzzArgs& f, const RunEnv& env) {
  CampaignOptions& o = f.opts;
  if (f.seed_opt->count()) o.seed = f.seed;
  if (f.cases_opt->count()) o.budget_cases = f.budget_cases;
  if (f.seconds_opt->count()) o.budget_seconds = f.budget_seconds;
  if (f.max_opt->count()) o.max_elements = f.max_elements;
  if (f.shard_opt->count()) o.shard = f.shard;
  if (f.curated_opt->count()) o.curated = f.curated;
  if (o.ops.empty() && !o.resume) throw UsageError("fuzz needs at least one --op (or --op all)");
  o.out = f.common.out;
  o.device = env.device.kind;
  o.profile = env.device.profile;  // with --device-profile's overrides: what the shapes aim at
}

}  // namespace

std::unique_ptr<CommandArgs> setup_fuzz(CLI::App& sub) {
  auto p = std::make_unique<FuzzArgs>();
  FuzzArgs& f = *p;
  f.common.out = "out/fuzz";
  sub.add_option("--op", f.opts.ops, "op to fuzz, e.g. rms_norm.fwd (repeatable; 'all': every op); required");
  sub.add_option("--impl", f.opts.impls, "impl (repeatable; default: every impl of the op on the device)");
  f.cases_opt = sub.add_option("--budget-cases", f.budget_cases,
                               "generated cases to run, indices 0..N-1 (default 100 unless --budget-seconds)")
                    ->check(CLI::NonNegativeNumber);
  f.seconds_opt = sub.add_option("--budget-seconds", f.budget_seconds, "stop starting cases after this many seconds")
                      ->check(seconds_check());
  f.seed_opt = sub.add_option("--seed", f.seed, "campaign seed (default: random; kept in DIR/campaign.json)")
                   ->check(seed_check());
  add_common(&sub, f.common);
  f.common.sanitize.every = 100;
  add_sanitize_options(&sub, f.common);
  add_contract_option(&sub, f.common);
  sub.get_option("--out")->description("campaign directory DIR: campaign.json, results.jsonl, failures.jsonl, "
                                       "shrinks.jsonl, repro/ (default out/fuzz)");
  sub.add_flag("--resume", f.opts.resume,
               "continue the campaign in DIR: its options and seed from campaign.json, indices in results.jsonl skipped");
  f.shard_opt = sub.add_option("--shard", f.shard, "run shard i of N (i/N): the indices = i mod N; join with kverify merge");
  f.max_opt = sub.add_option("--max-elements", f.max_elements,
                             "cap on the elements of a generated shape (product of its dims; default 1048576)")
                  ->check(CLI::PositiveNumber);
  f.curated_opt = sub.add_option("--curated", f.curated,
                                 "curated tier replayed first: a file like fuzz/curated.json, or none (default: built in)");
  sub.add_option("--gpu-memory-budget", f.memory_budget,
                 "skip generated cases whose tensors need more device memory than this (e.g. 8GiB, 512MiB, or bytes; "
                 "an impl's workspace is not counted): counted as rejected, never launched");
  sub.add_option("--devices", f.devices,
                 "all: one worker per GPU of the host (CUDA_VISIBLE_DEVICES), each running shard i/N into DIR/device-i, "
                 "joined into DIR/results.jsonl; or a count N (on the host device: N parallel workers); default 1; "
                 "with --shard i/N the workers split that shard");
  sub.add_option("--jobs-per-device", f.jobs_per_device,
                 "campaign workers per device (default 1): each a shard of its own, so the host's cores check several "
                 "cases while one GPU runs their kernels; joined like --devices")
      ->check(CLI::PositiveNumber);
  sub.add_option("--max-shrink-runs", f.opts.max_shrink_runs, "bound on the cases run to shrink one failure (default 200)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--max-shrink-seconds", f.opts.max_shrink_seconds, "bound on the time spent shrinking one failure (default 300)")
      ->check(CLI::NonNegativeNumber);
  return p;
}

int run_fuzz(CommandArgs& args, const Argv& argv) {
  FuzzArgs& f = static_cast<FuzzArgs&>(args);
  for (int i = 1; i < argv.argc; ++i)
    if (std::string(argv.argv[i]) == "fuzz") {
      f.args.assign(argv.argv + i + 1, argv.argv + argv.argc);
      break;
    }
  CampaignOptions& o = f.opts;
  RunEnv env = make_env(f.common);
  if (const int n = fuzz_device_count(f.devices, env.device.kind); n * f.jobs_per_device > 1) {
    // An outer --shard i/N (one task of a Slurm array) is split again among the workers.
    if (f.shard_opt->count()) parse_shard(f.shard);
    return run_fuzz_on_devices(f.args, f.common.out, n, f.jobs_per_device, env.device.kind == "cuda",
                               f.shard_opt->count() ? f.shard : "0/1");
  }
  check_sanitize_tools(f.common.sanitize.tools);
  apply_options(f, env);
  make_out_dir(o.out);
  auto ext = load_extensions(f.common, env);
  // Impls a failed plugin or worker would have offered stand in, so their cases are errors.
  ext->register_stand_ins(o.ops.empty() ? stored_ops(o.out) : o.ops, o.impls, env.device.kind);
  const std::vector<std::string> wargs = worker_args(f.common, env, *ext);
  Supervisor sup(wargs, f.common.timeout_s);
  if (ext->has_worker()) sup.set_relay([&](const nlohmann::json& req) { return ext->relay(req); });
  CampaignIO io;
  io.run = [&](const Case& c) {
    auto why = unavailable_reason(registry().impl(c.op, c.impl));
    return why ? error_result(c, env, *why) : sup.run(c, env);
  };
  const double budget = f.memory_budget.empty() ? 0.0 : parse_bytes(f.memory_budget, "--gpu-memory-budget");
  io.refused = [&](const Case& c) -> std::optional<std::string> {
    if (budget > 0) {
      const double need = case_tensor_bytes(c, registry().op(c.op));
      if (need > budget)
        return "its tensors need " + std::to_string(static_cast<int64_t>(need)) + " bytes, over --gpu-memory-budget " +
               f.memory_budget;
    }
    return registry().impl(c.op, c.impl).refusal(c, env.device.profile);
  };
  // Batch invariance: a second worker that keeps each case's outputs for the comparison;
  // a violation leaves both runs' outputs in the campaign's repro/ (run/repro.hpp).
  const std::string kept = (std::filesystem::path(o.out) / "batch-outputs").string();
  Supervisor bsup(keeping_outputs(wargs, kept), f.common.timeout_s);
  if (ext->has_worker()) bsup.set_relay([&](const nlohmann::json& req) { return ext->relay(req); });
  io.batch = [&](const Case& c, const nlohmann::json& r, const GenLimits& lim) -> std::optional<nlohmann::json> {
    auto comp = batch_companion(c, r, 0, &lim);
    if (!comp) return std::nullopt;
    auto pair = run_batch_pair(bsup, env, kept, c, *comp, r);
    if (!pair) return std::nullopt;
    if (!pair->check["violations"].empty()) {
      nlohmann::json failed = r;
      apply_batch_check(failed, pair->check);
      const auto repro = std::filesystem::absolute(std::filesystem::path(o.out) / "repro");
      pair->check["repro"] = write_batch_repro(repro.string(), c, failed, pair->small, pair->big);
    }
    return pair->check;
  };
  if (!f.common.sanitize.tools.empty()) {
    o.sanitize_every = f.common.sanitize.every;
    io.sanitize = [&](const Case& c) {
      return sanitize_case(c, env, wargs, f.common.timeout_s, f.common.sanitize.tools,
                           (std::filesystem::path(o.out) / "sanitizer").string());
    };
  }
  int code = run_campaign(o, io);
  return ext->failures().empty() ? code : 1;
}

}  // namespace kv
