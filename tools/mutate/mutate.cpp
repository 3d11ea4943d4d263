// Running the mutation suite (mutate.hpp).
#include "tools/mutate/mutate.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <map>
#include <set>

#include "check/gate.hpp"
#include "check/results.hpp"
#include "cli/common.hpp"
#include "run/sanitize.hpp"
#include "run/supervisor.hpp"
#include "core/error.hpp"
#include "tools/mutate/catalog.hpp"
#include "tools/mutate/report.hpp"

namespace kv {

namespace {

using json = nlohmann::json;

std::string digest_of(const json& r, const std::string& out) {
  return r["outputs"][out].value("digest", json::object()).value("xxh64", "");
}

/// Why a result line kills: "fail" or "error" with a detail, or "" when it passes.
std::string verdict_kill(const json& j, std::string& detail) {
  const std::string v = j.value("verdict", "error");
  if (v == "error") detail = j.value("reason", "");
  const json outs = j.value("outputs", json::object());
  if (v == "fail")
    for (auto& [name, o] : outs.items())
      if (o.value("verdict", "") == "fail") append_sep(detail, ", ", name);
  return v == "fail" || v == "error" ? v : "";
}

/// Outputs whose bits differ between two runs of one case where the impl claims run_to_run.
std::string drifted(const json& a, const json& b) {
  std::string out;
  const json outs = a.value("outputs", json::object());
  for (auto& [name, o] : outs.items())
    if (claims(a, name, "run_to_run") && b.contains("outputs") && b["outputs"].contains(name) &&
        digest_of(a, name) != digest_of(b, name))
      append_sep(out, ", ", name);
  return out;
}

/// The pool cases of one family that run a mutant's code (all of the family's cases for
/// the baseline, m == nullptr).
std::vector<const PoolCase*> cases_for(const std::vector<PoolCase>& pool, const std::string& family, const MutantDef* m) {
  std::vector<const PoolCase*> v;
  for (auto& p : pool)
    if (op_family(p.c.op) == family && (!m || mutant_covers(*m, p.c.op))) v.push_back(&p);
  return v;
}

/// How one case kills: a verdict (fail, error), drift between its runs, or, against the
/// unmutated run's line, p99 growth (what `kverify gate` flags); empty `how` when it passes.
struct Outcome {
  std::string how, detail;
  const PoolCase* pc = nullptr;
  json line;  // the first run's result line
};

Outcome run_one(Supervisor& sup, const RunEnv& env, const PoolCase& pc, const json* base) {
  Outcome o{"", "", &pc, sup.run(pc.c, env)};
  o.how = verdict_kill(o.line, o.detail);
  for (int k = 1; o.how.empty() && k < pc.repeat; ++k) {
    json again = sup.run(pc.c, env);
    o.how = verdict_kill(again, o.detail);
    if (o.how.empty() && !(o.detail = drifted(o.line, again)).empty()) o.how = "drift";
  }
  if (o.how.empty() && base)
    for (auto& cause : gate({*base}, {o.line}))
      if (cause.kind == "p99_growth") o.how = "p99_growth", o.detail = cause.detail;
  return o;
}

/// KV_MUTANT set to a mutant's name ("": unset) for the workers started in this scope (a
/// worker reads it when it starts, at its first case); the previous value returns after.
class MutantEnv {
 public:
  explicit MutantEnv(const std::string& name) : old_(std::getenv("KV_MUTANT") ? std::getenv("KV_MUTANT") : "") {
    set(name);
  }
  ~MutantEnv() { set(old_); }
  MutantEnv(const MutantEnv&) = delete;
  MutantEnv& operator=(const MutantEnv&) = delete;

