// `kverify drift`: one impl on one input across every valid config, each run --repeat
// times, optionally again under a forecast device profile; the analysis (check/drift.hpp)
// in <out>/drift.json and drift.md, held to the impl's determinism claims.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "check/drift.hpp"
#include "check/results.hpp"
#include "cli/command.hpp"
#include "cli/common.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "run/suite.hpp"
#include "run/supervisor.hpp"

namespace kv {

namespace {

struct DriftArgs : CommandArgs {
  Common common;
  std::string op, impl, dtype = "bf16", shape = "64x1536", attrs, dist = "normal", forecast;
  uint64_t seed = 1;
  int repeat = 2;
};

/// Runs cases one by one, moving each case's kept outputs aside under `tag`.
struct Runner {
  Supervisor sup;
  ResultsWriter& w;
  std::string outputs_dir;
  Runner(std::vector<std::string> args, double timeout, ResultsWriter& w, std::string dir)
      : sup(std::move(args), timeout), w(w), outputs_dir(std::move(dir)) {}
  DriftRun run(const Case& c, const RunEnv& env, const std::string& tag) {
    DriftRun r;
    r.result = sup.run(c, env);
    r.result["drift"] = tag;
    w.append(r.result);
    const std::string v = r.result.value("verdict", "error");
    if (v == "error" || v == "skip")
      throw UsageError("case " + tag + " ended in " + v + ": " + r.result.value("reason", "") + " (" + c.str() + ")");
    const auto kept = std::filesystem::path(outputs_dir) / (hex64(c.case_id()) + ".safetensors");
    r.outputs = read_safetensors(kept.string());
    std::filesystem::rename(kept, std::filesystem::path(outputs_dir) / (tag + ".safetensors"));
    return r;
  }
};

std::vector<std::string> with_outputs(std::vector<std::string> a, const std::string& dir) {
  a.insert(a.end(), {"--outputs-dir", dir});
  return a;
}

}  // namespace

std::unique_ptr<CommandArgs> setup_drift(CLI::App& sub) {
  auto p = std::make_unique<DriftArgs>();
  DriftArgs& d = *p;
  add_common(&sub, d.common);
  sub.add_option("--op", d.op, "op, e.g. rms_norm.bwd")->required();
  sub.add_option("--impl", d.impl, "impl")->required();
  sub.add_option("--dtype", d.dtype, "fp32|fp16|bf16 or x:bf16,w:fp32 (default bf16)");
  sub.add_option("--shape", d.shape, "shape (default 64x1536)");
  sub.add_option("--attrs", d.attrs, "op attributes, e.g. mode=gemma");
  sub.add_option("--dist", d.dist, "value distribution, one of " + dist_names() + " (default normal)");
  sub.add_option("--seed", d.seed, "seed (default 1)")->check(seed_check());
  sub.add_option("--repeat", d.repeat, "runs of each config (run-to-run drift; default 2)")->check(CLI::Range(1, 1000));
  sub.add_option("--forecast", d.forecast, "another device profile, e.g. sm_count=108: would the bits change there?");
  return p;
}

int run_drift(CommandArgs& args, const Argv&) {
  DriftArgs& d = static_cast<DriftArgs&>(args);
  RunEnv env = make_env(d.common);
  auto ext = load_extensions(d.common, env);
  const Impl& impl = registry().impl(d.op, d.impl);
  SuiteEntry e;
  e.ops = {d.op};
  e.impls = {d.impl};
  e.dtypes = {d.dtype};
  e.shapes = {d.shape};
  e.dists = {d.dist};
  e.seeds = {d.seed};
  if (!d.attrs.empty())
    for (auto& [k, v] : parse_kv_list(d.attrs, "attrs")) e.attrs[k] = {v};
  for (auto& k : impl.knobs()) e.configs[k.name] = k.values;  // every config
  std::vector<Case> cases;
  std::vector<std::string> invalid;
  for (auto& c : expand_suite({e}, impl.device())) {
    if (auto why = impl.refusal(c, env.device.profile)) invalid.push_back(c.str() + ": " + *why);
    else cases.push_back(c);
  }
  if (cases.empty()) throw UsageError("no valid config of " + d.impl + " for this case");
  RunEnv fenv = env;
  if (!d.forecast.empty()) fenv.device.profile.apply_overrides(d.forecast);  // UsageError on unknown keys

  const std::filesystem::path out = d.common.out, dir = out / "outputs";
  std::filesystem::create_directories(dir);
  ResultsWriter w((out / "results.jsonl").string());
  Runner native(with_outputs(worker_args(d.common, env, *ext), std::filesystem::absolute(dir).string()),
                d.common.timeout_s, w, dir.string());
  if (ext->has_worker()) native.sup.set_relay([&](const nlohmann::json& r) { return ext->relay(r); });
  std::vector<DriftConfig> configs;
  for (size_t i = 0; i < cases.size(); ++i) {
    DriftConfig dc;
    for (auto& [k, v] : cases[i].config) dc.config += (dc.config.empty() ? "" : ",") + k + "=" + v;
    for (int r = 0; r < d.repeat; ++r) dc.repeats.push_back(native.run(cases[i], env, "c" + std::to_string(i) + ".r" + std::to_string(r)));
    configs.push_back(std::move(dc));
    std::cerr << "\rdrift: " << (i + 1) << "/" << cases.size() << " configs" << std::flush;
  }
  if (!d.forecast.empty()) {
    Common fc = d.common;
    fc.profile = fc.profile.empty() ? d.forecast : fc.profile + "," + d.forecast;
    Runner fore(with_outputs(worker_args(fc, fenv, *ext), std::filesystem::absolute(dir).string()), d.common.timeout_s, w,
                dir.string());
    for (size_t i = 0; i < cases.size(); ++i) configs[i].forecast = fore.run(cases[i], fenv, "c" + std::to_string(i) + ".forecast");
  }
  std::cerr << "\n";
  nlohmann::json rep = analyze_drift(configs, d.forecast);
  rep["case"] = cases[0].str();
  rep["device"] = env.device.to_json();
  rep["invalid_configs"] = invalid;
  std::ofstream(out / "drift.json") << rep.dump(1) << "\n";
  const std::string md = drift_markdown(rep);
  std::ofstream(out / "drift.md") << md;
  std::cout << md << "\ndrift: " << (out / "drift.json").string() << ", " << (out / "drift.md").string() << "\n";
  return rep["violations"].empty() && ext->failures().empty() ? 0 : 1;
}

}  // namespace kv
