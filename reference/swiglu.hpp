// SwiGLU (OPS.md): c = silu(a) * b with silu(a) = a * sigmoid(a), sigmoid(a) = 1/(1+exp(-a));
// db = dc * silu(a); da = dc * b * sigmoid(a) * (1 + a * (1 - sigmoid(a))). Every operation
// is an accumulator operation (fp32); exp is an fp32 math function with declared ulps.
#pragma once
#include <optional>
#include <utility>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

/// sigmoid(a) = 1/(1 + exp(-a)). For a < -88, fp32 exp(-a) may overflow to inf and an
/// impl then gets 1/inf = 0 (IEEE): the value is computed as exp(a)/(1 + exp(a)), which
/// never overflows, and an enclosure also admits 0 there.
template <class P>
typename P::T swiglu_sigmoid(const P& p, double a) {
  if (a < -88.0) {
    if (KV_MUTANT_P(p, sw_overflow_zero)) return p.c(0);
    auto e = p.exp(p.c(a));
    return p.or_zero(p.div(e, p.acc(p.c(1) + e)));
  }
  typename P::T na = -p.c(a);
  if (KV_MUTANT_P(p, sw_sigmoid_sign)) na = p.c(a);
  if (KV_MUTANT_P(p, sw_exp_arg_bf16)) na = p.mand(na, DType::bf16);
  auto sig = p.div(p.c(1), p.acc(p.c(1) + p.exp(na)));
  return KV_MUTANT_P(p, sw_sigmoid_bf16) ? p.mand(sig, DType::bf16) : sig;
}

template <class P>
typename P::T swiglu_fwd(const P& p, double a, double b, std::optional<DType> act = std::nullopt) {  // site glu.act
  if (KV_MUTANT_P(p, sw_ab_swapped)) std::swap(a, b);
  auto A = p.c(a);
  auto silu = KV_MUTANT_P(p, sw_silu_no_a) ? swiglu_sigmoid(p, a) : p.acc(A * swiglu_sigmoid(p, a));
  if (act) silu = p.mand(silu, *act);
  return KV_MUTANT_P(p, sw_no_b) ? silu : p.acc(silu * p.c(b));
}

/// da and db of one element.
template <class P>
void swiglu_bwd(const P& p, double dc, double a, double b, typename P::T& da, typename P::T& db,
                std::optional<DType> act = std::nullopt,  // site glu.act: the silu db takes
                std::optional<DType> dcb_site = std::nullopt) {  // site glu.dc_b: dc * b rounded in da
  auto A = p.c(a), DC = p.c(dc);
  auto sig = swiglu_sigmoid(p, KV_MUTANT_P(p, sw_b_sigmoid_of_b) ? b : a);
  auto silu = p.acc(A * sig);
  if (act) silu = p.mand(silu, *act);
  db = p.acc(DC * (KV_MUTANT_P(p, sw_b_db_no_a) ? sig : silu));
  auto one_sig = KV_MUTANT_P(p, sw_b_inner_sign) ? p.acc(p.c(1) + sig) : p.acc(p.c(1) - sig);
  auto inner = p.acc(p.c(1) + (KV_MUTANT_P(p, sw_b_inner_no_a) ? one_sig : p.acc(A * one_sig)));
  if (KV_MUTANT_P(p, sw_b_inner_dropped)) inner = p.c(1);
  auto dcb = KV_MUTANT_P(p, sw_b_da_no_b) ? DC : KV_MUTANT_P(p, sw_b_da_no_dc) ? p.c(b) : p.acc(DC * p.c(b));
  if (dcb_site) dcb = p.mand(dcb, *dcb_site);
  da = p.acc(dcb * p.acc(sig * inner));
  if (KV_MUTANT_P(p, sw_b_outputs_swapped)) std::swap(da, db);
}

}  // namespace kv