 private:
  static void set(const std::string& n) {
    if (n.empty()) unsetenv("KV_MUTANT");
    else setenv("KV_MUTANT", n.c_str(), 1);
  }
  std::string old_;
};

std::vector<std::string> worker_args(const RunEnv& env) {
  return {"__worker", "--device", env.device.kind, "--run-id", env.run_id};
}

/// What every unit of a run shares: the device, the options, the unmutated runs' lines,
/// and the unmutated runs' sanitizer errors per case (computed when first needed).
struct RunContext {
  const RunEnv& env;
  const MutateOptions& o;
  std::map<std::string, json> baseline;
  std::map<std::string, int64_t> baseline_sanitizer;
};

/// Sanitizer errors of a case in a worker of the current KV_MUTANT (named `who`: logs go
/// to OUT/sanitizer/<who>/); -1 when every tool skipped.
int64_t sanitizer_errors_of(const RunContext& cx, const PoolCase& pc, const std::string& who, json& detail) {
  detail = sanitize_case(pc.c, cx.env, worker_args(cx.env), cx.o.timeout_s, cx.o.sanitize,
                         (std::filesystem::path(cx.o.out) / "sanitizer" / who).string());
  bool any = false;
  for (auto& [t, r] : detail.items()) any = any || r.contains("errors");
  return any ? sanitizer_errors(detail) : -1;
}

/// Runs a mutant against cases until a verdict or drift kills it; p99 growth (a softer
/// kill) is kept only when nothing harder turns up, and a survivor's first case of each op
/// is then run under the sanitizer tools asked for (a kill where the unmutated impl shows
/// no errors).
MutationUnit run_unit(RunContext& cx, const MutantDef& m, const std::string& family,
                      const std::vector<const PoolCase*>& cases) {
  MutationUnit u;
  u.m = &m, u.family = family, u.shared = mutant_families(m).size() > 1;
  Outcome kill;
  {
    MutantEnv mutant(m.name);
    Supervisor sup(worker_args(cx.env), cx.o.timeout_s);
    for (auto* pc : cases) {
      ++u.cases_run;
      auto b = cx.baseline.find(pc->c.str());
      Outcome o = run_one(sup, cx.env, *pc, b == cx.baseline.end() ? nullptr : &b->second);
      if (o.how.empty() || (o.how == "p99_growth" && !kill.how.empty())) continue;
      kill = std::move(o), u.killed_at = u.cases_run;
      if (kill.how != "p99_growth") break;
    }
    std::set<std::string> ops_done;
    for (size_t i = 0; i < cases.size() && kill.how.empty() && !cx.o.sanitize.empty(); ++i) {
      const PoolCase& pc = *cases[i];
      json d;
      if (!ops_done.insert(pc.c.op).second || sanitizer_errors_of(cx, pc, m.name, d) <= 0) continue;
      if (!cx.baseline_sanitizer.count(pc.c.str())) {
        MutantEnv none("");
        json bd;
        cx.baseline_sanitizer[pc.c.str()] = sanitizer_errors_of(cx, pc, "unmutated", bd);
      }
      if (cx.baseline_sanitizer[pc.c.str()] == 0) kill = Outcome{"sanitizer", d.dump(), &pc, json()}, u.killed_at = i + 1;
    }
  }
  if (!kill.how.empty())
    u.killed = true, u.how = kill.how, u.detail = kill.detail, u.case_str = kill.pc->c.str(), u.source = kill.pc->source;
  return u;
}

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UsageError("cannot read '" + path + "'");
  try {
    return json::parse(f);
  } catch (const std::exception& e) {
    throw UsageError("malformed JSON in " + path + ": " + e.what());
  }
}

/// The catalog's mutants of the device that --mutant and --op select.
std::vector<const MutantDef*> selected_mutants(const MutateOptions& o) {
  std::vector<const MutantDef*> mutants;
  for (auto& m : mutant_catalog()) {
    const bool named = o.mutants.empty() || std::count(o.mutants.begin(), o.mutants.end(), m.name);
    const auto fs = mutant_families(m);
    const bool in_ops = o.families.empty() || std::any_of(fs.begin(), fs.end(), [&](const std::string& f) {
                          return std::count(o.families.begin(), o.families.end(), f) > 0;
                        });
    if (m.device == o.device && named && in_ops) mutants.push_back(&m);
  }
  for (auto& n : o.mutants) mutant_named(n);  // an unknown name is a usage error
  return mutants;
}

/// The op families the mutants belong to (those --op selects), in order of first mention.
std::vector<std::string> families_of(const std::vector<const MutantDef*>& mutants, const MutateOptions& o) {
  std::vector<std::string> families;
  for (auto* m : mutants)
    for (auto& f : mutant_families(*m))
      if ((o.families.empty() || std::count(o.families.begin(), o.families.end(), f)) &&
          !std::count(families.begin(), families.end(), f))
        families.push_back(f);
  return families;
}

/// The baseline: every case must pass without a mutant; a generated case that does not is
/// dropped (its failure belongs to the fuzz campaigns), a targeted one is an error. Fills
/// cx.baseline and rep's dropped cases; returns the cases kept, and in targeted_failed
/// whether a targeted case failed.
std::vector<PoolCase> run_baseline(RunContext& cx, const std::vector<PoolCase>& pool,
                                   const std::vector<std::string>& families, MutationReport& rep, bool& targeted_failed) {
  std::vector<PoolCase> kept;
  MutantEnv none("");
  Supervisor sup(worker_args(cx.env), cx.o.timeout_s);
  for (auto& f : families)
    for (auto* pc : cases_for(pool, f, nullptr)) {
      Outcome b = run_one(sup, cx.env, *pc, nullptr);
      if (b.how.empty()) {
        kept.push_back(*pc);
        cx.baseline[pc->c.str()] = std::move(b.line);
        continue;
      }
      rep.dropped.push_back({{"case", pc->c.str()}, {"source", pc->source}, {"how", b.how}, {"detail", b.detail}});
      std::cout << "baseline " << b.how << " (" << pc->source << ", dropped): " << pc->c.str() << " " << b.detail << "\n";
      targeted_failed = targeted_failed || pc->source == "targeted";
    }
  return kept;
}

/// Whether exactly the expected mutants survived (--expect-killed: none; --expect-survivors:
/// those the file records); says which did not on stdout.
bool survivors_as_expected(const MutateOptions& o, const MutationReport& rep) {
  bool as_expected = true;
  std::set<std::string> documented;
  if (!o.expect_survivors.empty())
    for (auto& u : read_json_file(o.expect_survivors).value("units", json::array()))
      if (!u.value("killed", true)) documented.insert(u.value("mutant", "") + " on " + u.value("op", ""));
  for (auto& u : rep.units) {
    const std::string key = u.m->name + " on " + u.family;
    if (!u.killed && (o.expect_killed || !o.expect_survivors.empty()) && !documented.count(key)) {
      std::cout << "unexpected survivor: " << key << "\n";
      as_expected = false;
    }
    if (u.killed && documented.count(key)) {
      std::cout << "killed, though " << o.expect_survivors << " has it survive (update the report and SURVIVORS.md): " << key
                << "\n";
      as_expected = false;
    }
  }
  return as_expected;
}

}  // namespace

