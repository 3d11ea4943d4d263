// softmax bindings: row softmax over the last dimension, fwd (x -> y) and bwd (dy, y -> dx).
#include "ops/softmax.hpp"

#include "ops/host/host_impl.hpp"
#include "ops/row_op.hpp"
#include "reference/softmax.hpp"

namespace kv {

namespace {

class SoftmaxOp : public PolicyOp<SoftmaxOp> {
 public:
  explicit SoftmaxOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "softmax.bwd" : "softmax.fwd"; }
  std::vector<AttrSpec> attrs() const override { return {}; }
  void check(Case& c) const {
    if (c.shape.back() == 0) throw UsageError("softmax needs a positive row length (the last dimension)");
  }
  std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const {
    if (bwd_) return {{"dy", 'x'}, {"y", 'x'}, {"dx", 'x'}};
    return {{"x", 'x'}, {"y", 'x'}};
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    auto t = [&](const char* n, Role r) { return TensorSpec{n, c.shape, c.dtypes.at(n), r}; };
    if (bwd_) return {t("dy", Role::input), t("y", Role::input), t("dx", Role::output)};
    return {t("x", Role::input), t("y", Role::output)};
  }
  void generate(const Case& c, TensorSet& ts) const override {
    if (!bwd_) {
      auto x = ts.view("x");
      fill_tensor(x, c.dist, c.seed, 0.0, 2.0);
      return;
    }
    auto dy = ts.view("dy");
    fill_tensor(dy, "normal", c.seed, 0.0, 1.0);
    // y as a forward pass saves it: the softmax of generated logits, rounded to y's dtype.
    const int64_t n = last_dim(c);
    auto y = ts.view("y");
    const DType yd = c.dtypes.at("y");
    const ValueDrawer xd(c.dist, yd, c.seed, "x", 0.0, 2.0);
    par_rows(row_count(c), true, [&](int64_t r) {
      std::vector<double> x(static_cast<size_t>(n)), v(static_cast<size_t>(n));
      std::vector<int64_t> coords, scratch;
      for (int64_t j = 0; j < n; ++j) {
        unravel(r * n + j, c.shape, coords);
        x[j] = round_to(yd, xd.value(coords, scratch));
      }
      softmax_fwd_row(ValuePolicy<double>{}, n, x.data(), v.data());
      for (int64_t j = 0; j < n; ++j) y.store(r * n + j, v[j]);
    });
  }
  int64_t rows(const Case& c) const { return row_count(c); }
  int64_t row_of(const Case& c, int, int64_t i) const { return i / last_dim(c); }
  bool output_row_local(const Case&, int) const { return true; }  // one row in, one row out
  std::map<std::string, int> slice_dims(const Case& c) const override {
    if (c.shape.size() < 2) return {};
    return bwd_ ? dim0_slices({"dy", "y", "dx"}) : dim0_slices({"x", "y"});
  }
  std::vector<AxisLen> axes(const Case& c) const { return {{"row", last_dim(c)}}; }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    const int64_t n = last_dim(c);
    if (numel(c.shape) == 0) return;
    par_rows(rows(c) - KV_MUTANT_P(p, sm_last_row), parallel, [&](int64_t r) {
      if (!rs.has(r)) return;
      std::vector<typename P::T> out(static_cast<size_t>(n));
      const int64_t at = KV_MUTANT_P(p, sm_row_stride) ? r * (n - 1) : r * n;  // where row r's inputs start
      if (bwd_)
        softmax_bwd_row(p, n, in["dy"].data() + at, in["y"].data() + at, out.data(), c.site("softmax.bwd_dy_y"),
                        c.form("softmax.bwd_dx") == "distributed");
      else softmax_fwd_row(p, n, in["x"].data() + at, out.data());
      for (int64_t j = 0; j < n; ++j) sink(0, r * n + j, out[j]);
    });
  }

 private:
  bool bwd_;
};

}  // namespace

void register_softmax_ops(Registry& r) {
  add_op_with_host_impl<SoftmaxOp>(r);
}

}  // namespace kv
