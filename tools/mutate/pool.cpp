// Building the mutation pool (pool.hpp).
#include "tools/mutate/pool.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/inputs.hpp"
#include "core/registry.hpp"
#include "fuzz/curated.hpp"
#include "fuzz/gen.hpp"
#include "tools/mutate/catalog.hpp"
#include "kv_mutation_cases.hpp"

namespace kv {

namespace {

bool wanted(const PoolOptions& o, const std::string& op) {
  return std::find(o.families.begin(), o.families.end(), op_family(op)) != o.families.end();
}

/// c with the device's impl, normalized; false when the op has no such impl or refuses c.
bool on_device(const PoolOptions& o, Case& c) {
  c.impl = o.device;
  bool has = false;
  for (auto* im : registry().impls(c.op)) has = has || im->name() == o.device;
  if (!has) return false;
  try {
    registry().normalize(c);
  } catch (const UsageError&) {
    return false;
  }
  return true;
}

/// The targeted cases with their repeat counts (notes are checked by load_curated).
void add_targeted(const PoolOptions& o, std::vector<PoolCase>& out) {
  if (o.cases == "none") return;
  std::string text = kMutationCasesJson, where = "tools/mutate/cases.json (built in)";
  if (o.cases != "builtin") {
    std::ifstream f(o.cases);
    if (!f) throw UsageError("cannot read cases file '" + o.cases + "'");
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    where = o.cases;
  }
  const auto parsed = parse_curated(text, where);
  const auto j = nlohmann::json::parse(text);
  for (size_t i = 0; i < parsed.size(); ++i) {
    Case c = parsed[i].c;
    if (!wanted(o, c.op) || c.impl != o.device) continue;  // each case names its impl
    try {
      registry().normalize(c);
    } catch (const UsageError& e) {
      throw UsageError(where + ", case " + std::to_string(i + 1) + ": " + e.what());
    }
    out.push_back({c, j["cases"][i].value("repeat", 1), "targeted"});
  }
}

}  // namespace

std::vector<PoolCase> build_pool(const PoolOptions& o) {
  std::vector<PoolCase> out;
  add_targeted(o, out);
  for (auto& cc : load_curated(o.curated)) {
    Case c = cc.c;
    if (wanted(o, c.op) && on_device(o, c)) out.push_back({c, 1, "curated"});
  }
  if (o.fuzz_per_op <= 0) return out;
  for (auto* op : registry().ops()) {
    if (!wanted(o, op->name())) continue;
    Case probe;
    probe.op = op->name();
    probe.shape = op->example_shape();
    if (!on_device(o, probe)) continue;
    const auto gen = case_gen(make_space(op->name(), o.device), {o.max_elements});
    for (int64_t i = 0; i < o.fuzz_per_op; ++i) {
      // A fixed draw per (seed, op, index) on every machine; RapidCheck's size 0..100 from it too.
      const auto key = static_cast<uint64_t>(draw_int(o.seed, "mutate:" + op->name(), {i}, 0, INT64_MAX));
      out.push_back({gen(rc::Random(key), static_cast<int>(key % 101)).value(), 1, "fuzz"});
    }
  }
  return out;
}

}  // namespace kv
