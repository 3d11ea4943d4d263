// `kverify run`: the cases a selection (--op, --impl, --dtype, ...), a suite file or the
// default suite gives, run through the worker (cli/run_cases.hpp).
#include <iostream>

#include "cli/command.hpp"
#include "cli/common.hpp"
#include "cli/run_cases.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "kv_default_suite.hpp"
#include "kv_standard_suite.hpp"
#include "run/sanitize.hpp"
#include "run/suite.hpp"

namespace kv {

namespace {

struct RunArgs : CommandArgs {
  Common common;
  std::vector<std::string> ops, impls, dtypes, shapes, dists, configs;
  std::vector<uint64_t> seeds;
  std::string attrs, suite;
  bool quiet = false;
  bool selection() const {
    return !ops.empty() || !impls.empty() || !dtypes.empty() || !shapes.empty() || !configs.empty() || !attrs.empty() ||
           !dists.empty() || !seeds.empty();
  }
};

/// The cases of the selection options: each --config one configuration whose knobs must
/// all be valid for the impl, each case valid on the device.
std::vector<Case> selection_cases(const RunArgs& a, const RunEnv& env, Extensions& ext) {
  if (a.ops.empty()) throw UsageError("--op is required with selection options");
  ext.register_stand_ins(a.ops, a.impls, env.device.kind);
  SuiteEntry e;
  e.ops = a.ops;
  e.impls = a.impls;
  e.dtypes = a.dtypes.empty() ? std::vector<std::string>{"fp32", "fp16", "bf16"} : a.dtypes;
  e.shapes = a.shapes;
  if (!a.dists.empty()) e.dists = a.dists;
  if (!a.seeds.empty()) e.seeds = a.seeds;
  if (!a.attrs.empty())
    for (auto& [k, v] : parse_kv_list(a.attrs, "attrs")) e.attrs[k] = {v};
  // No --shape: each op on its own default (4x1536 for row ops, the op's example shape else:
  // rope's B x S x H x D, FLCE's BT x H x V).
  std::vector<SuiteEntry> per_op;
  if (a.shapes.empty())
    for (const std::string& op : a.ops) {
      SuiteEntry one = e;
      one.ops = {op};
      const auto ex = registry().op(op).example_shape();
      one.shapes = {ex.size() == 2 ? std::string("4x1536") : shape_str(ex)};
      per_op.push_back(one);
    }
  else
    per_op.push_back(e);
  std::vector<Case> cases;
  // Each --config is one configuration; its knobs must all be valid for the impl.
  std::vector<std::string> cfgs = a.configs.empty() ? std::vector<std::string>{""} : a.configs;
  for (auto& cfg : cfgs) {
    auto picked = cfg.empty() ? std::map<std::string, std::string>{} : parse_kv_list(cfg, "config");
    for (const SuiteEntry& base : per_op) {
      SuiteEntry one = base;
      one.configs.clear();
      for (auto& [k, v] : picked) one.configs[k] = {v};
      for (auto& c : expand_suite({one}, env.device.kind)) {
        for (auto& [k, v] : picked)
          if (!c.config.count(k)) throw UsageError("invalid config: impl " + c.impl + " has no knob '" + k + "'");
        cases.push_back(c);  // one the impl declines, or this device cannot run, is a listed skip
      }
    }
  }
  if (cases.empty()) throw UsageError("the selection gives no cases (no impl of the op on device " + env.device.kind + ")");
  return cases;
}

}  // namespace

std::unique_ptr<CommandArgs> setup_run(CLI::App& sub) {
  auto p = std::make_unique<RunArgs>();
  RunArgs& a = *p;
  add_common(&sub, a.common);
  add_sanitize_options(&sub, a.common);
  add_contract_option(&sub, a.common);
  sub.add_option("--op", a.ops, "op, e.g. rms_norm.fwd (repeatable)");
  sub.add_option("--impl", a.impls, "impl name (default: every impl of the op on the device)");
  sub.add_option("--dtype", a.dtypes, "fp32|fp16|bf16, or per tensor x:bf16,w:fp32 (repeatable)");
  sub.add_option("--shape", a.shapes, "e.g. 5x123x123 (repeatable)");
  sub.add_option("--config", a.configs, "knobs, e.g. num_warps=8,dw=fixed_partials (repeatable)");
  sub.add_option("--attrs", a.attrs, "op attributes, e.g. mode=gemma,eps=1e-5,offset=1");
  sub.add_option("--dist", a.dists, "value distribution, one of " + dist_names() + " (default normal; repeatable)");
  sub.add_option("--seed", a.seeds, "seed (repeatable)")->check(seed_check());
  sub.add_option("--suite", a.suite, "a suite file (JSON) instead of the selection options");
  sub.add_flag("--quiet", a.quiet, "print only failures and the totals");
  sub.add_option("--shard", a.common.shard,
                 "run shard i of N (i/N): a fixed slice of the cases, input groups kept together");
  sub.add_flag("--resume", a.common.resume,
               "skip the cases that already have a line in --out's results.jsonl (any verdict)");
  return p;
}

int run_run(CommandArgs& args, const Argv&) {
  const RunArgs& a = static_cast<RunArgs&>(args);
  check_sanitize_tools(a.common.sanitize.tools);
  RunEnv env = make_env(a.common);
  auto ext = load_extensions(a.common, env);
  if (!a.suite.empty() && a.selection()) throw UsageError("--suite cannot be combined with selection options");
  if (a.suite.empty() && a.selection()) return run_cases(selection_cases(a, env, *ext), a.common, env, a.quiet, *ext);
  std::vector<SuiteEntry> entries;
  if (!a.suite.empty()) {
    entries = load_suite(a.suite);
  } else {
    // The main job: the standard suite on a GPU, the host suite elsewhere.
    entries = env.device.kind == "cuda" ? parse_suite(kStandardSuiteJson, "the standard suite")
                                        : parse_suite(kDefaultSuiteJson, "the default suite");
  }
  auto cases = expand_suite(entries, env.device.kind);
  return run_cases(cases, a.common, env, a.quiet, *ext);
}

}  // namespace kv
