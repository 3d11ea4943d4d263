// Rotary position embedding of one head of one token (OPS.md). Element j pairs with p(j):
// rotate-half pairs j with j +- D/2, interleaved pairs 2i with 2i+1. With the token's
// per-element table values c_j, s_j (already chosen by the position scheme):
//   fwd  y_j  = x_j c_j - x_p s_j   (j the first of its pair),  x_j c_j + x_p s_j  (second);
//   bwd  dx_j = dy_j c_j + dy_p s_p (first),  dy_j c_j - dy_p s_p  (second),
// the transpose of the forward map (HF's dx1 = dy1 c1 + dy2 s2, dx2 = dy2 c2 - dy1 s1).
// Products and the sum are fp32 accumulator operations.
#pragma once
#include <cstdint>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

inline int64_t rope_partner(int64_t j, int64_t d, bool interleaved) {
  if (interleaved) return j ^ 1;
  return j < d / 2 ? j + d / 2 : j - d / 2;
}
inline bool rope_first(int64_t j, int64_t d, bool interleaved) { return interleaved ? (j % 2 == 0) : j < d / 2; }
/// Index of the rotation (frequency pair) element j belongs to, in [0, D/2).
inline int64_t rope_pair(int64_t j, int64_t d, bool interleaved) { return interleaved ? j / 2 : j % (d / 2); }

template <class P>
void rope_head(const P& p, int64_t d, bool interleaved, bool bwd, const double* x, const double* c, const double* s,
               typename P::T* y) {
  if (KV_MUTANT_P(p, rope_layout_ignored)) interleaved = false;
  for (int64_t j = 0; j < d; ++j) {
    const int64_t q = KV_MUTANT_P(p, rope_partner_mirror) ? d - 1 - j : rope_partner(j, d, interleaved);
    const bool first = rope_first(j, d, interleaved);
    if (KV_MUTANT_P(p, rope_first_half_only) && !first) {
      y[j] = p.c(x[j]);
      continue;
    }
    auto a = KV_MUTANT_P(p, rope_no_cos) ? p.c(x[j]) : p.acc(p.c(x[j]) * p.c(c[j]));
    if (KV_MUTANT_P(p, rope_product_bf16)) a = p.mand(a, DType::bf16);
    auto b = p.acc(p.c(x[KV_MUTANT_P(p, rope_partner_self) ? j : q]) * p.c(bwd && !KV_MUTANT_P(p, rope_bwd_sin_own) ? s[q] : s[j]));
    if (KV_MUTANT_P(p, rope_no_sin)) b = p.c(0);
    const bool minus = KV_MUTANT_P(p, rope_bwd_as_fwd) ? first : first != bwd;
    y[j] = minus != KV_MUTANT_P(p, rope_sign) ? p.acc(a - b) : p.acc(a + b);
  }
}

}  // namespace kv
