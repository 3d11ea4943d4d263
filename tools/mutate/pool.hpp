// The cases a mutation run kills mutants with: the suite's own targeted cases
// (cases.json, each saying which mutants it is for), the fuzz campaigns' curated tier,
// and cases drawn by the fuzz generators (fuzz/gen.hpp) with a fixed seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/case.hpp"

namespace kv {

struct PoolOptions {
  std::string device;                 // host | cuda: the impl named after it runs each case
  std::vector<std::string> families;  // op families wanted
  std::string cases = "builtin";      // a file like tools/mutate/cases.json, builtin, or none
  std::string curated = "builtin";    // fuzz/curated.json (builtin), a file, or none
  int64_t fuzz_per_op = 4;            // generated cases per op
  uint64_t seed = 1;
  int64_t max_elements = int64_t(1) << 14;
};

struct PoolCase {
  Case c;           // normalized
  int repeat = 1;   // runs compared bit for bit where the impl claims run_to_run
  std::string source;  // targeted, curated or fuzz
};

/// The pool in order: targeted cases, curated, generated. Throws UsageError for a
/// targeted case that does not parse or normalize.
std::vector<PoolCase> build_pool(const PoolOptions& o);

}  // namespace kv
