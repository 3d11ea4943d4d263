// One copy of the dense products (see gemm.hpp), built once per instruction set with
// KV_GEMM_ISA naming it and `Eigen` defined to a namespace of that copy's own.
#ifndef KV_GEMM_ISA
#error "build with -DKV_GEMM_ISA=<name> -DEigen=Eigen_<name>"
#endif
#define EIGEN_DONT_PARALLELIZE
#include <xmmintrin.h>

#include <Eigen/Core>
#include <type_traits>

#include "reference/gemm.hpp"

#define KV_CAT2(a, b) a##b
#define KV_CAT(a, b) KV_CAT2(a, b)
#define KV_STR2(a) #a
#define KV_STR(a) KV_STR2(a)

namespace {

template <class S>
void product(kv::GemmOp op, int64_t m, int64_t n, int64_t k, const S* a, int64_t lda, const S* b, int64_t ldb, S* c,
             int64_t ldc, bool accumulate) {
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using In = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  // float products flush subnormal results to zero (gemm.hpp says why and what it costs).
  const unsigned csr = _mm_getcsr();
  if constexpr (std::is_same_v<S, float>) _mm_setcsr(csr | 0x8000u);
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  auto run = [&](const auto& prod) {
    if (accumulate) C.noalias() += prod;
    else C.noalias() = prod;
  };
  switch (op) {
    case kv::GemmOp::nt:
      run(In(a, m, k, Eigen::OuterStride<>(lda)) * In(b, n, k, Eigen::OuterStride<>(ldb)).transpose());
      break;
    case kv::GemmOp::nn:
      run(In(a, m, k, Eigen::OuterStride<>(lda)) * In(b, k, n, Eigen::OuterStride<>(ldb)));
      break;
    case kv::GemmOp::tn:
      run(In(a, k, m, Eigen::OuterStride<>(lda)).transpose() * In(b, k, n, Eigen::OuterStride<>(ldb)));
      break;
  }
  _mm_setcsr(csr);
}

void caches(int64_t s1, int64_t s2, int64_t s3, int64_t* l1, int64_t* l2, int64_t* l3) {
  if (s1 > 0 && s2 > 0 && s3 > 0) Eigen::setCpuCacheSizes(s1, s2, s3);
  *l1 = Eigen::l1CacheSize(), *l2 = Eigen::l2CacheSize(), *l3 = Eigen::l3CacheSize();
}

}  // namespace

extern "C" const kv::GemmTable* KV_CAT(kv_gemm_table_, KV_GEMM_ISA)() {
  static const kv::GemmTable t{KV_STR(KV_GEMM_ISA), &product<double>, &product<float>, &caches};
  return &t;
}
