// Dense matrix products for FLCE's reference: Eigen's GEMM, one thread per call (callers
// tile the product over oneTBB). The products are compiled three times -- baseline
// x86-64, AVX2+FMA, AVX-512 -- each copy with Eigen renamed into its own namespace, so no
// symbol of a wide-ISA copy can stand in for the baseline one at link time; gemm_table()
// picks the widest copy this CPU supports, once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kv {

/// Row-major operands. float products run with subnormal results flushed to zero (FTZ):
/// Intel cores take microcode assists on subnormals, which made FLCE's magnitude products
/// 7x slower; a caller bounding a float sum of n non-negative terms adds 2^-126 per
/// operation (2n + 1 of them) for what the flush lost, and keeps its inputs zero or normal
/// (no DAZ: a subnormal input would still be honoured, slowly). nt: C(m x n) = A(m x k) B(n x k)^T; nn: C = A(m x k) B(k x n);
/// tn: C = A(k x m)^T B(k x n). With `accumulate` the product is added to C.
enum class GemmOp { nt, nn, tn };

struct GemmTable {
  const char* isa;
  void (*d)(GemmOp op, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
            double* c, int64_t ldc, bool accumulate);
  void (*s)(GemmOp op, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
            float* c, int64_t ldc, bool accumulate);
  /// The cache sizes (bytes) the copy's blocking uses; with nonzero arguments, sets them first.
  void (*caches)(int64_t set_l1, int64_t set_l2, int64_t set_l3, int64_t* l1, int64_t* l2, int64_t* l3);
};

/// The copies this CPU can run, widest first.
std::vector<const GemmTable*> gemm_tables_supported();
/// The widest supported copy, or the one KV_GEMM_ISA names (generic, avx2, avx512; a
/// clear error when this CPU lacks it). KV_GEMM_CACHES=l1,l2,l3 (KiB) overrides the cache
/// sizes Eigen's blocking reads from the CPU (virtual machines may report odd ones).
const GemmTable& gemm_table();

}  // namespace kv
