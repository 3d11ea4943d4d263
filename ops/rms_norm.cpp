// The rms_norm binding: tensors, attributes, generator and reference of rms_norm.fwd
// and rms_norm.bwd, tying reference/rms_norm.hpp to the registry.
#include "ops/rms_norm.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <set>

#include "core/error.hpp"
#include "core/inputs.hpp"
#include "ops/op_base.hpp"
#include "reference/policy.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rms_norm_fast.hpp"

namespace kv {

namespace {

RmsMode parse_mode(const std::string& m) {
  if (m == "llama") return RmsMode::llama;
  if (m == "gemma") return RmsMode::gemma;
  if (m == "none") return RmsMode::none;
  throw UsageError("unknown rms_norm mode '" + m + "' (llama, gemma, none)");
}

class RmsNormBinding : public OpBinding {
 public:
  explicit RmsNormBinding(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "rms_norm.bwd" : "rms_norm.fwd"; }

  std::vector<AttrSpec> attrs() const override {
    std::vector<AttrSpec> a = {{"mode", false, "llama", {"llama", "gemma", "none"}},
                               {"eps", true, hex_float(1e-6), {}},
                               {"offset", true, hex_float(0.0), {}}};
    if (bwd_) a.push_back({"m_rounding", false, "fp32", {"fp32", "x_dtype"}});
    return a;
  }
  std::vector<std::string> dists() const override { return known_dists(); }

  void normalize(Case& c) const override {
    check_shape_nonneg(c);
    if (c.shape.back() == 0) throw UsageError("rms_norm needs a positive hidden size N (the last dimension)");
    normalize_attrs(name(), attrs(), c);
    if (c.attr_real("offset") < 0) throw UsageError("attribute offset must be finite and >= 0");
    // eps = 0 would put 0 * inf (IEEE's NaN) in an all-zero row; see layer_norm.
    if (!(c.attr_real("eps") > 0))
      throw UsageError("attribute eps must be > 0 (with eps = 0 an all-zero row divides by zero)");
    check_dist(c, known_dists());
    RmsMode mode = parse_mode(c.attrs["mode"]);
    std::vector<std::string> names = bwd_ ? std::vector<std::string>{"dy", "x", "w", "rstd", "dx", "dw"}
                                          : std::vector<std::string>{"x", "w", "y", "rstd"};
    for (auto& [k, v] : c.dtypes)
      if (std::find(names.begin(), names.end(), k) == names.end())
        throw UsageError("rms_norm has no tensor '" + k + "'");
    if (!c.dtypes.count("x")) c.dtypes["x"] = DType::f32;
    DType x = c.dtypes["x"];
    if (!c.dtypes.count("w")) c.dtypes["w"] = x;
    DType stat = mode == RmsMode::none ? x : DType::f32;
    if (c.dtypes.count("rstd") && c.dtypes["rstd"] != stat)
      throw UsageError("rstd is " + std::string(dtype_name(stat)) + " in mode " + c.attrs["mode"]);
    c.dtypes["rstd"] = stat;
    if (bwd_) {
      if (!c.dtypes.count("dy")) c.dtypes["dy"] = x;
      if (!c.dtypes.count("dx")) c.dtypes["dx"] = x;
      if (!c.dtypes.count("dw")) c.dtypes["dw"] = c.dtypes["w"];
    } else if (!c.dtypes.count("y")) {
      c.dtypes["y"] = x;
    }
    check_layouts(c, tensors(c));
  }

  /// Each row's y, rstd and dx come from that row of x (and dy) with w; dW sums over rows.
  bool row_local(const Case&, const std::string& out) const override { return out != "dw"; }
  std::map<std::string, int> slice_dims(const Case& c) const override {
    if (c.shape.size() < 2) return {};
    return bwd_ ? dim0_slices({"dy", "x", "rstd", "dx"}) : dim0_slices({"x", "y", "rstd"});
  }

  std::vector<TensorSpec> tensors(const Case& c) const override {
    std::vector<int64_t> rows_shape = c.shape;  // every dimension but the last
    rows_shape.pop_back();
    if (rows_shape.empty()) rows_shape = {1};
    std::vector<int64_t> wshape = {c.shape.back()};
    auto dt = [&](const char* n) { return c.dtypes.at(n); };
    if (bwd_)
      return {{"dy", c.shape, dt("dy"), Role::input},   {"x", c.shape, dt("x"), Role::input},
              {"w", wshape, dt("w"), Role::input},      {"rstd", rows_shape, dt("rstd"), Role::input},
              {"dx", c.shape, dt("dx"), Role::output},  {"dw", wshape, dt("dw"), Role::output}};
    return {{"x", c.shape, dt("x"), Role::input},
            {"w", wshape, dt("w"), Role::input},
            {"y", c.shape, dt("y"), Role::output},
            {"rstd", rows_shape, dt("rstd"), Role::output}};
  }

