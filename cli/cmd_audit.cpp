// `kverify audit`: the reduction shapes an impl really uses, measured per reduced axis by
// masking probes (run/audit.hpp), against its declared contract; <out>/audit.jsonl and a
// table. Then (--determinism on, the default) each output's determinism claims against the
// bits of repeated, fresh-process, other-config and larger-batch runs in workers
// (cli/audit_determinism.hpp). Exit 1 where a contract understates what was measured, a sum
// drops terms, or a determinism claim is broken. The reduction audit runs in this process.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/audit_determinism.hpp"
#include "cli/command.hpp"
#include "cli/common.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "run/audit.hpp"
#include "run/runner.hpp"
#include "run/suite.hpp"

namespace kv {

namespace {

struct AuditArgs : CommandArgs {
  Common common;
  std::string op, impl, dtype = "fp32", shape = "8x300", config, attrs, determinism = "on";
  uint64_t seed = 1;
  int64_t max_calls = 20000;
};

std::string shape_of(const ReductionShape& s) {
  return std::to_string(s.serial) + "/" + std::to_string(s.depth) + "/" + std::to_string(s.partials) + " = " +
         std::to_string(s.n_eff());
}

void print_table(const std::vector<AxisAudit>& rows) {
  int wi = 4, wc = 6;  // the impl and config columns fit their longest entry
  for (const AxisAudit& a : rows) wi = std::max(wi, static_cast<int>(a.impl.size())), wc = std::max(wc, static_cast<int>(a.config.size()));
  std::printf("%-16s %-*s %-*s %-14s %-16s %-16s %-14s %s\n", "op", wi, "impl", wc, "config", "axis", "declared s/d/p",
              "measured s/d/p", "status", "verdict");
  for (const AxisAudit& a : rows) {
    std::string m = "-";
    if (a.measured)
      m = a.exact ? shape_of(a.measured->shape) : ">= " + std::to_string(a.measured->n_eff);
    const std::string axis = a.axis + (a.out.empty() ? "" : "(" + a.out + ")");
    std::printf("%-16s %-*s %-*s %-14s %-16s %-16s %-14s %s\n", a.op.c_str(), wi, a.impl.c_str(), wc, a.config.c_str(),
                axis.c_str(), a.axis.empty() ? "-" : shape_of(a.declared).c_str(), m.c_str(), a.status.c_str(),
                a.verdict().c_str());
    if (!a.note.empty()) std::printf("    %s\n", a.note.c_str());
  }
}

}  // namespace

std::unique_ptr<CommandArgs> setup_audit(CLI::App& sub) {
  auto p = std::make_unique<AuditArgs>();
  AuditArgs& d = *p;
  add_common(&sub, d.common);
  sub.add_option("--op", d.op, "op, e.g. rms_norm.bwd")->required();
  sub.add_option("--impl", d.impl, "impl")->required();
  sub.add_option("--dtype", d.dtype, "fp32|fp16|bf16 or x:bf16,w:fp32 (default fp32)");
  sub.add_option("--shape", d.shape, "shape (default 8x300)");
  sub.add_option("--config", d.config, "one config, e.g. num_warps=1,dw=serial (default: the impl's defaults)");
  sub.add_option("--attrs", d.attrs, "op attributes, e.g. mode=gemma");
  sub.add_option("--seed", d.seed, "seed of pivots and lane assignment (default 1)")->check(seed_check());
  sub.add_option("--max-calls", d.max_calls, "impl calls per axis before falling back to a lower bound (default 20000)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  sub.add_option("--determinism", d.determinism,
                 "on: also hold each output's determinism claims to repeated, fresh-process, other-config and "
                 "larger-batch runs (default); off: the reduction audit alone")
      ->check(CLI::IsMember({"on", "off"}));
  return p;
}

int run_audit(CommandArgs& args, const Argv&) {
  AuditArgs& d = static_cast<AuditArgs&>(args);
  RunEnv env = make_env(d.common);
  auto ext = load_extensions(d.common, env);
  registry().op(d.op);  // an unknown op named as such, with "did you mean"
  const Impl& impl = registry().impl(d.op, d.impl);
  SuiteEntry e;
  e.ops = {d.op};
  e.impls = {d.impl};
  e.dtypes = {d.dtype};
  e.shapes = {d.shape};
  if (!d.attrs.empty())
    for (auto& [k, v] : parse_kv_list(d.attrs, "attrs")) e.attrs[k] = {v};
  if (!d.config.empty())
    for (auto& [k, v] : parse_kv_list(d.config, "config")) e.configs[k] = {v};
  const std::vector<Case> cases = expand_suite({e}, impl.device());
  if (cases.size() != 1) throw UsageError("the options name " + std::to_string(cases.size()) + " cases, not one");
  const double need = case_tensor_bytes(cases[0], registry().op(cases[0].op));
  if (need > 0.5 * static_cast<double>(mem_available_bytes()))
    throw UsageError("shape " + d.shape + ": the audit's tensors need " + std::to_string(static_cast<int64_t>(need)) +
                     " bytes, more than half the host's available memory");
  make_out_dir(d.common.out);
  AuditOptions o;
  o.seed = d.seed, o.max_calls = d.max_calls;
  const std::vector<AxisAudit> rows = audit_case(cases[0], impl, env.device.profile, o);
  std::ofstream f(std::filesystem::path(d.common.out) / "audit.jsonl", std::ios::app);
  auto write = [&](nlohmann::json j) {
    j["case"] = cases[0].str();
    j["build"] = build_info();  // the commit whose binary measured it
    j["device_name"] = env.device.name;
    f << j.dump() << "\n";
  };
  bool unsound = false;
  for (const AxisAudit& a : rows) {
    nlohmann::json j = a.to_json();
    j["kind"] = "reduction";
    write(j);
    unsound |= a.unsound();
  }
  print_table(rows);
  std::vector<ClaimAudit> claims;
  if (d.determinism == "on" && !impl.refusal(cases[0], env.device.profile)) {
    claims = audit_determinism(cases[0], d.common, env, *ext);
    for (const ClaimAudit& a : claims) write(a.to_json());
    std::printf("\n");
    print_determinism_table(claims);
  }
  f.flush();
  for (const ClaimAudit& a : claims)
    if (a.violated()) std::printf("%s\n", a.reason().c_str()), unsound = true;
  return unsound ? 1 : 0;
}

}  // namespace kv
