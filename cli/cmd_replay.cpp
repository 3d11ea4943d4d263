// `kverify replay '<case>'`: reruns one case from its one-line string, and with
// --batch-extra-rows N its batch-invariance pair (cli/batch_check.hpp).
#include "cli/batch_check.hpp"
#include "cli/command.hpp"
#include "cli/common.hpp"
#include "cli/run_cases.hpp"
#include "core/registry.hpp"
#include "run/sanitize.hpp"

namespace kv {

namespace {

struct ReplayArgs : CommandArgs {
  Common common;
  std::string case_str;
  int64_t batch_rows = 0;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_replay(CLI::App& sub) {
  auto a = std::make_unique<ReplayArgs>();
  add_common(&sub, a->common);
  add_sanitize_options(&sub, a->common);
  add_contract_option(&sub, a->common);
  sub.add_option("case", a->case_str, "the case string (kv1 op=... )")->required();
  sub.add_option("--batch-extra-rows", a->batch_rows,
                 "also run the case with N more leading rows and hold its batch_invariant claims to the shared rows' bits")
      ->check(CLI::PositiveNumber);
  return a;
}

int run_replay(CommandArgs& args, const Argv&) {
  const ReplayArgs& a = static_cast<ReplayArgs&>(args);
  check_sanitize_tools(a.common.sanitize.tools);
  RunEnv env = make_env(a.common);
  Case c = Case::parse(a.case_str);
  auto ext = load_extensions(a.common, env);
  ext->register_stand_ins({c.op}, {c.impl}, env.device.kind);
  registry().normalize(c);
  check_runnable(c, env);
  if (a.batch_rows > 0) return replay_batch(c, a.batch_rows, a.common, env, *ext);
  return run_cases({c}, a.common, env, false, *ext);
}

}  // namespace kv
