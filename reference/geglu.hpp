// GeGLU with the tanh approximation (OPS.md): u = sqrt(2/pi) * (a + 0.044715 a^3),
// gelu(a) = 0.5 a (1 + tanh u), c = gelu(a) * b; db = dc * gelu(a);
// da = dc * b * [0.5 (1 + tanh u) + 0.5 a (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 a^2)].
// The constants are the fp32 numbers nearest to them (what `0.044715f` gives a kernel).
#pragma once
#include <optional>
#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

inline constexpr double kGeluC = static_cast<double>(0.044715f);
inline constexpr double kGeluC3 = static_cast<double>(0.134145f);  // 3 * 0.044715
inline constexpr double kSqrt2OverPi = static_cast<double>(0.7978845608028654f);

template <class P>
typename P::T geglu_tanh_u(const P& p, const typename P::T& A) {
  auto a3 = KV_MUTANT_P(p, gg_cube_square) ? p.acc(A * A) : p.acc(p.acc(A * A) * A);
  auto c = p.c(KV_MUTANT_P(p, gg_c_bf16) ? round_to(DType::bf16, kGeluC) : kGeluC);
  auto inner = KV_MUTANT_P(p, gg_no_cubic) ? A : p.acc(A + p.acc(c * a3));
  return p.tanh(KV_MUTANT_P(p, gg_no_sqrt2pi) ? inner : p.acc(p.c(kSqrt2OverPi) * inner));
}

template <class P>
typename P::T geglu_gelu(const P& p, const typename P::T& A, const typename P::T& th) {
  auto half_a = KV_MUTANT_P(p, gg_half_dropped) ? A : p.acc(p.c(0.5) * A);
  return p.acc(half_a * (KV_MUTANT_P(p, gg_one_minus_th) ? p.acc(p.c(1) - th) : p.acc(p.c(1) + th)));
}

template <class P>
typename P::T geglu_fwd(const P& p, double a, double b, std::optional<DType> act = std::nullopt) {  // site glu.act
  auto A = p.c(a);
  auto gelu = geglu_gelu(p, A, geglu_tanh_u(p, A));
  if (act) gelu = p.mand(gelu, *act);
  return KV_MUTANT_P(p, gg_no_b) ? gelu : p.acc(gelu * p.c(b));
}

template <class P>
void geglu_bwd(const P& p, double dc, double a, double b, typename P::T& da, typename P::T& db,
               std::optional<DType> act = std::nullopt,  // site glu.act: the gelu db takes
               std::optional<DType> dcb = std::nullopt) {  // site glu.dc_b: dc * b rounded in da
  auto A = p.c(a), DC = p.c(dc);
  auto th = geglu_tanh_u(p, A);
  auto gelu = geglu_gelu(p, A, th);
  if (act) gelu = p.mand(gelu, *act);
  db = KV_MUTANT_P(p, gg_b_db_no_dc) ? gelu : p.acc(DC * gelu);
  auto t1 = KV_MUTANT_P(p, gg_b_t1_dropped) ? p.c(0) : p.acc(p.c(0.5) * p.acc(p.c(1) + th));
  auto dth = KV_MUTANT_P(p, gg_b_dth_sign) ? p.acc(p.c(1) + p.acc(th * th)) : p.acc(p.c(1) - p.acc(th * th));
  auto c3a2 = p.acc(p.c(KV_MUTANT_P(p, gg_b_c3_as_c) ? kGeluC : kGeluC3) * p.acc(A * A));
  auto poly = KV_MUTANT_P(p, gg_b_poly_no_sqrt2pi) ? p.acc(p.c(1) + c3a2) : p.acc(p.c(kSqrt2OverPi) * p.acc(p.c(1) + c3a2));
  auto t2 = p.acc(p.acc((KV_MUTANT_P(p, gg_b_t2_no_half) ? A : p.acc(p.c(0.5) * A)) * dth) * poly);
  if (KV_MUTANT_P(p, gg_b_t2_dropped)) t2 = p.c(0);
  auto dc_b = KV_MUTANT_P(p, gg_b_da_no_b) ? DC : p.acc(DC * p.c(b));
  if (dcb) dc_b = p.mand(dc_b, *dcb);
  da = p.acc(dc_b * p.acc(t1 + t2));
}

}  // namespace kv
