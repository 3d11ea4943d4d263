// Cross-entropy over given logits (OPS.md), one row at a time. With softcap s > 0 the
// logits are z = s * tanh(x / s); m = max z, d = sum exp(z - m), lse = m + log d.
// Row loss (PyTorch's definition, class weights w, w = 1 without them, target t):
//   (1 - ls) * w_t * (lse - z_t) + ls * sum_v w_v (lse - z_v) / V + zl * lse^2,
// and its gradient with respect to z_u (derived from it, so loss and gradient agree):
//   (1 - ls) * w_t * (p_u - [u = t]) + ls * (p_u * sum_v w_v / V - w_u / V) + 2 zl lse p_u,
// times (1 - tanh^2(x_u / s)) under softcap. Rows whose target is ignore_index have loss 0.
// `mean` divides by the sum of w_t over the other rows. Where libraries disagree the op
// names the choice (attributes, defaults PyTorch's as measured on an H100 with 2.11):
//   empty_mean: `mean` over rows that are all ignored is NaN (nan, PyTorch's 0/0) or 0
//     (zero, Liger's); sum and none give 0 there either way;
//   ignored_grad: an ignored row's gradient is 0 * p_u, p the row's softmax (propagate,
//     PyTorch's: NaN throughout where z holds NaN or +inf or is all -inf, else 0), or an
//     exact 0 (zero). The dloss of an ignored row never enters (PyTorch's neither).
// Attributes ls, zl, s enter as fp32 numbers (mandated roundings).
#pragma once
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

enum class CeReduction { none, mean, sum };
/// `mean` over rows that are all ignored.
enum class CeEmptyMean { nan, zero };
/// The gradient of an ignored row.
enum class CeIgnoredGrad { propagate, zero };

struct CeParams {
  int64_t v = 0;
  int64_t ignore_index = -100;
  double ls = 0, zl = 0, softcap = 0;
  bool weighted = false;
  CeReduction reduction = CeReduction::mean;
  CeEmptyMean empty_mean = CeEmptyMean::nan;
  CeIgnoredGrad ignored_grad = CeIgnoredGrad::propagate;
  std::optional<DType> row_loss;  // site ce.row_loss: each row's loss rounded before the reduction
  std::optional<DType> grad;      // site ce.grad: the gradient (under mean, / wsum) rounded, then * dloss
};

/// A row gradient's scale: dloss (per row under none), over the weight sum under mean, as one
/// factor (scale) and as its parts (for site ce.grad: the gradient divided by wsum, rounded,
/// then times dloss).
template <class T>
struct CeGradScale {
  T scale, dloss, wsum;
  bool mean = false;
};

/// Logits enter as exact doubles (cross_entropy) or as computed values (FLCE's x W^T).
template <class P, class X>
typename P::T ce_lift(const P& p, const X& v) {
  if constexpr (std::is_same_v<X, double>) return p.c(v);
  else return v;
}

template <class P>
struct CeRowStats {
  std::vector<typename P::T> z;
  std::vector<typename P::T> e;  // exp(z - m), kept for the gradient
  typename P::T m, d, lse;
};

/// Softcapped logits, their max and lse.
template <class P, class X>
void ce_stats(const P& p, const CeParams& q, const X* x, CeRowStats<P>& st) {
  using T = typename P::T;
  st.z.resize(static_cast<size_t>(q.v));
  const T S = p.mand(p.c(q.softcap), DType::f32);
  for (int64_t j = 0; j < q.v; ++j) {
    const T xj = ce_lift(p, x[j]);
    st.z[j] = q.softcap > 0 ? p.acc(S * p.tanh(KV_MUTANT_P(p, ce_softcap_mul) ? p.acc(xj * S) : p.div(xj, S))) : xj;
  }
  T m = st.z[0];
  for (int64_t j = 1; j < q.v - KV_MUTANT_P(p, ce_max_tail); ++j) m = p.max(m, st.z[j]);
  if (KV_MUTANT_P(p, ce_no_max)) m = p.c(0);
  auto d = p.sum();
  st.e.resize(static_cast<size_t>(q.v));
  for (int64_t j = 0; j < q.v; ++j) {
    st.e[j] = p.exp(p.acc(st.z[j] - m));
    if (!KV_MUTANT_P(p, ce_sum_tail) || j + 1 < q.v) d.add(st.e[j]);
  }
  st.m = m;
  st.d = p.max_sub_den(p.finish(d, "row"));
  st.lse = p.acc(m + p.max_sub_log(st.d));
}

