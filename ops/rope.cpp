// rope bindings: q (B,S,Hq,D) and k (B,S,Hk,D) rotated by cos/sin tables, fwd and bwd.
// positions=1d: tables cos, sin of shape (1,S,D). positions=mrope (Qwen2-VL): tables
// (3,B,S,D) and mrope_section t/h/w pairs; pair i takes table k of the section it falls in.
// positions=3d (video): per-axis tables cos_f/sin_f (S,c_f), cos_h/sin_h (S,c_h),
// cos_w/sin_w (S,c_w) with c = D/2 split [c - 2(c/3), c/3, c/3], per-sample grids (B,3) and
// sequence lengths (B); the op computes each token's (f,h,w) from its sample's grid, and
// tokens at or past min(seq_len, F*H*W) are padding, passed through unchanged.
#include "ops/rope.hpp"

#include <cmath>

#include "ops/host/host_impl.hpp"
#include "ops/rope_common.hpp"
#include "reference/rope.hpp"

namespace kv {

namespace {

class RopeOp : public PolicyOp<RopeOp> {
 public:
  explicit RopeOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "rope.bwd" : "rope.fwd"; }
  std::vector<int64_t> example_shape() const override { return {1, 16, 12, 128}; }
  std::vector<AttrSpec> attrs() const override {
    return {{"layout", false, "rotate_half", {"rotate_half", "interleaved"}},
            {"positions", false, "1d", {"1d", "3d", "mrope"}},
            {"k_heads", false, "0", {}, true},
            {"mrope_section", false, "auto", {}, false, true},
            {"grid", false, "auto", {}, false, true},
            {"base", true, hex_float(10000.0), {}}};
  }
  void check(Case& c) const {
    RopeGeom g = rope_geom(c);  // validates shape, sections and grid
    (void)g;
  }
  std::vector<std::pair<std::string, char>> dtype_rules(const Case& c) const {
    std::vector<std::pair<std::string, char>> r;
    for (auto& n : io_names()) r.push_back({n, 'x'});
    const bool three = c.attr("positions") == "3d";
    for (auto& n : table_names_all())
      if ((n.size() > 3) == three) r.push_back({n, 'x'});
    if (three) r.insert(r.end(), {{"grid", 'i'}, {"seq_len", 'i'}});
    return r;
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    RopeGeom g = rope_geom(c);
    auto io = io_names();
    auto t = [&](const std::string& n, std::vector<int64_t> s, Role r) { return TensorSpec{n, s, c.dtypes.at(n), r}; };
    std::vector<TensorSpec> v = {t(io[0], g.q_shape(), Role::input), t(io[1], g.k_shape(), Role::input)};
    for (auto& ts : rope_table_specs(c, g)) v.push_back(ts);
    v.push_back(t(io[2], g.q_shape(), Role::output));
    v.push_back(t(io[3], g.k_shape(), Role::output));
    return v;
  }
  void generate(const Case& c, TensorSet& ts) const override {
    auto io = io_names();
    auto q = ts.view(io[0]), k = ts.view(io[1]);
    fill_tensor(q, c.dist, c.seed, 0.0, 1.0);
    fill_tensor(k, c.dist, c.seed, 0.0, 1.0);
    rope_fill_tables(c, rope_geom(c), ts);
  }
  int64_t rows(const Case& c) const { return rope_geom(c).b * rope_geom(c).s; }
  int64_t row_of(const Case& c, int o, int64_t i) const {
    RopeGeom g = rope_geom(c);
    return i / ((o == 0 ? g.hq : g.hk) * g.d);
  }
  /// A sample's tokens are rotated by that sample's positions (its grid) alone.
  bool output_row_local(const Case&, int) const { return true; }
  /// Samples (dim 0, B): q, k and their outputs, mrope's (3, B, S, D) tables along B, the
  /// 3d grids and lengths; 1d and 3d tables are shared.
  std::map<std::string, int> slice_dims(const Case& c) const override {
    auto io = io_names();
    std::map<std::string, int> m = dim0_slices({io[0], io[1], io[2], io[3]});
    const std::string& mode = c.attr("positions");
    if (mode == "mrope") m["cos"] = m["sin"] = 1;
    if (mode == "3d") m["grid"] = m["seq_len"] = 0;
    return m;
  }
  std::vector<AxisLen> axes(const Case&) const { return {}; }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    const RopeGeom g = rope_geom(c);
    auto io = io_names();
    const auto &q = in[io[0]], &k = in[io[1]];
    const TokenTables tt(c, g, in);
    par_rows(g.b * g.s, parallel, [&](int64_t tok) {
      if (!rs.has(tok)) return;
      std::vector<double> cs(static_cast<size_t>(g.d)), sn(static_cast<size_t>(g.d));
      std::vector<typename P::T> y(static_cast<size_t>(g.d));
      const int64_t at = KV_MUTANT_P(p, rope_token_shift) ? std::min(tok + 1, g.b * g.s - 1) : tok;
      const bool real = tt.fill(at, cs.data(), sn.data()) || KV_MUTANT_P(p, rope_padding_rotated);
      for (int which = 0; which < 2; ++which) {
        const int64_t h = which == 0 ? g.hq : g.hk;
        const auto& x = which == 0 ? q : k;
        for (int64_t head = 0; head < h - KV_MUTANT_P(p, rope_last_head); ++head) {
          const int64_t base = (tok * h + head) * g.d;
          if (!real || (which == 1 && KV_MUTANT_P(p, rope_k_unrotated))) {
            for (int64_t j = 0; j < g.d; ++j) sink(which, base + j, p.c(KV_MUTANT_P(p, rope_padding_zero) ? 0.0 : x[base + j]));
            continue;
          }
          rope_head(p, g.d, g.interleaved, bwd_, x.data() + base, cs.data(), sn.data(), y.data());
          for (int64_t j = 0; j < g.d; ++j) sink(which, base + j, y[j]);
        }
      }
    });
  }

