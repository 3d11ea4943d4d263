// rms_norm bindings. fwd: x, w -> y, rstd; bwd: dy, x, w, rstd -> dx, dw. One definition
// (reference/rms_norm.hpp) gives the reference, the enclosure and the host impl
// (ops/rms_norm_host.cpp); the enclosure has a fast one-pass form (reference/rms_norm_fast.hpp).
#include "ops/rms_norm.hpp"

#include "ops/host/host_impl.hpp"
#include "ops/rms_norm_host.hpp"
#include "ops/row_op.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rms_norm_fast.hpp"

namespace kv {

static_assert(kRmsDwChunkRows == kColChunk, "the fast pass merges dW's chunks as column_sums does");

RmsParams rms_params(const Case& c) {
  RmsParams q;
  const std::string m = c.attr("mode");
  q.mode = m == "none" ? RmsMode::none : m == "gemma" ? RmsMode::gemma : RmsMode::llama;
  q.eps = c.attr_real("eps");
  q.offset = c.attr_real("offset");
  q.m_round_x = c.attrs.count("m_rounding") && c.attr("m_rounding") == "x_dtype";
  q.x = c.dtypes.at("x");
  q.m_dtype = q.x;
  if (auto d = c.site("rms_norm.m")) q.m_round_x = true, q.m_dtype = *d;  // the attribute's successor
  q.dw_product = c.site("rms_norm.dw_product");
  q.n = last_dim(c);
  q.rows = row_count(c);
  return q;
}

namespace {

class RmsNormOp : public PolicyOp<RmsNormOp> {
 public:
  explicit RmsNormOp(bool bwd) : bwd_(bwd) {}
  std::string name() const override { return bwd_ ? "rms_norm.bwd" : "rms_norm.fwd"; }
  std::vector<AttrSpec> attrs() const override {
    std::vector<AttrSpec> a = {{"mode", false, "llama", {"llama", "gemma", "none"}},
                               {"eps", true, hex_float(1e-6), {}},
                               {"offset", true, hex_float(0.0), {}}};
    if (bwd_) a.push_back({"m_rounding", false, "fp32", {"fp32", "x_dtype"}});
    return a;
  }
  void normalize(Case& c) const override {
    // dW's dtype follows w's (the rules below would give it x's).
    if (bwd_ && c.dtypes.count("w") && !c.dtypes.count("dw")) c.dtypes["dw"] = c.dtypes.at("w");
    PolicyOp::normalize(c);
  }
  void check(Case& c) const {
    if (c.shape.back() == 0) throw UsageError("rms_norm needs a positive hidden size N (the last dimension)");
    if (c.attr_real("offset") < 0) throw UsageError("attribute offset must be finite and >= 0");
    // eps = 0 would put 0 * inf (IEEE's NaN) in an all-zero row; see layer_norm.
    if (!(c.attr_real("eps") > 0))
      throw UsageError("attribute eps must be > 0 (with eps = 0 an all-zero row divides by zero)");
    const DType stat = stat_dtype(c);
    if (c.dtypes.at("rstd") != stat)
      throw UsageError("rstd is " + std::string(dtype_name(stat)) + " in mode " + c.attr("mode"));
  }
  /// rstd is fp32, or x's dtype in mode none (a user-given other dtype is refused by check).
  std::vector<std::pair<std::string, char>> dtype_rules(const Case& c) const {
    const char s = c.attr("mode") == "none" ? 'x' : 'f';
    if (bwd_) return {{"dy", 'x'}, {"x", 'x'}, {"w", 'x'}, {"rstd", s}, {"dx", 'x'}, {"dw", 'x'}};
    return {{"x", 'x'}, {"w", 'x'}, {"y", 'x'}, {"rstd", s}};
  }
  std::vector<TensorSpec> tensors(const Case& c) const override {
    std::vector<int64_t> wshape = {c.shape.back()}, rshape = rows_shape(c);
    auto t = [&](const char* n, const std::vector<int64_t>& s, Role r) { return TensorSpec{n, s, c.dtypes.at(n), r}; };
    if (bwd_)
      return {t("dy", c.shape, Role::input), t("x", c.shape, Role::input),    t("w", wshape, Role::input),
              t("rstd", rshape, Role::input), t("dx", c.shape, Role::output), t("dw", wshape, Role::output)};
    return {t("x", c.shape, Role::input), t("w", wshape, Role::input), t("y", c.shape, Role::output),
            t("rstd", rshape, Role::output)};
  }
  void generate(const Case& c, TensorSet& ts) const override {
    auto x = ts.view("x"), w = ts.view("w");
    fill_tensor(x, c.dist, c.seed, 0.0, 1.0);
    // Weights near 1 after the offset is added, as trained RMSNorm weights are.
    fill_tensor(w, "normal", c.seed, 1.0 - c.attr_real("offset"), 0.25);
    if (!bwd_) return;
    auto dy = ts.view("dy");
    fill_tensor(dy, "normal", c.seed, 0.0, 1.0);
    // rstd as the forward pass saves it: the defined rstd rounded to its dtype.
    const RmsParams q = rms_params(c);
    auto rs = ts.view("rstd");
    par_rows(q.rows, true, [&](int64_t r) {
      std::vector<double> row(static_cast<size_t>(q.n));
      x.read(r * q.n, q.n, row.data());
      rs.store(r, rms_rstd_row(EncPolicy{}, q, row.data()).m);
    });
  }
  int64_t rows(const Case& c) const { return row_count(c); }
  int64_t row_of(const Case& c, int o, int64_t i) const {
    if (o == 0) return i / last_dim(c);  // y, dx
    return bwd_ ? -1 : i;                // dw: every row; rstd: its own
  }
  /// y, rstd and dx per row (w shared); dW sums over rows.
  bool output_row_local(const Case&, int o) const { return !bwd_ || o == 0; }
  std::map<std::string, int> slice_dims(const Case& c) const override {
    if (c.shape.size() < 2) return {};
    return bwd_ ? dim0_slices({"dy", "x", "rstd", "dx"}) : dim0_slices({"x", "y", "rstd"});
  }
  std::vector<AxisLen> axes(const Case& c) const {
    if (bwd_) return {{"row", last_dim(c)}, {"rows", row_count(c), true}};
    return {{"row", last_dim(c)}};
  }

