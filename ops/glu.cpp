// swiglu and geglu bindings (fwd and bwd): elementwise over tensors of shape (..., N),
// each a row of N for refinement and batch invariance.
#include "ops/glu.hpp"

#include "ops/host/host_impl.hpp"
#include "reference/geglu.hpp"
#include "reference/swiglu.hpp"

namespace kv {

namespace {

template <bool Geglu>
class GluOp : public PolicyOp<GluOp<Geglu>> {
 public:
  explicit GluOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return std::string(Geglu ? "geglu" : "swiglu") + (bwd_ ? ".bwd" : ".fwd"); }
  std::vector<AttrSpec> attrs() const override { return {}; }
  void check(Case& c) const {}
  std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const {
    if (bwd_) return {{"dc", 'x'}, {"a", 'x'}, {"b", 'x'}, {"da", 'x'}, {"db", 'x'}};
    return {{"a", 'x'}, {"b", 'x'}, {"c", 'x'}};
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    auto t = [&](const char* n, Role r) { return TensorSpec{n, c.shape, c.dtypes.at(n), r}; };
    if (bwd_)
      return {t("dc", Role::input), t("a", Role::input), t("b", Role::input), t("da", Role::output),
              t("db", Role::output)};
    return {t("a", Role::input), t("b", Role::input), t("c", Role::output)};
  }
  void generate(const Case& c, TensorSet& ts) const override {
    auto a = ts.view("a"), b = ts.view("b");
    fill_tensor(a, c.dist, c.seed, 0.0, 2.0);
    fill_tensor(b, "normal", c.seed, 0.0, 1.0);
    if (bwd_) {
      auto dc = ts.view("dc");
      fill_tensor(dc, "normal", c.seed, 0.0, 1.0);
    }
  }
  int64_t cols(const Case& c) const { return c.shape.back() > 0 ? c.shape.back() : 1; }
  int64_t rows(const Case& c) const { return numel(c.shape) / cols(c); }
  int64_t row_of(const Case& c, int, int64_t i) const { return i / cols(c); }
  bool output_row_local(const Case&, int) const { return true; }  // elementwise
  std::map<std::string, int> slice_dims(const Case& c) const override {
    if (c.shape.size() < 2) return {};
    return bwd_ ? dim0_slices({"dc", "a", "b", "da", "db"}) : dim0_slices({"a", "b", "c"});
  }
  std::vector<AxisLen> axes(const Case&) const { return {}; }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    const auto &a = in["a"], &b = in["b"];
    const int64_t n = cols(c);
    const std::optional<DType> act = c.site("glu.act"), dcb = c.site("glu.dc_b");
    par_rows(rows(c), parallel, [&](int64_t r) {
      if (!rs.has(r)) return;
      for (int64_t i = r * n; i < (r + 1) * n - KV_MUTANT_P(p, glu_row_tail); ++i) {
        if (!bwd_) {
          sink(0, i, Geglu ? geglu_fwd(p, a[i], b[i], act) : swiglu_fwd(p, a[i], b[i], act));
          continue;
        }
        typename P::T da, db;
        if (Geglu) geglu_bwd(p, in["dc"][i], a[i], b[i], da, db, act, dcb);
        else swiglu_bwd(p, in["dc"][i], a[i], b[i], da, db, act, dcb);
        sink(0, i, da);
        sink(1, i, db);
      }
    });
  }

 private:
  bool bwd_;
};

}  // namespace

void register_glu_ops(Registry& r) {
  add_op_with_host_impl<GluOp<false>>(r);
  add_op_with_host_impl<GluOp<true>>(r);
}

}  // namespace kv
