// The determinism audit (cli/audit_determinism.hpp): the runs, then each (output, claim)
// judged from bit-for-bit comparisons with the first run.
#include "cli/audit_determinism.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli/batch_check.hpp"
#include "core/registry.hpp"
#include "fuzz/batch.hpp"
#include "run/audit.hpp"
#include "run/supervisor.hpp"

namespace kv {

namespace fs = std::filesystem;

namespace {

using Outputs = std::map<std::string, StoredTensor>;

/// A run compared with the first: where it ran, its outputs, its case (a companion's rows).
struct Obs {
  std::string where;
  Case c;
  Outputs outs;
};

struct Runs {
  std::optional<Outputs> base;
  nlohmann::json base_result;
  std::map<std::string, std::vector<Obs>> by_claim;             // run_to_run, config_invariant, batch_invariant
  std::map<std::string, std::vector<std::string>> left_nothing;  // runs without judged outputs
};

/// A result line claiming batch_invariant on every output: compare_batch then compares them
/// all (claimed or not, the audit reports what changed).
nlohmann::json claiming_all(const Case& c) {
  nlohmann::json d = nlohmann::json::object();
  for (auto& t : registry().op(c.op).tensors(c))
    if (t.role == Role::output) d[t.name] = {"batch_invariant"};
  return {{"contract", {{"determinism", d}}}};
}

Runs collect(const Case& c, const Impl& impl, const Common& common, const RunEnv& env, Extensions& ext,
             const DeterminismLimits& lim) {
  const std::string kept = (fs::path(common.out) / "determinism-outputs").string();
  const std::vector<std::string> args = keeping_outputs(worker_args(common, env, ext), kept);
  auto relay = [&ext](const nlohmann::json& req) { return ext.relay(req); };
  Supervisor a(args, common.timeout_s);
  if (ext.has_worker()) a.set_relay(relay);
  Runs r;
  r.base = run_keeping(a, env, kept, c, &r.base_result);
  if (!r.base) return r;
  auto add = [&](Supervisor& s, const std::string& claim, const Case& k, const std::string& where) {
    nlohmann::json res;
    if (auto o = run_keeping(s, env, kept, k, &res)) r.by_claim[claim].push_back({where, k, std::move(*o)});
    else r.left_nothing[claim].push_back(where + " ended in " + res.value("verdict", "error"));
  };
  add(a, "run_to_run", c, "a second run in the same process");
  {
    Supervisor b(args, common.timeout_s);  // started while a's worker lives: another process id
    if (ext.has_worker()) b.set_relay(relay);
    add(b, "run_to_run", c, "a run in a fresh process");
  }
  for (const Case& k : other_configs(c, impl, env.device.profile, lim.max_configs))
    add(a, "config_invariant", k, "config " + config_str(k));
  const nlohmann::json all = claiming_all(c);
  for (const CompanionDim& d : companion_dims(c, impl, env.device.profile, lim)) {
    const std::string where = "the companion of " + std::to_string(d.d0) + " rows (" + d.why + ")";
    auto comp = batch_companion(c, all, d.d0 - c.shape[0]);
    if (!comp) {
      r.left_nothing["batch_invariant"].push_back("companions: none (the case has layouts or aliases, or " + where +
                                                  " is not a valid shape)");
      break;
    }
    add(a, "batch_invariant", *comp, where);
  }
  std::error_code ec;
  fs::remove(kept, ec);  // empty by now: each run's outputs were read and removed
  return r;
}

/// The comparison of output o of a run with the first run's; none where they do not line up.
std::optional<BitDiff> compare(const Runs& r, const std::string& claim, const Obs& ob, const std::string& o) {
  auto a = r.base->find(o), b = ob.outs.find(o);
  if (a == r.base->end() || b == ob.outs.end()) return std::nullopt;
  if (claim == "batch_invariant") {
    // compare_batch decides which outputs grow with the rows and counts; bit_diff finds the first.
    const nlohmann::json chk = compare_batch(ob.c, claiming_all(ob.c), *r.base, ob.outs);
    if (!chk["outputs"].contains(o)) return std::nullopt;
    BitDiff d = bit_diff(a->second, b->second).value_or(BitDiff{});
    d.n_diff = chk["outputs"][o]["n_diff"].get<int64_t>();
    return d;
  }
  if (a->second.shape != b->second.shape) return std::nullopt;
  return bit_diff(a->second, b->second);
}

std::string list(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

void judge(ClaimAudit& a, const Runs& r) {
  if (a.claim == "gpu_invariant") {
    a.status = a.claimed ? "not auditable here" : "not claimed";
    if (a.claimed) a.note = "needs a second GPU model (kverify drift --forecast predicts other SM counts)";
    return;
  }
  const auto it = r.by_claim.find(a.claim);
  int64_t changed = 0;
  if (it != r.by_claim.end())
    for (const Obs& ob : it->second) {
      const auto d = compare(r, a.claim, ob, a.output);
      if (!d) continue;
      ++a.compared;
      a.runs.push_back(ob.where);
      if (d->n_diff == 0) continue;
      if (changed++ == 0) a.n_diff = d->n_diff, a.first_diff = d->first, a.where = ob.where;
    }
  const auto miss = r.left_nothing.find(a.claim);
  const std::string missing = miss == r.left_nothing.end() ? "" : "; not run: " + list(miss->second);
  if (!a.claimed) {
    a.status = "not claimed";
    a.note = changed ? "changed: " + std::to_string(a.n_diff) + " elements differ in " + a.where + " (" +
                           std::to_string(changed) + " of " + std::to_string(a.compared) + " runs changed)"
             : a.compared ? "unchanged in " + std::to_string(a.compared) + " runs" : "not compared";
    return;
  }
  if (a.compared == 0) {
    a.status = "not checked";
    a.note = (a.claim == "config_invariant" ? "no other valid config" : a.claim == "batch_invariant"
                  ? "no companion whose " + a.output + " grows with the rows" : "no second run") + missing;
    return;
  }
  if (changed) {
    a.status = "violated";
    a.note = std::to_string(a.n_diff) + " elements differ in " + a.where + ", the first at index " +
             std::to_string(a.first_diff) + " (" + std::to_string(changed) + " of " + std::to_string(a.compared) +
             " runs changed)";
    return;
  }
  a.status = "held";
  a.note = "the same bits in " + std::to_string(a.compared) + " runs" + missing;
}

}  // namespace

std::string ClaimAudit::reason() const {
  return "unsound contract: " + impl + " (" + op + ") output " + output + " claims " + claim + " but " + note;
}

nlohmann::json ClaimAudit::to_json() const {
  return {{"kind", "determinism"}, {"op", op},         {"impl", impl},         {"config", config},
          {"output", output},      {"claim", claim},   {"claimed", claimed},   {"status", status},
          {"note", note},          {"compared", compared}, {"n_diff", n_diff}, {"first_diff", first_diff},
          {"where", where},        {"runs", runs},  {"verdict", violated() ? "unsound" : status == "held" ? "sound" : "unknown"}};
}

std::vector<ClaimAudit> audit_determinism(const Case& c, const Common& common, const RunEnv& env, Extensions& ext,
                                          const DeterminismLimits& lim) {
  const Impl& impl = registry().impl(c.op, c.impl);
  const Runs r = collect(c, impl, common, env, ext, lim);
  std::map<std::string, DeterminismClaims> claims;
  if (r.base_result.contains("contract") && r.base_result["contract"].contains("determinism"))
    claims = r.base_result["contract"]["determinism"].get<std::map<std::string, DeterminismClaims>>();
  else
    claims = impl.contract(c, env.device.profile).determinism;
  std::vector<ClaimAudit> out;
  for (auto& t : registry().op(c.op).tensors(c)) {
    if (t.role != Role::output) continue;
    for (const std::string& k : determinism_claims()) {
      ClaimAudit a;
      a.op = c.op, a.impl = c.impl, a.config = config_str(c), a.output = t.name, a.claim = k;
      const DeterminismClaims& cl = claims[t.name];
      a.claimed = std::find(cl.begin(), cl.end(), k) != cl.end();
      if (!r.base) {
        a.status = a.claimed ? "not checked" : "not claimed";
        a.note = "the case ended in " + r.base_result.value("verdict", "error") + ": " + r.base_result.value("reason", "");
      } else {
        judge(a, r);
      }
      out.push_back(std::move(a));
    }
  }
  return out;
}

void print_determinism_table(const std::vector<ClaimAudit>& rows) {
  int wi = 4, wc = 6, wo = 6;
  for (const ClaimAudit& a : rows)
    wi = std::max(wi, static_cast<int>(a.impl.size())), wc = std::max(wc, static_cast<int>(a.config.size())),
    wo = std::max(wo, static_cast<int>(a.output.size()));
  std::printf("%-16s %-*s %-*s %-*s %-17s %-19s %s\n", "op", wi, "impl", wc, "config", wo, "output", "claim", "status",
              "detail");
  for (const ClaimAudit& a : rows)
    std::printf("%-16s %-*s %-*s %-*s %-17s %-19s %s\n", a.op.c_str(), wi, a.impl.c_str(), wc, a.config.c_str(), wo,
                a.output.c_str(), a.claim.c_str(), a.status.c_str(), a.note.c_str());
}

}  // namespace kv