  template <class P, class S>
  void compute(const Case& c, const OpInputs& in, const P& p, S& sink, RowSet rs, bool parallel) const {
    using T = typename P::T;
    const RmsParams q = rms_params(c);
    const double* x = in["x"].data();
    const auto wp = rms_wprime(p, q, in["w"].data());
    if (!bwd_) {
      par_rows(q.rows, parallel, [&](int64_t r) {
        if (!rs.has(r)) return;
        std::vector<T> y(static_cast<size_t>(q.n));
        T rstd;
        rms_fwd_row(p, q, x + r * q.n, wp.data(), y.data(), rstd);
        for (int64_t j = 0; j < q.n; ++j) sink(0, r * q.n + j, y[j]);
        sink(1, r, rstd);
      });
      return;
    }
    const double *dy = in["dy"].data(), *rstd = in["rstd"].data();
    column_sums(
        p, q.rows, q.n, 1, rs, parallel, "rows",
        [&](int64_t r, auto* sums) {
          std::vector<T> dx(static_cast<size_t>(q.n));
          rms_bwd_row(p, q, dy + r * q.n, x + r * q.n, wp.data(), rstd[r], dx.data(),
                      [&](int64_t j, const T& t) { sums[j].add(t); });
          for (int64_t j = 0; j < q.n; ++j) sink(0, r * q.n + j, dx[j]);
        },
        [&](int, int64_t j, const T& v) { sink(1, j, v); });
  }

