// fused_linear_cross_entropy bindings. Case shape BT x H x V. fwd: x (BT,H), weight (V,H),
// [bias (V)], target (BT, i32) -> loss. bwd: the same plus dloss -> dx, dweight, [dbias].
#include "ops/flce.hpp"

#include <algorithm>
#include <cmath>

#include "ops/host/host_impl.hpp"
#include "ops/ce_common.hpp"
#include "ops/flce_fast.hpp"
#include "reference/flce.hpp"

namespace kv {

namespace {

class FlceOp : public PolicyOp<FlceOp> {
 public:
  explicit FlceOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "fused_linear_cross_entropy.bwd" : "fused_linear_cross_entropy.fwd"; }
  std::vector<int64_t> example_shape() const override { return {8, 256, 1000}; }
  std::vector<AttrSpec> attrs() const override {
    auto a = ce_attrs(false);
    a.push_back({"bias", false, "false", {"false", "true"}});
    a.push_back({"grad_rounding", false, "fp32", {"fp32", "x_dtype"}});
    return a;
  }
  void check(Case& c) const {
    if (c.shape.size() != 3 || c.shape[1] < 1 || c.shape[2] < 1)
      throw UsageError("fused_linear_cross_entropy needs a shape BT x H x V with H, V >= 1");
    ce_check(c);
  }
  std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const {
    std::vector<std::pair<std::string, char>> r = {{"x", 'x'}, {"weight", 'x'}, {"bias", 'x'}, {"target", 'i'}};
    if (bwd_) r.insert(r.end(), {{"dloss", 'f'}, {"dx", 'x'}, {"dweight", 'x'}, {"dbias", 'x'}});
    else r.push_back({"loss", 'f'});
    return r;
  }
  static FlceGeom geom(const Case& c) { return flce_geom(c); }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    const FlceGeom g = geom(c);
    std::vector<int64_t> lshape = c.attr("reduction") == "none" ? std::vector<int64_t>{g.bt} : std::vector<int64_t>{1};
    auto t = [&](const char* n, std::vector<int64_t> s, Role r) { return TensorSpec{n, s, c.dtypes.at(n), r}; };
    std::vector<TensorSpec> v = {t("x", {g.bt, g.h}, Role::input), t("weight", {g.v, g.h}, Role::input)};
    if (g.bias) v.push_back(t("bias", {g.v}, Role::input));
    v.push_back(t("target", {g.bt}, Role::input));
    if (!bwd_) {
      v.push_back(t("loss", lshape, Role::output));
      return v;
    }
    v.push_back(t("dloss", lshape, Role::input));
    v.push_back(t("dx", {g.bt, g.h}, Role::output));
    v.push_back(t("dweight", {g.v, g.h}, Role::output));
    if (g.bias) v.push_back(t("dbias", {g.v}, Role::output));
    return v;
  }
  /// Besides the shared distributions, `confident`: each row of x is 32 W_t / |W_t|^2 for
  /// its target t, so its target logit is about 32 and the others of order 32/sqrt(H):
  /// p_y -> 1, the cancellation cross_entropy's `confident` plants, through the product.
  /// That needs H large (at H = 1 the other logits are 32 W_v / W_t, often above 32):
  /// `confident_margin` reaches p_y -> 1 at any H and in every dtype. Each class row's x
  /// (normal) is scaled by a power of two, exact in every dtype, until the class that
  /// leads along it leads every other logit by 40 or more (the bias's spread included),
  /// and that class becomes the row's target: 1 - p_y < V e^-40.
  std::vector<std::string> dists() const override {
    auto d = known_dists();
    d.push_back("confident");
    d.push_back("confident_margin");
    return d;
  }
  void generate(const Case& c, TensorSet& ts) const override {
    const FlceGeom g = geom(c);
    auto x = ts.view("x"), w = ts.view("weight");
    const bool confident = c.dist == "confident", margin = c.dist == "confident_margin";
    fill_tensor(x, confident || margin ? "normal" : c.dist, c.seed, 0.0, 1.0);
    // Weights scaled as an initialized LM head: logits of order 1.
    fill_tensor(w, "normal", c.seed, 0.0, 1.0 / std::sqrt(static_cast<double>(g.h)));
    if (g.bias) {
      auto b = ts.view("bias");
      fill_tensor(b, "normal", c.seed, 0.0, 0.1);
    }
    ce_fill_targets(c, ts.view("target"), g.v);
    if (confident) plant_confident_rows(g, ts);
    if (margin) plant_margin_rows(c, g, ts);
    if (bwd_) {
      auto d = ts.view("dloss");
      fill_tensor(d, "normal", c.seed, 0.0, 1.0);
    }
  }
  /// x_r = 32 W_t / |W_t|^2 where row r's target t is a class and |W_t|^2 is not tiny (a
  /// tiny one would push x towards overflow; such rows keep their normal x).
  static void plant_confident_rows(const FlceGeom& g, TensorSet& ts) {
    auto x = ts.view("x");
    const auto w = ts.view("weight"), t = ts.view("target");
    par_rows(g.bt, true, [&](int64_t r) {
      double tr = 0;
      t.read(r, 1, &tr);
      const auto ti = static_cast<int64_t>(tr);
      if (ti < 0 || ti >= g.v) return;
      std::vector<double> wt(static_cast<size_t>(g.h));
      w.read(ti * g.h, g.h, wt.data());
      double sq = 0;
      for (double e : wt) sq += e * e;
      if (!(sq >= 1e-2)) return;
      for (int64_t k = 0; k < g.h; ++k) x.store(r * g.h + k, 32.0 * wt[static_cast<size_t>(k)] / sq);
    });
  }
  /// confident_margin (see dists()): the logits x W^T + b of the stored values in double
  /// (their error, about 2^-50 of sum |x W|, is far below the margin), the leading class
  /// t and the runner-up; x scaled by 2^k >= 1 with 2^k (l_t - l_2) >= 40 + the bias's
  /// spread. A row whose leader ties (a gap of 0) or is ignore_index, whose scale would
  /// reach past a quarter of the dtype's range or past 2^24, or whose target is
  /// ignore_index keeps its draw.
  static void plant_margin_rows(const Case& c, const FlceGeom& g, TensorSet& ts) {
    auto x = ts.view("x"), t = ts.view("target");
    const auto w = ts.view("weight");
    std::vector<double> wv(static_cast<size_t>(g.v * g.h)), b(static_cast<size_t>(g.v), 0.0);
    w.read(0, g.v * g.h, wv.data());
    if (g.bias) ts.view("bias").read(0, g.v, b.data());
    const auto [bmin, bmax] = std::minmax_element(b.begin(), b.end());
    const double spread = g.v > 0 ? *bmax - *bmin : 0.0;
    const int64_t ignore = std::stoll(c.attr("ignore_index"));
    const double limit = max_finite(c.dtypes.at("x")) / 4;
    par_rows(g.bt, true, [&](int64_t r) {
      double tr = 0;
      t.read(r, 1, &tr);
      if (static_cast<int64_t>(tr) == ignore) return;
      std::vector<double> xr(static_cast<size_t>(g.h));
      x.read(r * g.h, g.h, xr.data());
      double first = -HUGE_VAL, second = -HUGE_VAL, amax = 0;
      int64_t lead = -1;
      for (int64_t v = 0; v < g.v; ++v) {
        double l = 0;
        for (int64_t k = 0; k < g.h; ++k) l += xr[static_cast<size_t>(k)] * wv[static_cast<size_t>(v * g.h + k)];
        if (l > first) second = first, first = l, lead = v;
        else if (l > second) second = l;
      }
      for (double e : xr) amax = std::max(amax, std::fabs(e));
      const double gap = g.v > 1 ? first - second : HUGE_VAL;
      if (!(gap > 0) || lead == ignore) return;
      double scale = 1;
      while (scale * gap < 40 + spread && scale < 0x1p24) scale *= 2;
      if (scale * gap < 40 + spread || scale * amax > limit) return;
      for (int64_t k = 0; k < g.h; ++k) x.store(r * g.h + k, scale * xr[static_cast<size_t>(k)]);
      t.store(r, static_cast<double>(lead));
    });
  }
  /// Reference and enclosure through dense products (flce_fast.hpp), not term by term.
  void evaluate(const Case& c, const TensorSet& ts, const Contract& k, RefResult& ref,
                std::vector<OutputEnclosure>& out) const override {
    size_ref(outputs(c), ref);
    size_enclosures(outputs(c), out);
    flce_fast_evaluate(c, OpInputs::read(tensors(c), ts), k, bwd_, ref, out);
  }
  /// The dense pass, not PolicyOp's term by term one (their bits differ): every output, the
  /// others dropped.
  void evaluate_only(const Case& c, const TensorSet& ts, const Contract& k, const std::set<std::string>& want,
                     RefResult& ref, std::vector<OutputEnclosure>& out) const override {
    OpBinding::evaluate_only(c, ts, k, want, ref, out);
  }
  int64_t rows(const Case& c) const { return c.shape[0]; }
  int64_t row_of(const Case& c, int o, int64_t i) const {
    if (!bwd_) return c.attr("reduction") == "none" ? i : -1;
    return o == 0 ? i / c.shape[1] : -1;
  }
  /// As cross_entropy: the loss per row under none only; dx (output 0 of the backward) per
  /// row under none and sum, not under mean (divided by the batch's count of rows not
  /// ignored); dweight and dbias sum over rows.
  bool output_row_local(const Case& c, int o) const {
    const std::string& red = c.attr("reduction");
    return bwd_ ? o == 0 && red != "mean" : red == "none";
  }
  std::vector<AxisLen> axes(const Case& c) const {
    return {{"h", c.shape[1], false, 1, 2}, {"row", c.shape[2], false, 2, 3}, {"v", c.shape[2], false, 2, 3},
            {"rows", c.shape[0], true, 0, 1}};
  }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    using T = typename P::T;
    const FlceGeom g = geom(c);
    const CeParams q = ce_params(c, g.v);
    const auto &x = in["x"], &w = in["weight"], &target = in["target"];
    const double* b = g.bias ? in["bias"].data() : nullptr;
    auto logits = [&](int64_t r) {
      std::vector<T> l(static_cast<size_t>(g.v));
      const int64_t xr = KV_MUTANT_P(p, fl_x_row_shift) ? (r + 1) % g.bt : r;  // the row whose x is read
      flce_logits_row(p, g, x.data() + xr * g.h, w.data(), b, l.data());
      return l;
    };
    if (!bwd_) {
      ce_emit_loss(p, q, g.bt, target, nullptr, sink, rs, parallel, [&](int64_t r) {
        auto l = logits(r);
        return ce_row_loss(p, q, l.data(), nullptr, static_cast<int64_t>(target[r]));
      });
      return;
    }
    const T wsum = ce_weight_sum(p, q, target, nullptr), wbar = p.c(1);
    const bool any = numel_nonignored(q, target) > 0;
    const int64_t vh = g.v * g.h;
    column_sums(
        p, g.bt, vh + g.v, 1, rs, parallel, "rows",
        [&](int64_t r, auto* sums) {
          auto l = logits(r);
          std::vector<T> grad(static_cast<size_t>(g.v)), dx(static_cast<size_t>(g.h));
          ce_row_grad(p, q, l.data(), nullptr, static_cast<int64_t>(target[r]), wbar,
                      ce_scale(p, q, in["dloss"], r, wsum, any), grad.data());
          if (!KV_MUTANT_P(p, fl_grad_rounding_ignored)) flce_round_grad(p, g, grad.data());
          flce_dx_row(p, g, grad.data(), w.data(), dx.data());
          const int64_t dr = KV_MUTANT_P(p, fl_dx_row_shift) ? (r + 1) % g.bt : r;  // the row dx is written to
          for (int64_t k = 0; k < g.h; ++k) sink(0, dr * g.h + k, dx[k]);
          if (KV_MUTANT_P(p, fl_dw_skips_ignored) && static_cast<int64_t>(target[r]) == q.ignore_index) return;
          const int64_t xr = KV_MUTANT_P(p, fl_dw_x_row_shift) ? (r + 1) % g.bt : r;  // the row whose x dW takes
          for (int64_t v = 0; v < g.v; ++v) {
            for (int64_t k = 0; k < g.h; ++k) {
              auto t = p.acc(grad[v] * p.c(x[xr * g.h + k]));
              sums[v * g.h + k].add(KV_MUTANT_P(p, fl_dw_prod_bf16) ? p.mand(t, DType::bf16) : t);
            }
            if (!KV_MUTANT_P(p, fl_db_tail) || v + 1 < g.v) sums[vh + v].add(grad[v]);
          }
        },
        [&](int, int64_t j, const T& val) {
          if (j < vh) sink(1, KV_MUTANT_P(p, fl_dw_out_transposed) ? (j % g.h) * g.v + j / g.h : j, val);
          else if (g.bias) sink(2, j - vh, val);
        });
  }

 private:
  bool bwd_;
};

}  // namespace

FlceGeom flce_geom(const Case& c) {
  FlceGeom g{c.shape[0], c.shape[1], c.shape[2], c.attr("bias") == "true", c.attr("grad_rounding") == "x_dtype",
             c.dtypes.at("x"), c.dtypes.at("x")};
  if (auto d = c.site("flce.grad")) g.round_grad = true, g.grad_dtype = *d;  // the attribute's successor
  g.logits = c.site("flce.logits");
  return g;
}

void register_flce_ops(Registry& r) {
  add_op_with_host_impl<FlceOp>(r);
}

}  // namespace kv