  void generate(const Case& c, TensorSet& ts) const override {
    double offset = c.attr_real("offset");
    auto x = ts.view("x");
    fill_tensor(x, c.dist, c.seed, 0.0, 1.0);
    // Weights near 1 after the offset is added, as trained RMSNorm weights are.
    auto w = ts.view("w");
    fill_tensor(w, "normal", c.seed, 1.0 - offset, 0.25);
    if (!bwd_) return;
    auto dy = ts.view("dy");
    fill_tensor(dy, "normal", c.seed, 0.0, 1.0);
    // rstd as the forward pass saves it: the defined rstd rounded to its dtype.
    RmsParams q = params(c);
    auto rs = ts.view("rstd");
    EncPolicy p;
    tbb::parallel_for(int64_t(0), q.rows, [&](int64_t r) {
      std::vector<double> row(static_cast<size_t>(q.n));
      for (int64_t j = 0; j < q.n; ++j) row[j] = x.get(r * q.n + j);
      rs.store(r, rms_rstd_row(p, q, row.data()).m);
    });
  }

  RefResult reference(const Case& c, const TensorSet& ts) const override {
    // No contract: an enclosure of the exact defined value; its radius bounds the error.
    RefResult res = make_ref(outputs(c));
    Sink sink{[&](int o, int64_t i, const Enc& e) { put_ref(res.outputs[o], i, e); }};
    run(c, ts, EncPolicy{}, sink, true);
    return res;
  }

  void evaluate(const Case& c, const TensorSet& ts, const Contract& k, RefResult& ref,
                std::vector<OutputEnclosure>& out) const override {
    size_ref(outputs(c), ref);
    size_enclosures(outputs(c), out);
    const RmsParams q = params(c);
    if (rms_fast_applies(q)) {
      // The generic DualPolicy pass's results, bit for bit (reference/rms_norm_fast.hpp).
      auto bufs = [&](int o) {
        return RmsOut{ref.outputs[o].v.data(), ref.outputs[o].err.data(), out[o].lo.data(), out[o].hi.data(),
                      out[o].unverifiable.data(), out[o].may_nan.data()};
      };
      const RmsSource d = source(ts, bwd_);
      if (bwd_) rms_bwd_fast(k, q, d, bufs(0), bufs(1));
      else rms_fwd_fast(k, q, d, bufs(0), bufs(1));
      return;
    }
    Sink sink{[&](int o, int64_t i, const Dual& e) {
      put_ref(ref.outputs[o], i, e.ref);
      put_enc(out[o], i, e.con);
    }};
    run(c, ts, DualPolicy{&k}, sink, true);
  }

