// Fused linear cross-entropy (OPS.md): logits = x W^T (+ b), computed row by row so the
// BT x V logits never exist whole; cross-entropy per row as in cross_entropy.hpp; with G
// the logits' gradient, dx = G W (sum over V, axis "v"), dW = G^T x and db = sum of G's
// rows (over rows, axis "rows"). The products x W^T sum over H (axis "h").
// grad_rounding=x_dtype (a mandated rounding): G is rounded to x's dtype before dx, dW and
// db use it, as PyTorch autograd (the logits and their gradient are bf16 tensors) and
// Liger (the gradient written into the bf16 logits chunk) do, and as tensor-core products
// of bf16/fp16 operands need; fp32 (the default) keeps G in the accumulator.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/mutant.hpp"
#include "reference/cross_entropy.hpp"

namespace kv {

struct FlceGeom {
  int64_t bt = 0, h = 0, v = 0;
  bool bias = false;
  bool round_grad = false;  // grad_rounding=x_dtype, or the site flce.grad
  DType x = DType::f32;     // x's dtype
  DType grad_dtype = DType::f32;  // what G rounds to where round_grad: x's, or the site's
  std::optional<DType> logits;    // site flce.logits: each logit (after the bias) rounded to it
};

/// G as the products take it: each g_v rounded to x's dtype under grad_rounding=x_dtype.
template <class P>
void flce_round_grad(const P& p, const FlceGeom& g, typename P::T* grad) {
  if (!g.round_grad) return;
  for (int64_t v = 0; v < g.v; ++v) grad[v] = p.mand(grad[v], g.grad_dtype);
}

/// One row of logits: acc(sum_h x_h W_vh) (+ b_v).
template <class P>
void flce_logits_row(const P& p, const FlceGeom& g, const double* x, const double* w, const double* b,
                     typename P::T* out) {
  for (int64_t v = 0; v < g.v; ++v) {
    auto s = p.sum();
    for (int64_t k = 0; k < g.h - KV_MUTANT_P(p, fl_h_tail); ++k)
      s.add(p.acc(p.c(x[k]) * p.c(w[KV_MUTANT_P(p, fl_w_transposed) ? k * g.v + v : v * g.h + k])));
    out[v] = p.finish(s, "h");
    if (g.bias && !KV_MUTANT_P(p, fl_bias_dropped)) out[v] = p.acc(out[v] + p.c(b[v]));
    if (g.bias && KV_MUTANT_P(p, fl_bias_twice)) out[v] = p.acc(out[v] + p.c(b[v]));
    if (g.logits) out[v] = p.mand(out[v], *g.logits);
    if (KV_MUTANT_P(p, fl_logits_bf16)) out[v] = p.mand(out[v], DType::bf16);
  }
}

/// dx of one row from that row's logits gradient G: dx_k = acc(sum_v G_v W_vk).
template <class P>
void flce_dx_row(const P& p, const FlceGeom& g, const typename P::T* grad, const double* w, typename P::T* dx) {
  for (int64_t k = 0; k < g.h; ++k) {
    auto s = p.sum();
    for (int64_t v = 0; v < g.v - KV_MUTANT_P(p, fl_dx_v_tail); ++v)
      s.add(p.acc(grad[v] * p.c(w[KV_MUTANT_P(p, fl_dx_w_transposed) ? k * g.v + v : v * g.h + k])));
    dx[k] = p.finish(s, "v");
    if (KV_MUTANT_P(p, fl_dx_sign)) dx[k] = -dx[k];
  }
}

}  // namespace kv
