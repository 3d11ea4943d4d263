// Picks the copy of the dense products this CPU runs (see gemm.hpp).
#include "reference/gemm.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

extern "C" const kv::GemmTable* kv_gemm_table_generic();
extern "C" const kv::GemmTable* kv_gemm_table_avx2();
extern "C" const kv::GemmTable* kv_gemm_table_avx512();

namespace kv {

std::vector<const GemmTable*> gemm_tables_supported() {
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  std::vector<const GemmTable*> t;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    t.push_back(kv_gemm_table_avx512());
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) t.push_back(kv_gemm_table_avx2());
  t.push_back(kv_gemm_table_generic());
  return t;
}

const GemmTable& gemm_table() {
  static const GemmTable* chosen = [] {
    auto all = gemm_tables_supported();
    const GemmTable* t = all.front();
    const char* want = std::getenv("KV_GEMM_ISA");
    if (want && *want) {
      t = nullptr;
      for (auto* x : all)
        if (std::strcmp(x->isa, want) == 0) t = x;
      if (!t)
        throw UsageError(std::string("KV_GEMM_ISA=") + want +
                         ": not built or not supported by this CPU (generic, avx2, avx512)");
    }
    if (const char* cs = std::getenv("KV_GEMM_CACHES"); cs && *cs) {
      long long a = 0, b = 0, c = 0;
      if (std::sscanf(cs, "%lld,%lld,%lld", &a, &b, &c) != 3 || a <= 0 || b <= 0 || c <= 0)
        throw UsageError(std::string("KV_GEMM_CACHES=") + cs + ": expected l1,l2,l3 in KiB, e.g. 48,2048,32768");
      int64_t l1, l2, l3;
      t->caches(a * 1024, b * 1024, c * 1024, &l1, &l2, &l3);
    }
    return t;
  }();
  return *chosen;
}

}  // namespace kv