  /// The generic pass's results, bit for bit, from the fast one (reference/rms_norm_fast.hpp).
  void evaluate(const Case& c, const TensorSet& ts, const Contract& k, RefResult& ref,
                std::vector<OutputEnclosure>& out) const override {
    const RmsParams q = rms_params(c);
    if (!rms_fast_applies(q)) return PolicyOp::evaluate(c, ts, k, ref, out);
    size_ref(outputs(c), ref);
    size_enclosures(outputs(c), out);
    fast(c, ts, k, q, bufs(ref, out, 0), bufs(ref, out, 1));
  }
  /// The fast pass for some outputs: dW alone (the streamed runner's whole pass) without
  /// dx's buffers; otherwise all of them, the others dropped (OpBinding's way).
  void evaluate_only(const Case& c, const TensorSet& ts, const Contract& k, const std::set<std::string>& want,
                     RefResult& ref, std::vector<OutputEnclosure>& out) const override {
    const RmsParams q = rms_params(c);
    if (!rms_fast_applies(q)) return PolicyOp::evaluate_only(c, ts, k, want, ref, out);
    if (!bwd_ || want.count("dx")) return OpBinding::evaluate_only(c, ts, k, want, ref, out);
    const std::vector<char> keep = wanted(outputs(c), want);
    size_ref(outputs(c), ref, keep);
    size_enclosures(outputs(c), out, keep);
    if (keep[1]) fast(c, ts, k, q, RmsOut{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}, bufs(ref, out, 1));
  }

 private:
  bool bwd_;

  static DType stat_dtype(const Case& c) { return c.attr("mode") == "none" ? c.dtypes.at("x") : DType::f32; }
  static RmsOut bufs(RefResult& ref, std::vector<OutputEnclosure>& out, int o) {
    return RmsOut{ref.outputs[o].v.data(), ref.outputs[o].err.data(), out[o].lo.data(),
                  out[o].hi.data(),        out[o].unverifiable.data(), out[o].may_nan.data()};
  }
  void fast(const Case& c, const TensorSet& ts, const Contract& k, const RmsParams& q, const RmsOut& o0,
            const RmsOut& o1) const {
    const RmsSource d = source(ts);
    if (bwd_) rms_bwd_fast(k, q, d, o0, o1);
    else rms_fwd_fast(k, q, d, o0, o1);
  }
  /// Inputs as exact values, x and dy read a row at a time from the tensors.
  RmsSource source(const TensorSet& ts) const {
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
    if (bwd_) {
      auto dy = ts.view("dy");
      d.dy_row = [dy, n](int64_t r, double* out) { dy.read(r * n, n, out); };
      read("rstd", d.rstd);
    }
    return d;
  }
};

/// The host impl: HostImpl's driver with the host RMSNorm's knobs, contract and blocking.
class RmsHost : public HostImpl<RmsNormOp> {
 public:
  using HostImpl::HostImpl;
  std::vector<ConfigKnob> knobs() const override { return rms_host_knobs(bwd_); }
  Contract contract(const Case& c, const DeviceProfile& p) const override { return rms_host_contract(c, p, bwd_); }
  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile& p) const override {
    return rms_host_workspaces(c, p, bwd_);
  }
  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const override {
    return rms_host_thresholds(c, p, bwd_);
  }
  std::unique_ptr<Impl> with_fault(std::string name, HostFault f) const override {
    return std::make_unique<RmsHost>(bwd_, std::move(name), std::move(f), true);
  }

 protected:
  HostPolicy policy(const Case& c) const override { return rms_host_policy(c); }
  void compute(const Case& c, const OpInputs& in, const HostPolicy& p, const HostSink& sink,
               const HostRun& run) const override {
    if (bwd_) rms_host_bwd(c, in, p, sink, run);
    else rms_host_fwd(c, in, p, sink, run);
  }
};

}  // namespace

void register_rms_norm_ops(Registry& r) {
  for (bool bwd : {false, true}) {
    r.add(std::make_unique<RmsNormOp>(bwd));
    r.add(std::make_unique<RmsHost>(bwd));
  }
}

}  // namespace kv