template <class P, class X>
typename P::T ce_row_loss(const P& p, const CeParams& q, const X* x, const double* w, int64_t t) {
  using T = typename P::T;
  if (t == q.ignore_index) {
    if (!KV_MUTANT_P(p, ce_ignore_as_class0)) return p.c(0);
    t = 0;
  }
  CeRowStats<P> st;
  ce_stats(p, q, x, st);
  T loss = KV_MUTANT_P(p, ce_loss_sign) ? p.acc(st.z[t] - st.lse) : p.acc(st.lse - st.z[t]);
  if (q.weighted) loss = p.acc(p.c(w[t]) * loss);
  const T LS = p.mand(p.c(q.ls), DType::f32), ZL = p.mand(p.c(q.zl), DType::f32);
  if (q.ls > 0) {
    auto s = p.sum();
    for (int64_t j = 0; j < q.v; ++j) {
      T d = p.acc(st.lse - st.z[j]);
      s.add(q.weighted && !KV_MUTANT_P(p, ce_ls_unweighted) ? p.acc(p.c(w[j]) * d) : d);
    }
    T smooth = p.div(p.finish(s, "row"), p.c(static_cast<double>(q.v - KV_MUTANT_P(p, ce_ls_over_v_minus_1))));
    loss = p.acc(p.acc(p.acc(p.c(1) - LS) * loss) + p.acc(LS * smooth));
  }
  if (q.zl > 0) loss = p.acc(loss + p.acc(ZL * (KV_MUTANT_P(p, ce_zloss_not_squared) ? st.lse : p.acc(st.lse * st.lse))));
  return q.row_loss ? p.mand(loss, *q.row_loss) : loss;
}

/// Gradient of one row times sc.scale (dloss, divided by the weight sum under mean).
/// wbar = sum_v w_v / V (1 without weights).
template <class P, class X>
void ce_row_grad(const P& p, const CeParams& q, const X* x, const double* w, int64_t t,
                 const typename P::T& wbar, const CeGradScale<typename P::T>& sc, typename P::T* g) {
  using T = typename P::T;
  const bool ignored = t == q.ignore_index && !KV_MUTANT_P(p, ce_ignore_as_class0);
  if (ignored && (q.ignored_grad == CeIgnoredGrad::zero) != KV_MUTANT_P(p, ce_ignored_grad_flipped)) {
    for (int64_t j = 0; j < q.v; ++j) g[j] = p.c(0);
    return;
  }
  if (t == q.ignore_index && !ignored) t = 0;
  CeRowStats<P> st;
  ce_stats(p, q, x, st);
  const T den = st.d;
  if (ignored) {  // ignored_grad=propagate: 0 * p_j
    for (int64_t j = 0; j < q.v; ++j) g[j] = p.acc(p.c(0) * p.div(st.e[j], den));
    return;
  }
  const T LS = p.mand(p.c(q.ls), DType::f32), ZL = p.mand(p.c(q.zl), DType::f32);
  const T S = p.mand(p.c(q.softcap), DType::f32), V = p.c(static_cast<double>(q.v));
  const T zlse2 = p.acc(p.acc(p.c(KV_MUTANT_P(p, ce_b_zloss_no_2) ? 1 : 2) * ZL) * st.lse);
  for (int64_t j = 0; j < q.v; ++j) {
    T pj = p.div(st.e[j], den);
    T gj = j == t ? p.acc(pj - p.c(1)) : pj;
    if (j == t && KV_MUTANT_P(p, ce_b_no_minus_one)) gj = pj;
    if (j == t && KV_MUTANT_P(p, ce_b_pt_bf16)) gj = p.acc(p.mand(pj, DType::bf16) - p.c(1));
    if (q.weighted) gj = p.acc(p.c(w[KV_MUTANT_P(p, ce_b_weight_index) ? j : t]) * gj);
    if (q.ls > 0) {
      T sm = q.weighted ? p.acc(p.acc(pj * wbar) - p.div(p.c(w[j]), V)) : p.acc(pj - p.div(p.c(1), V));
      if (KV_MUTANT_P(p, ce_b_ls_sign) && !q.weighted) sm = p.acc(pj + p.div(p.c(1), V));
      gj = p.acc(p.acc(p.acc(p.c(1) - LS) * gj) + p.acc(LS * sm));
    }
    if (q.zl > 0) gj = p.acc(gj + p.acc(zlse2 * pj));
    if (q.softcap > 0 && !KV_MUTANT_P(p, ce_b_softcap_factor)) {
      T th = p.tanh(p.div(ce_lift(p, x[j]), S));
      gj = p.acc(gj * p.acc(p.c(1) - p.acc(th * th)));
    }
    if (q.grad) g[j] = p.acc(p.mand(sc.mean ? p.div(gj, sc.wsum) : gj, *q.grad) * sc.dloss);
    else g[j] = p.acc(gj * sc.scale);
  }
}

}  // namespace kv