  /// dW alone (the streamed runner's whole pass): the backward pass without dx's buffers.
  void evaluate_only(const Case& c, const TensorSet& ts, const Contract& k, const std::set<std::string>& want,
                     RefResult& ref, std::vector<OutputEnclosure>& out) const override {
    if (!bwd_ || want.count("dx")) return OpBinding::evaluate_only(c, ts, k, want, ref, out);
    const std::vector<char> keep = wanted(outputs(c), want);
    size_ref(outputs(c), ref, keep);
    size_enclosures(outputs(c), out, keep);
    if (!keep[1]) return;
    const RmsParams q = params(c);
    if (rms_fast_applies(q)) {
      const RmsOut none{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
      rms_bwd_fast(k, q, source(ts, true), none,
                   RmsOut{ref.outputs[1].v.data(), ref.outputs[1].err.data(), out[1].lo.data(), out[1].hi.data(),
                          out[1].unverifiable.data(), out[1].may_nan.data()});
      return;
    }
    Sink sink{[&](int o, int64_t i, const Dual& e) {
      if (o != 1) return;
      put_ref(ref.outputs[o], i, e.ref);
      put_enc(out[o], i, e.con);
    }};
    run(c, ts, DualPolicy{&k}, sink, true);
  }

  void refine(const Case& c, const TensorSet& ts, RefResult& ref,
              const std::map<std::string, std::vector<int64_t>>& misses) const override {
    // Rows whose elements missed the target are recomputed at two MPFR precisions; the
    // result is "agreed" where they agree. dW depends on every row, so a dW miss
    // recomputes the whole backward pass (bounded: small tensors only).
    RmsParams q = params(c);
    RmsSource d = source(ts, bwd_);
    std::set<int64_t> rows;
    bool all = false;
    for (auto& [name_, idx] : misses) {
      if (name_ == "dw" && !idx.empty()) all = true;
      for (int64_t i : idx) rows.insert(name_ == "rstd" ? i : i / q.n);
    }
    if (all) {
      if (q.rows * q.n > kRefineAllMaxElements) return;
      rows.clear();
      for (int64_t r = 0; r < q.rows; ++r) rows.insert(r);
    }
    if (rows.empty()) return;
    const unsigned p1 = 128, p2 = 256;
    auto run_rows = [&](unsigned prec) {
      set_mpfr_bits(prec);
      ValuePolicy<mpfr_float> p;
      std::map<std::string, std::vector<mpfr_float>> o;
      const auto wp = rms_wprime(p, q, d.w.data());
      std::vector<double> x(static_cast<size_t>(q.n)), dy(static_cast<size_t>(q.n));
      if (!bwd_) {
        o["y"].resize(static_cast<size_t>(q.rows * q.n));
        o["rstd"].resize(static_cast<size_t>(q.rows));
        for (int64_t r : rows) {
          d.x_row(r, x.data());
          rms_fwd_row(p, q, x.data(), wp.data(), o["y"].data() + r * q.n, o["rstd"][r]);
        }
      } else {
        o["dx"].resize(static_cast<size_t>(q.rows * q.n));
        std::vector<ValuePolicy<mpfr_float>::Sum> dw(static_cast<size_t>(q.n));
        for (int64_t r : rows) {
          d.x_row(r, x.data());
          d.dy_row(r, dy.data());
          rms_bwd_row(p, q, dy.data(), x.data(), wp.data(), d.rstd[r], o["dx"].data() + r * q.n, dw.data());
        }
        if (all)
          for (auto& s : dw) o["dw"].push_back(s.s);
      }
      return o;
    };
    auto lo = run_rows(p1), hi = run_rows(p2);
    auto update = [&](const std::string& name_, int64_t i) {
      OutputRef& o = ref.at(name_);
      double h, l;
      split_hi_lo(hi[name_][i], h, l);
      mpfr_float diff = abs(hi[name_][i] - lo[name_][i]);
      o.v[i] = h;
      o.err[i] = enc_detail::rup(diff.convert_to<double>() + std::fabs(l));
    };
    for (int64_t r : rows) {
      for (const char* n : {"y", "dx"})
        if (hi.count(n))
          for (int64_t j = 0; j < q.n; ++j) update(n, r * q.n + j);
      if (hi.count("rstd")) update("rstd", r);
    }
    if (hi.count("dw") && !hi["dw"].empty())
      for (int64_t j = 0; j < q.n; ++j) update("dw", j);
    ref.method += "+agreed:mpfr-128/256(" + std::to_string(rows.size()) + " rows)";
  }

  void enclose(const Case& c, const TensorSet& ts, const Contract& k,
               std::vector<OutputEnclosure>& out) const override {
    size_enclosures(outputs(c), out);
    Sink sink{[&](int o, int64_t i, const Enc& e) { put_enc(out[o], i, e); }};
    run(c, ts, EncPolicy{&k}, sink, true);
  }

 private:
  bool bwd_;

  /// Output 0 is y (fwd) or dx (bwd), output 1 rstd or dw.
  template <class Put>
  struct Sink {
    Put put;
    template <class V>
    void y(int64_t i, const V& e) { put(0, i, e); }
    template <class V>
    void rstd(int64_t i, const V& e) { put(1, i, e); }
    template <class V>
    void dx(int64_t i, const V& e) { put(0, i, e); }
    template <class V>
    void dw(int64_t i, const V& e) { put(1, i, e); }
  };
  template <class Put>
  Sink(Put) -> Sink<Put>;

  std::vector<TensorSpec> outputs(const Case& c) const { return output_specs(tensors(c)); }

  static RmsParams params(const Case& c) {
    RmsParams q;
    q.mode = parse_mode(c.attr("mode"));
    q.eps = c.attr_real("eps");
    q.offset = c.attr_real("offset");
    q.m_round_x = c.attrs.count("m_rounding") && c.attr("m_rounding") == "x_dtype";
    q.x = c.dtypes.at("x");
    q.n = c.shape.back();
    q.rows = numel(c.shape) / q.n;
    return q;
  }

  /// Inputs as exact values, x and dy read a row at a time from the tensors.
  static RmsSource source(const TensorSet& ts, bool with_bwd) {
    RmsSource d;
    auto x = ts.view("x");
    const int64_t n = x.desc.shape.back();
    d.x_row = [x, n](int64_t r, double* out) { x.read(r * n, n, out); };
    auto read = [&](const char* name_, std::vector<double>& out) {
      auto v = ts.view(name_);
      out.resize(static_cast<size_t>(v.desc.numel()));
      v.read(0, v.desc.numel(), out.data());
    };
    read("w", d.w);
    if (with_bwd) {
      auto dy = ts.view("dy");
      d.dy_row = [dy, n](int64_t r, double* out) { dy.read(r * n, n, out); };
      read("rstd", d.rstd);
    }
    return d;
  }

  template <class P, class S>
  void run(const Case& c, const TensorSet& ts, const P& p, S& sink, bool parallel) const {
    RmsParams q = params(c);
    RmsSource d = source(ts, bwd_);
    if (bwd_) rms_bwd_into(p, q, d, parallel, sink);
    else rms_fwd_into(p, q, d, parallel, sink);
  }
};

}  // namespace

void register_rms_norm_ops(Registry& r) {
  r.add(std::make_unique<RmsNormBinding>(false));
  r.add(std::make_unique<RmsNormBinding>(true));
}

}  // namespace kv
