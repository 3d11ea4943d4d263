// The mutation run's report: the kill rate per op (a table) and every mutant's fate, as
// mutation.md and the mutation.json it is rendered from.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/mutate/catalog.hpp"

namespace kv {

/// One mutant run against one op family's cases.
struct MutationUnit {
  const MutantDef* m = nullptr;
  std::string family;
  bool shared = false;  // the mutant belongs to more than one family
  bool killed = false;
  std::string how, detail, case_str, source;  // how: fail, error or drift; the killing case
  int64_t cases_run = 0;
  int64_t killed_at = 0;  // 1-based index of the killing case among the unit's cases
};

struct MutationReport {
  nlohmann::json device;
  std::string command;
  std::map<std::string, int64_t> pool_counts;  // kept cases per source
  std::vector<nlohmann::json> dropped;         // cases the baseline failed
  std::vector<MutationUnit> units;
};

/// Writes DIR/mutation.json and DIR/mutation.md.
void write_mutation_report(const std::string& dir, const MutationReport& r);

}  // namespace kv
