// layer_norm bindings. fwd: x, w, b -> y, mean, rstd (mean and rstd in the stat dtype:
// fp32 as PyTorch keeps them, or x's dtype as Liger stores them). bwd: dy, x, w, mean,
// rstd -> dx, dw, db.
#include "ops/layer_norm.hpp"

#include "ops/host/host_impl.hpp"
#include "ops/row_op.hpp"
#include "reference/layer_norm.hpp"

namespace kv {

namespace {

class LayerNormOp : public PolicyOp<LayerNormOp> {
 public:
  explicit LayerNormOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "layer_norm.bwd" : "layer_norm.fwd"; }
  std::vector<AttrSpec> attrs() const override {
    return {{"eps", true, hex_float(1e-5), {}}, {"stat_dtype", false, "fp32", {"fp32", "x_dtype"}}};
  }
  void check(Case& c) const {
    if (c.shape.back() == 0) throw UsageError("layer_norm needs a positive hidden size N (the last dimension)");
    // eps = 0 would put 0 * inf (IEEE's NaN) in a row of equal values; the references model
    // no infinite intermediates, so kverify refuses such cases rather than guess.
    if (!(c.attr_real("eps") > 0))
      throw UsageError("attribute eps must be > 0 (with eps = 0 a row of equal values divides by zero)");
    DType stat = c.attr("stat_dtype") == "fp32" ? DType::f32 : c.dtypes.at("x");
    for (const char* s : {"mean", "rstd"}) c.dtypes[s] = stat;
  }
  std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const {
    if (bwd_)
      return {{"dy", 'x'}, {"x", 'x'}, {"w", 'x'}, {"mean", 'f'}, {"rstd", 'f'}, {"dx", 'x'}, {"dw", 'x'}, {"db", 'x'}};
    return {{"x", 'x'}, {"w", 'x'}, {"b", 'x'}, {"y", 'x'}, {"mean", 'f'}, {"rstd", 'f'}};
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    std::vector<int64_t> wshape = {c.shape.back()}, rshape = rows_shape(c);
    auto t = [&](const char* n, const std::vector<int64_t>& s, Role r) { return TensorSpec{n, s, c.dtypes.at(n), r}; };
    if (bwd_)
      return {t("dy", c.shape, Role::input),  t("x", c.shape, Role::input),   t("w", wshape, Role::input),
              t("mean", rshape, Role::input), t("rstd", rshape, Role::input), t("dx", c.shape, Role::output),
              t("dw", wshape, Role::output),  t("db", wshape, Role::output)};
    return {t("x", c.shape, Role::input), t("w", wshape, Role::input),     t("b", wshape, Role::input),
            t("y", c.shape, Role::output), t("mean", rshape, Role::output), t("rstd", rshape, Role::output)};
  }
  void generate(const Case& c, TensorSet& ts) const override {
    auto x = ts.view("x"), w = ts.view("w");
    fill_tensor(x, c.dist, c.seed, 0.0, 1.0);
    fill_tensor(w, "normal", c.seed, 1.0, 0.25);
    if (!bwd_) {
      auto b = ts.view("b");
      fill_tensor(b, "normal", c.seed, 0.0, 0.25);
      return;
    }
    auto dy = ts.view("dy");
    fill_tensor(dy, "normal", c.seed, 0.0, 1.0);
    // mean and rstd as the forward pass saves them: the defined values, rounded.
    const int64_t n = last_dim(c);
    auto mean = ts.view("mean"), rstd = ts.view("rstd");
    const std::vector<double> zeros(static_cast<size_t>(n), 0.0);
    par_rows(row_count(c), true, [&](int64_t r) {
      std::vector<double> row(static_cast<size_t>(n)), wv(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) row[j] = x.get(r * n + j), wv[j] = w.get(j);
      std::vector<Enc> y(static_cast<size_t>(n));
      Enc m, rs;
      layer_norm_fwd_row(EncPolicy{}, n, c.attr_real("eps"), row.data(), wv.data(), zeros.data(), y.data(), m, rs);
      mean.store(r, m.m);
      rstd.store(r, rs.m);
    });
  }
  int64_t rows(const Case& c) const { return row_count(c); }
  int64_t row_of(const Case& c, int o, int64_t i) const {
    if (bwd_) return o == 0 ? i / last_dim(c) : -1;
    return o == 0 ? i / last_dim(c) : i;
  }
  /// y, mean, rstd and dx per row (w and b shared); dW and dB sum over rows.
  bool output_row_local(const Case&, int o) const { return !bwd_ || o == 0; }
  std::map<std::string, int> slice_dims(const Case& c) const override {
    if (c.shape.size() < 2) return {};
    return bwd_ ? dim0_slices({"dy", "x", "mean", "rstd", "dx"}) : dim0_slices({"x", "y", "mean", "rstd"});
  }
  std::vector<AxisLen> axes(const Case& c) const {
    if (bwd_) return {{"row", last_dim(c)}, {"rows", row_count(c), true}};
    return {{"row", last_dim(c)}};
  }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    using T = typename P::T;
    const int64_t n = last_dim(c), nrows = numel(c.shape) == 0 ? 0 : rows(c);
    const double eps = c.attr_real("eps");
    const auto &x = in["x"], &w = in["w"];
    if (!bwd_) {
      const auto& b = in["b"];
      par_rows(nrows, parallel, [&](int64_t r) {
        if (!rs.has(r)) return;
        std::vector<T> y(static_cast<size_t>(n));
        T m, rstd;
        layer_norm_fwd_row(p, n, eps, x.data() + r * n, w.data(), b.data(), y.data(), m, rstd);
        for (int64_t j = 0; j < n; ++j) sink(0, r * n + j, y[j]);
        sink(1, r, m);
        sink(2, r, rstd);
      });
      return;
    }
    const auto &dy = in["dy"], &mean = in["mean"], &rstd = in["rstd"];
    column_sums(
        p, nrows, n, 2, rs, parallel, "rows",
        [&](int64_t r, auto* sums) {
          std::vector<T> dx(static_cast<size_t>(n));
          layer_norm_bwd_row(p, n, dy.data() + r * n, x.data() + r * n, w.data(), mean[r], rstd[r], dx.data(), sums,
                             sums + n);
          for (int64_t j = 0; j < n; ++j) sink(0, r * n + j, dx[j]);
        },
        [&](int k, int64_t j, const T& v) { sink(1 + k, j, v); });
  }

 private:
  bool bwd_;
};

}  // namespace

void register_layer_norm_ops(Registry& r) {
  add_op_with_host_impl<LayerNormOp>(r);
}

}  // namespace kv
