// Attributes, parameters and generated targets shared by cross_entropy and
// fused_linear_cross_entropy, and the loss/gradient drivers over rows.
#pragma once
#include <limits>

#include "core/inputs.hpp"
#include "core/mutant.hpp"
#include "ops/op_base.hpp"
#include "reference/ce_params.hpp"
#include "reference/cross_entropy.hpp"

namespace kv {

inline std::vector<AttrSpec> ce_attrs(bool with_weights) {
  std::vector<AttrSpec> a = {{"ignore_index", false, "-100", {}, true},
                             {"label_smoothing", true, hex_float(0.0), {}},
                             {"z_loss", true, hex_float(0.0), {}},
                             {"softcap", true, hex_float(0.0), {}},
                             {"reduction", false, "mean", {"mean", "sum", "none"}},
                             {"empty_mean", false, "nan", {"nan", "zero"}},
                             {"ignored_grad", false, "propagate", {"propagate", "zero"}}};
  if (with_weights) a.push_back({"weights", false, "none", {"none", "class"}});
  return a;
}

inline void ce_check(const Case& c) {
  double ls = c.attr_real("label_smoothing");
  if (ls < 0 || ls > 1) throw UsageError("label_smoothing must be in [0, 1]");
  if (c.attr_real("z_loss") < 0) throw UsageError("z_loss must be >= 0");
  if (c.attr_real("softcap") < 0) throw UsageError("softcap must be >= 0 (0: none)");
}

/// Targets: uniform in [0, V), one row in eight set to ignore_index.
inline void ce_fill_targets(const Case& c, TensorView t, int64_t v) {
  const int64_t ignore = std::stoll(c.attr("ignore_index"));
  for (int64_t r = 0; r < t.desc.numel(); ++r) {
    bool ign = draw_int(c.seed, "ignore", {r}, 0, 8) == 0;
    t.store(r, static_cast<double>(ign ? ignore : draw_int(c.seed, "target", {r}, 0, v)));
  }
}

/// The reduction's divisor: sum of w_t over rows not ignored (a count without weights).
template <class P>
typename P::T ce_weight_sum(const P& p, const CeParams& q, const DoubleBuf& target, const double* w) {
  typename P::T out = p.c(0);
  const int64_t rows = static_cast<int64_t>(target.size());
  column_sums(
      p, rows, 1, 1, RowSet{}, false, "rows",
      [&](int64_t r, auto* s) {
        int64_t t = static_cast<int64_t>(target[r]);
        if (t != q.ignore_index) s[0].add(q.weighted ? p.c(w[t]) : p.c(1));
        else if (KV_MUTANT_P(p, ce_mean_counts_ignored)) s[0].add(p.c(1));
      },
      [&](int, int64_t, const typename P::T& v) { out = v; });
  return out;
}

/// sum_v w_v / V (1 without weights).
template <class P>
typename P::T ce_wbar(const P& p, const CeParams& q, const double* w) {
  if (!q.weighted) return p.c(1);
  auto s = p.sum();
  for (int64_t j = 0; j < q.v; ++j) s.add(p.c(w[j]));
  return KV_MUTANT_P(p, ce_wbar_no_div) ? p.finish(s, "row") : p.div(p.finish(s, "row"), p.c(static_cast<double>(q.v)));
}

/// Rows whose target is not ignore_index.
inline int64_t numel_nonignored(const CeParams& q, const DoubleBuf& target) {
  int64_t n = 0;
  for (double t : target) n += static_cast<int64_t>(t) != q.ignore_index;
  return n;
}

/// Loss output: per row (none) or the reduced scalar. row_loss(r) gives row r's loss.
template <class P, class S, class RowLoss>
void ce_emit_loss(const P& p, const CeParams& q, int64_t rows, const DoubleBuf& target, const double* w,
                  S& sink, RowSet rs, bool parallel, RowLoss&& row_loss) {
  using T = typename P::T;
  if (q.reduction == CeReduction::none) {
    par_rows(rows, parallel, [&](int64_t r) {
      if (rs.has(r)) sink(0, r, row_loss(r));
    });
    return;
  }
  T total = p.c(0);
  column_sums(
      p, rows, 1, 1, rs, parallel, "rows", [&](int64_t r, auto* s) { s[0].add(row_loss(r)); },
      [&](int, int64_t, const T& v) { total = v; });
  if (!rs.all()) return;
  if (q.reduction == CeReduction::sum) return sink(0, 0, total);
  T wsum = ce_weight_sum(p, q, target, w);
  if (numel_nonignored(q, target) == 0) {  // empty_mean names the value: NaN (PyTorch's 0/0) or 0
    const bool nan = (q.empty_mean == CeEmptyMean::nan) != KV_MUTANT_P(p, ce_empty_mean_flipped);
    return sink(0, 0, p.c(nan ? std::numeric_limits<double>::quiet_NaN() : 0.0));
  }
  sink(0, 0, p.div(total, wsum));
}

/// The gradient's scale for row r: dloss (per row under none), over the weight sum under mean.
template <class P>
CeGradScale<typename P::T> ce_scale(const P& p, const CeParams& q, const DoubleBuf& dloss, int64_t r,
                                    const typename P::T& wsum, bool any_valid) {
  using T = typename P::T;
  if (q.reduction == CeReduction::none) return {p.c(dloss[r]), p.c(dloss[r]), wsum};
  if (q.reduction == CeReduction::sum) return {p.c(dloss[0]), p.c(dloss[0]), wsum};
  const T s = any_valid ? (KV_MUTANT_P(p, ce_b_mean_scale_missing) ? p.c(dloss[0]) : p.div(p.c(dloss[0]), wsum)) : p.c(0);
  return {s, p.c(dloss[0]), wsum, any_valid};
}

}  // namespace kv