  /// One pass over contiguous q and k read straight from storage: rope_head over
  /// DualPolicy with the products taken as exact (significands of at most 24 bits, so
  /// products of at most 48; a non-finite product goes through the enclosure product),
  /// the same operations on the same values, so the same bits as the generic pass.
  void evaluate(const Case& c, const TensorSet& ts, const Contract& k, RefResult& ref,
                std::vector<OutputEnclosure>& out) const override {
    auto io = io_names();
    const TensorView xv[2] = {ts.view(io[0]), ts.view(io[1])};
    if (!xv[0].desc.strides.empty() || !xv[1].desc.strides.empty())
      return PolicyOp<RopeOp>::evaluate(c, ts, k, ref, out);
    const RopeGeom g = rope_geom(c);
    std::vector<TensorSpec> tables;
    for (auto& t : tensors(c))
      if (t.role == Role::input && t.name != io[0] && t.name != io[1]) tables.push_back(t);
    const OpInputs in = OpInputs::read(tables, ts);
    const TokenTables tt(c, g, in);
    size_ref(outputs(c), ref);
    size_enclosures(outputs(c), out);
    const EncPolicy kp{&k};
    par_rows(g.b * g.s, true, [&](int64_t tok) {
      std::vector<double> cs(static_cast<size_t>(g.d)), sn(static_cast<size_t>(g.d)), x(static_cast<size_t>(g.d));
      const bool real = tt.fill(tok, cs.data(), sn.data());
      for (int which = 0; which < 2; ++which) {
        const int64_t h = which == 0 ? g.hq : g.hk;
        OutputRef& ro = ref.outputs[which];
        OutputEnclosure& eo = out[which];
        for (int64_t head = 0; head < h; ++head) {
          const int64_t base = (tok * h + head) * g.d;
          xv[which].read(base, g.d, x.data());
          for (int64_t j = 0; j < g.d; ++j) {
            Enc yr = enc_exact(x[j]), yc = yr;
            if (real) {
              const int64_t q = rope_partner(j, g.d, g.interleaved);
              const double sv = bwd_ ? sn[q] : sn[j];
              const double a = x[j] * cs[j], b = x[q] * sv;
              const Enc A = std::isfinite(a) ? enc_exact(a) : enc_exact(x[j]) * enc_exact(cs[j]);
              const Enc B = std::isfinite(b) ? enc_exact(b) : enc_exact(x[q]) * enc_exact(sv);
              const bool minus = rope_first(j, g.d, g.interleaved) != bwd_;
              yr = minus ? A - B : A + B;
              const Enc Ac = kp.acc(A), Bc = kp.acc(B);
              yc = kp.acc(minus ? Ac - Bc : Ac + Bc);
            }
            put_ref(ro, base + j, yr);
            put_enc(eo, base + j, yc);
          }
        }
      }
    });
  }

 private:
  bool bwd_;
  std::vector<std::string> io_names() const {
    if (bwd_) return {"dq_out", "dk_out", "dq", "dk"};
    return {"q", "k", "q_out", "k_out"};
  }
};

}  // namespace

void register_rope_ops(Registry& r) {
  add_op_with_host_impl<RopeOp>(r);
}

}  // namespace kv
