// The catalog as data (catalog.hpp), and the process's active mutant.
#include "tools/mutate/catalog.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"

namespace kv {

Mutant g_mutant = Mutant::none;

namespace {

std::vector<std::string> split_ops(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find(',', pos);
    if (e == std::string::npos) e = s.size();
    std::string t = s.substr(pos, e - pos);
    if (!t.empty()) out.push_back(t);
    pos = e + 1;
  }
  return out;
}

}  // namespace

const std::vector<MutantDef>& mutant_catalog() {
  static const std::vector<MutantDef> c = {
#define KV_MUTANT_DEF(id, ops, device, kind, what) {Mutant::id, #id, split_ops(ops), device, kind, what},
#include "core/mutant_catalog.def"
#undef KV_MUTANT_DEF
  };
  return c;
}

const MutantDef& mutant_named(const std::string& name) {
  for (auto& m : mutant_catalog())
    if (m.name == name) return m;
  throw UsageError("unknown mutant '" + name + "' (kverify-mutate --list names them)");
}

std::string op_family(const std::string& op) {
  const size_t dot = op.rfind('.');
  return dot == std::string::npos ? op : op.substr(0, dot);
}

std::vector<std::string> mutant_families(const MutantDef& m) {
  std::vector<std::string> f;
  for (auto& t : m.ops)
    if (std::find(f.begin(), f.end(), op_family(t)) == f.end()) f.push_back(op_family(t));
  return f;
}

bool mutant_covers(const MutantDef& m, const std::string& op) {
  return std::any_of(m.ops.begin(), m.ops.end(), [&](const std::string& t) { return t == op || t == op_family(op); });
}

void select_mutant_from_env() {
  const char* v = std::getenv("KV_MUTANT");
  g_mutant = v && *v ? mutant_named(v).id : Mutant::none;
}

}  // namespace kv
