// cross_entropy bindings over given logits (BT x V, flattened leading dimensions).
// fwd: logits, target (i32), [weight] -> loss ((BT) under reduction none, else (1)).
// bwd: logits, target, [weight], dloss -> dlogits.
#include "ops/cross_entropy.hpp"

#include "ops/host/host_impl.hpp"
#include "ops/ce_common.hpp"
#include "ops/row_op.hpp"

namespace kv {

namespace {

class CrossEntropyOp : public PolicyOp<CrossEntropyOp> {
 public:
  explicit CrossEntropyOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "cross_entropy.bwd" : "cross_entropy.fwd"; }
  std::vector<AttrSpec> attrs() const override { return ce_attrs(true); }
  void check(Case& c) const {
    if (c.shape.back() == 0) throw UsageError("cross_entropy needs a positive vocabulary V (the last dimension)");
    ce_check(c);
  }
  std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const {
    std::vector<std::pair<std::string, char>> r = {{"logits", 'x'}, {"target", 'i'}, {"weight", 'f'}};
    if (bwd_) r.insert(r.end(), {{"dloss", 'f'}, {"dlogits", 'x'}});
    else r.push_back({"loss", 'f'});
    return r;
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    std::vector<int64_t> lshape = c.attr("reduction") == "none" ? rows_shape(c) : std::vector<int64_t>{1};
    auto t = [&](const char* n, const std::vector<int64_t>& s, Role r) { return TensorSpec{n, s, c.dtypes.at(n), r}; };
    std::vector<TensorSpec> v = {t("logits", c.shape, Role::input), t("target", rows_shape(c), Role::input)};
    if (c.attr("weights") == "class") v.push_back(t("weight", {c.shape.back()}, Role::input));
    if (bwd_) {
      v.push_back(t("dloss", lshape, Role::input));
      v.push_back(t("dlogits", c.shape, Role::output));
    } else {
      v.push_back(t("loss", lshape, Role::output));
    }
    return v;
  }
  /// Besides the shared distributions, `confident`: normal logits with each row's target
  /// logit set to 32, so p_y -> 1 (the loss about V e^2 e^-32, far below an fp32 ulp of
  /// the log-sum-exp: the cancellation a kernel meets at V = 128256).
  std::vector<std::string> dists() const override {
    auto d = known_dists();
    d.push_back("confident");
    return d;
  }
  void generate(const Case& c, TensorSet& ts) const override {
    auto x = ts.view("logits");
    const bool confident = c.dist == "confident";
    fill_tensor(x, confident ? "normal" : c.dist, c.seed, 0.0, 2.0);
    ce_fill_targets(c, ts.view("target"), last_dim(c));
    if (confident) {
      const auto t = ts.view("target");
      const int64_t v = last_dim(c), nrows = numel(c.shape) == 0 ? 0 : row_count(c);
      for (int64_t r = 0; r < nrows; ++r) {
        double tr = 0;
        t.read(r, 1, &tr);
        const auto ti = static_cast<int64_t>(tr);
        if (ti >= 0 && ti < v) x.store(r * v + ti, 32.0);
      }
    }
    if (c.attr("weights") == "class") {
      auto w = ts.view("weight");
      fill_tensor(w, "uniform", c.seed, 1.0, 0.5);
    }
    if (bwd_) {
      auto d = ts.view("dloss");
      fill_tensor(d, "normal", c.seed, 0.0, 1.0);
    }
  }
  int64_t rows(const Case& c) const { return row_count(c); }
  int64_t row_of(const Case& c, int, int64_t i) const {
    if (bwd_) return i / last_dim(c);
    return c.attr("reduction") == "none" ? i : -1;
  }
  /// The loss per row under reduction none only (mean and sum reduce over the batch); the
  /// gradient's rows are per row under none and sum (dloss is per row, or one scalar every
  /// row shares) but not under mean, which divides by the batch's count of rows not ignored.
  bool output_row_local(const Case& c, int) const {
    return c.attr("reduction") == "none" || (bwd_ && c.attr("reduction") == "sum");
  }
  /// Where the outputs are row-local: the rows of logits and target, and of dloss under none.
  std::map<std::string, int> slice_dims(const Case& c) const override {
    if (c.shape.size() < 2 || !output_row_local(c, 0)) return {};
    const bool none = c.attr("reduction") == "none";
    if (!bwd_) return dim0_slices({"logits", "target", "loss"});
    return none ? dim0_slices({"logits", "target", "dloss", "dlogits"}) : dim0_slices({"logits", "target", "dlogits"});
  }
  std::vector<AxisLen> axes(const Case& c) const { return {{"row", last_dim(c)}, {"rows", row_count(c), true}}; }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    using T = typename P::T;
    const int64_t v = last_dim(c), nrows = numel(c.shape) == 0 ? 0 : rows(c);
    const CeParams q = ce_params(c, v);
    const auto &x = in["logits"], &target = in["target"];
    const double* w = q.weighted ? in["weight"].data() : nullptr;
    if (!bwd_) {
      ce_emit_loss(p, q, nrows, target, w, sink, rs, parallel,
                   [&](int64_t r) { return ce_row_loss(p, q, x.data() + r * v, w, static_cast<int64_t>(target[r])); });
      return;
    }
    const T wsum = ce_weight_sum(p, q, target, w), wbar = ce_wbar(p, q, w);
    const bool any = numel_nonignored(q, target) > 0;
    par_rows(nrows, parallel, [&](int64_t r) {
      if (!rs.has(r)) return;
      std::vector<T> g(static_cast<size_t>(v));
      ce_row_grad(p, q, x.data() + r * v, w, static_cast<int64_t>(target[r]), wbar,
                  ce_scale(p, q, in["dloss"], r, wsum, any), g.data());
      for (int64_t j = 0; j < v; ++j) sink(0, r * v + j, g[j]);
    });
  }

 private:
  bool bwd_;
};

}  // namespace

void register_cross_entropy_ops(Registry& r) {
  add_op_with_host_impl<CrossEntropyOp>(r);
}

}  // namespace kv
