// rope_table binding: positions (S, i32) and inv_freq (D/2, fp32) -> cos, sin (S, D), the
// halves equal (rotate_half: cat(freqs, freqs)) or pairs equal (interleaved).
#include "ops/rope_table.hpp"

#include <cmath>

#include "ops/host/host_impl.hpp"
#include "reference/rope.hpp"
#include "reference/rope_table.hpp"

namespace kv {

namespace {

class RopeTableOp : public PolicyOp<RopeTableOp> {
 public:
  explicit RopeTableOp(bool) {}
  std::string name() const override { return "rope_table.fwd"; }
  std::vector<int64_t> example_shape() const override { return {16, 128}; }
  std::vector<AttrSpec> attrs() const override {
    return {{"layout", false, "rotate_half", {"rotate_half", "interleaved"}},
            {"base", true, hex_float(10000.0), {}},
            {"pos_offset", false, "0", {}, true}};
  }
  void check(Case& c) const {
    if (c.shape.size() != 2 || c.shape[1] < 2 || c.shape[1] % 2)
      throw UsageError("rope_table needs a shape S x D with an even D >= 2");
    if (!(c.attr_real("base") > 1)) throw UsageError("rope_table base must be > 1");
    const int64_t off = std::stoll(c.attr("pos_offset"));
    if (off < 0 || off + c.shape[0] > (int64_t(1) << 24))
      throw UsageError("positions must lie in [0, 2^24] (exact in fp32)");
  }
  std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const {
    return {{"positions", 'i'}, {"inv_freq", 'f'}, {"cos", 'x'}, {"sin", 'x'}};
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    auto t = [&](const char* n, std::vector<int64_t> s, Role r) { return TensorSpec{n, s, c.dtypes.at(n), r}; };
    return {t("positions", {c.shape[0]}, Role::input), t("inv_freq", {c.shape[1] / 2}, Role::input),
            t("cos", c.shape, Role::output), t("sin", c.shape, Role::output)};
  }
  void generate(const Case& c, TensorSet& ts) const override {
    auto pos = ts.view("positions"), inv = ts.view("inv_freq");
    const int64_t off = std::stoll(c.attr("pos_offset")), half = c.shape[1] / 2;
    for (int64_t s = 0; s < c.shape[0]; ++s) pos.store(s, static_cast<double>(s + off));
    // HF's buffer: base^(-2i/D), rounded to fp32 (the table op takes it as given).
    for (int64_t i = 0; i < half; ++i)
      inv.store(i, std::pow(c.attr_real("base"), -static_cast<double>(i) / static_cast<double>(half)));
  }
  int64_t rows(const Case& c) const { return c.shape[0]; }
  int64_t row_of(const Case& c, int, int64_t i) const { return i / c.shape[1]; }
  bool output_row_local(const Case&, int) const { return true; }  // a row is its position's angles
  std::map<std::string, int> slice_dims(const Case&) const override { return dim0_slices({"positions", "cos", "sin"}); }
  std::vector<AxisLen> axes(const Case&) const { return {}; }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    const int64_t d = c.shape[1];
    const bool il = c.attr("layout") == "interleaved" && !KV_MUTANT_P(p, rt_layout_ignored);
    const auto &pos = in["positions"], &inv = in["inv_freq"];
    const double pos_shift = KV_MUTANT_P(p, rt_pos_offset_twice) ? c.attr_real("pos_offset")
                             : KV_MUTANT_P(p, rt_pos_off_by_one) ? 1.0 : 0.0;
    par_rows(c.shape[0] - KV_MUTANT_P(p, rt_last_row), parallel, [&](int64_t s) {
      if (!rs.has(s)) return;
      for (int64_t j = 0; j < d - KV_MUTANT_P(p, rt_last_col); ++j) {
        const int64_t pair = KV_MUTANT_P(p, rt_pair_reversed) ? d / 2 - 1 - rope_pair(j, d, il) : rope_pair(j, d, il);
        auto a = rope_table_angle(p, (KV_MUTANT_P(p, rt_pos_index) ? s : pos[s]) + pos_shift, inv[pair]);
        auto cs = p.cos(a), sn = p.sin(a);
        if (KV_MUTANT_P(p, rt_cos_sin_swapped)) std::swap(cs, sn);
        sink(0, s * d + j, cs);
        if (KV_MUTANT_P(p, rt_sin_negated)) sn = -sn;
        sink(1, s * d + j, sn);
      }
    });
  }
};

}  // namespace

void register_rope_table_ops(Registry& r) {
  add_op_with_host_impl<RopeTableOp>(r, {false});  // no backward
}

}  // namespace kv
