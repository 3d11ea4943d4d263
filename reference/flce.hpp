// Fused linear cross-entropy (OPS.md): logits = x W^T (+ b), computed row by row so the
// BT x V logits never exist whole; cross-entropy per row as in cross_entropy.hpp; with G
// the logits' gradient, dx = G W (sum over V, axis "v"), dW = G^T x and db = sum of G's
// rows (over rows, axis "rows"). The products x W^T sum over H (axis "h").
#pragma once
#include <cstdint>
#include <vector>

#include "reference/cross_entropy.hpp"

namespace kv {

struct FlceGeom {
  int64_t bt = 0, h = 0, v = 0;
  bool bias = false;
};

/// One row of logits: acc(sum_h x_h W_vh) (+ b_v).
template <class P>
void flce_logits_row(const P& p, const FlceGeom& g, const double* x, const double* w, const double* b,
                     typename P::T* out) {
  for (int64_t v = 0; v < g.v; ++v) {
    auto s = p.sum();
    for (int64_t k = 0; k < g.h; ++k) s.add(p.acc(p.c(x[k]) * p.c(w[v * g.h + k])));
    out[v] = p.finish(s, "h");
    if (g.bias) out[v] = p.acc(out[v] + p.c(b[v]));
  }
}

/// dx of one row from that row's logits gradient G: dx_k = acc(sum_v G_v W_vk).
template <class P>
void flce_dx_row(const P& p, const FlceGeom& g, const typename P::T* grad, const double* w, typename P::T* dx) {
  for (int64_t k = 0; k < g.h; ++k) {
    auto s = p.sum();
    for (int64_t v = 0; v < g.v; ++v) s.add(p.acc(grad[v] * p.c(w[v * g.h + k])));
    dx[k] = p.finish(s, "v");
  }
}

}  // namespace kv
