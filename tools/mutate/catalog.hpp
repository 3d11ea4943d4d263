// The mutation suite's catalog (catalog.def) as data: each mutant's name, the ops whose
// cases can kill it, the impl it breaks and what it breaks. Part of kverify-mutate only
// (compiled with -DKV_MUTANTS, core/mutant.hpp).
#pragma once
#include <string>
#include <vector>

#include "core/mutant.hpp"

namespace kv {

struct MutantDef {
  Mutant id;
  std::string name;
  std::vector<std::string> ops;  // op families ("softmax") or ops ("softmax.bwd")
  std::string device;            // host | cuda
  std::string kind, what;
};

const std::vector<MutantDef>& mutant_catalog();
/// Throws UsageError naming the unknown mutant.
const MutantDef& mutant_named(const std::string& name);
/// "softmax" for "softmax.bwd".
std::string op_family(const std::string& op);
/// The op families whose cases a mutant runs against, in catalog order.
std::vector<std::string> mutant_families(const MutantDef& m);
/// Whether cases of `op` run the mutated code (a token of m's ops is op or its family).
bool mutant_covers(const MutantDef& m, const std::string& op);
/// Sets g_mutant from the environment variable KV_MUTANT (a mutant's name); unset: none.
void select_mutant_from_env();

}  // namespace kv