int run_mutation(const MutateOptions& o) {
  const std::vector<const MutantDef*> mutants = selected_mutants(o);
  const std::vector<std::string> families = families_of(mutants, o);
  PoolOptions po = o.pool;
  po.device = o.device;
  po.families = families;
  std::vector<PoolCase> pool = build_pool(po);
  if (o.list_cases) {
    for (auto& p : pool) std::cout << p.source << (p.repeat > 1 ? " x" + std::to_string(p.repeat) : "") << "  " << p.c.str() << "\n";
    return 0;
  }
  Common common;
  common.device = o.device;
  const RunEnv env = make_env(common);
  std::cout << "kverify-mutate: " << mutants.size() << " mutants, " << pool.size() << " cases on " << env.device.name
            << "\n" << std::flush;

  MutationReport rep;
  rep.device = env.device.to_json();
  rep.command = o.command;
  RunContext cx{env, o, {}, {}};
  bool targeted_failed = false;
  const std::vector<PoolCase> kept = run_baseline(cx, pool, families, rep, targeted_failed);
  for (auto& p : kept) ++rep.pool_counts[p.source];

  for (auto* m : mutants)
    for (auto& f : mutant_families(*m)) {
      if (!std::count(families.begin(), families.end(), f)) continue;
      const auto cs = cases_for(kept, f, m);
      MutationUnit u = run_unit(cx, *m, f, cs);
      std::cout << "[" << rep.units.size() + 1 << "] " << m->name << " on " << f << ": "
                << (u.killed ? "killed (" + u.how + ", case " + std::to_string(u.killed_at) + " of " +
                                   std::to_string(cs.size()) + ", " + u.source + ")"
                             : "SURVIVED " + std::to_string(u.cases_run) + " cases")
                << "\n" << std::flush;
      rep.units.push_back(std::move(u));
      write_mutation_report(o.out, rep);  // after each unit: an interrupted run keeps what it found
    }
  write_mutation_report(o.out, rep);
  std::cout << "report: " << (std::filesystem::path(o.out) / "mutation.md").string() << "\n";
  const bool as_expected = survivors_as_expected(o, rep);
  return targeted_failed || !as_expected ? 1 : 0;
}

}  // namespace kv
