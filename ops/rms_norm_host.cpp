// Host RMSNorm. Arithmetic is float (compiled with -ffp-contract=off, so no FMA),
// rounded to x's dtype after every step in mode none (float has 24 >= 2*11+2 bits, so
// that double rounding is innocuous for + - * / sqrt: Figueroa, 1995).
#include "ops/rms_norm_host.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "core/mutant.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "core/impl_version.hpp"

namespace kv {

namespace {

/// One step of arithmetic in the compute dtype.
struct Arith {
  DType d;
  bool lowp;
  float operator()(float v) const { return lowp ? static_cast<float>(round_to(d, v)) : v; }
};

class HostRmsNorm : public Impl {
 public:
  HostRmsNorm(bool bwd, RmsBug bug, std::string name) : bwd_(bwd), bug_(bug), name_(std::move(name)) {}
  std::string op() const override { return bwd_ ? "rms_norm.bwd" : "rms_norm.fwd"; }
  std::string name() const override { return name_; }
  std::string device() const override { return "host"; }
  std::string version() const override { return impl_version("host"); }
  bool test_only() const override { return bug_ != RmsBug::none; }

  std::vector<ConfigKnob> knobs() const override {
    std::vector<ConfigKnob> k = {{"num_warps", {"4", "1", "2", "8", "16", "32"}}, {"order", {"asc", "desc", "shuffle"}}};
    if (bwd_) k.push_back({"dw", {"fixed_partials", "per_sm", "serial"}});
    return k;
  }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    // 1/sqrtf in float: sqrt then a division, each RN: 1.5 fp32 ulp at most; the 2 of the
    // shared contract also covers directed rounding. No FMA (-ffp-contract=off).
    const int64_t n = c.shape.back(), lanes = 32 * c.config_int("num_warps", 4);
    const bool per_sm = c.config_or("dw", "fixed_partials") == "per_sm";
    return rms_norm_contract(c, bwd_, {ceil_div(n, lanes), log2_ceil(std::min(lanes, n)), 0, std::nullopt},
                             bwd_ ? partials(c, p) : 1,
                             per_sm ? DeterminismClaims{"run_to_run"} : DeterminismClaims{"run_to_run", "gpu_invariant"});
  }

  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile& p) const override {
    if (!bwd_) return {};
    return {{"dw_partials", static_cast<size_t>(partials(c, p) * c.shape.back()) * sizeof(float), DType::f32}};
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const override {
    // A row sums over 32 * num_warps lanes; the backward's dW gives each of its partials a
    // contiguous run of ceil(rows / partials) rows: one row each at rows = partials.
    const int64_t lanes = 32 * c.config_int("num_warps", 4);
    std::vector<Threshold> t = {
        row_threshold(c, {lanes, 2 * lanes}, std::to_string(lanes) + " lanes holding one term each, then two")};
    if (bwd_ && partials(c, p) > 1)
      t.push_back(rows_threshold(c, {partials(c, p), 2 * partials(c, p)},
                                 "dW partials (" + c.config_or("dw", "fixed_partials") + ") holding one row each, then two"));
    return t;
  }

  void run(TensorSet& ts, const Case& c, const DeviceProfile& p) const override {
    if (bwd_) run_bwd(ts, c, p);
    else run_fwd(ts, c);
  }

 private:
  bool bwd_;
  RmsBug bug_;
  std::string name_;

  static int64_t partials(const Case& c, const DeviceProfile& p) {
    std::string s = c.config_or("dw", "fixed_partials");
    if (s == "serial") return 1;
    if (s == "per_sm") return std::max<int64_t>(1, p.sm_count);
    return 64;
  }

  Arith arith(const Case& c) const {
    bool none = c.attr("mode") == "none";
    DType x = c.dtypes.at("x");
    return Arith{x, none && x != DType::f32};
  }

  /// Lane assignment and order of a row's elements for the configured blocking.
  std::vector<int64_t> order(const Case& c, int64_t n, uint64_t salt) const {
    std::vector<int64_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    std::string o = c.config_or("order", "asc");
    if (o == "desc") std::reverse(idx.begin(), idx.end());
    if (o == "shuffle") {
      std::mt19937_64 g(c.seed * 0x9E3779B97F4A7C15ull + salt);
      std::shuffle(idx.begin(), idx.end(), g);
    }
    return idx;
  }

  /// Sums terms as the blocking does: lane l takes positions l, l+T, ... of `idx` in
  /// order, then lanes are combined by a pairwise tree.
  float block_sum(const std::vector<float>& terms, const std::vector<int64_t>& idx, int64_t lanes, const Arith& ar,
                  bool bf16_acc) const {
    int64_t n = static_cast<int64_t>(terms.size()), T = std::min(lanes, std::max<int64_t>(n, 1));
    std::vector<float> lane(static_cast<size_t>(T), 0.0f);
    auto add = [&](float a, float b) {
      float s = ar(a + b);
      return bf16_acc ? static_cast<float>(round_to(DType::bf16, s)) : s;
    };
    for (int64_t pos = 0; pos < n; ++pos) lane[pos % T] = add(lane[pos % T], terms[idx[pos]]);
    for (int64_t width = int64_t(1) << log2_ceil(T); width > 1; width /= 2)
      for (int64_t l = 0; l < width / 2; ++l)
        if (l + width / 2 < T - KV_MUTANT(rms_h_tree_last_lane)) lane[l] = add(lane[l], lane[l + width / 2]);
    return lane[0];
  }

  float rstd_of(const TensorView& x, int64_t row, int64_t n, const Case& c, const Arith& ar,
                const std::vector<int64_t>& idx) const {
    std::vector<float> sq(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      float v = static_cast<float>(KV_MUTANT(rms_h_x_via_bf16) ? round_to(DType::bf16, x.get(row * n + j))
                                                                : x.get(row * n + j));
      sq[j] = ar(v * v);
    }
    if (bug_ == RmsBug::drop_last_square) sq[n - 1] = 0.0f;
    const int64_t lanes = 32 * c.config_int("num_warps", 4);
    if (bug_ == RmsBug::drop_tail && n > lanes) std::fill(sq.begin() + (n - n % lanes), sq.end(), 0.0f);
    float s = block_sum(sq, idx, lanes, ar, bug_ == RmsBug::bf16_accumulation);
    float denom = static_cast<float>(bug_ == RmsBug::divide_by_n_minus_1 ? std::max<int64_t>(n - 1, 1) : n);
    float ms = ar(KV_MUTANT(rms_h_no_mean) ? s : s / denom);
    const DType eps_dt = KV_MUTANT(rms_h_eps_bf16) ? DType::bf16 : ar.lowp ? ar.d : DType::f32;
    float eps = ar(static_cast<float>(round_to(eps_dt, c.attr_real("eps"))));
    if (KV_MUTANT(rms_h_eps_dropped)) eps = 0.0f;
    if (bug_ == RmsBug::eps_outside_sqrt) return ar(1.0f / ar(ar(std::sqrt(ms)) + eps));
    return ar(1.0f / std::sqrt(ar(ms + eps)));  // rsqrt in float, then one rounding (mode none)
  }

  void store(TensorView& t, int64_t i, float v) const {
    if (bug_ == RmsBug::truncate_to_bf16 && t.desc.dtype == DType::bf16) {
      uint32_t b;
      std::memcpy(&b, &v, 4);
      t.set_bits(i, std::isnan(v) ? canonical_nan_bits(DType::bf16) : (b >> 16));
      return;
    }
    t.store(i, v);
  }

  float round_x(double v, const Case& c) const {
    DType x = c.dtypes.at("x");
    if (bug_ == RmsBug::truncate_to_bf16 && x == DType::bf16) {
      float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      b &= 0xFFFF0000u;
      std::memcpy(&f, &b, 4);
      return f;
    }
    return static_cast<float>(round_to(x, v));
  }

  /// The planted output faults, applied to the first output after the run.
  void plant_output_fault(TensorView& t) const {
    int64_t n = t.desc.numel();
    if (n == 0) return;
    if (bug_ == RmsBug::write_nan) t.store(n / 2, std::nan(""));
    if (bug_ == RmsBug::leave_unwritten) t.set_bits(n - 1, poison_bits(t.desc.dtype));
    if (bug_ == RmsBug::write_past_end) {
      // One element past the view's last element, as an off-by-one tail would.
      uint8_t* p = t.base + (t.storage_index(n - 1) + 1) * dtype_size(t.desc.dtype);
      std::memset(p, 0, dtype_size(t.desc.dtype));
    }
  }

  void run_fwd(TensorSet& ts, const Case& c) const {
    auto x = ts.view("x"), w = ts.view("w"), y = ts.view("y"), rs = ts.view("rstd");
    const int64_t n = c.shape.back(), rows = numel(c.shape) / n;
    const Arith ar = arith(c);
    const bool llama = c.attr("mode") == "llama" && bug_ != RmsBug::gemma_for_llama;
    const float off = KV_MUTANT(rms_h_offset_dropped) ? 0.0f : static_cast<float>(c.attr_real("offset"));
    std::vector<float> wp(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) wp[j] = ar(off + static_cast<float>(w.get(j)));
    for (int64_t r = 0; r < rows; ++r) {
      float rstd = rstd_of(x, r, n, c, ar, order(c, n, static_cast<uint64_t>(r)));
      store(rs, r, rstd);
      for (int64_t j = 0; j < n; ++j) {
        float xr = ar(static_cast<float>(x.get(r * n + j)) * rstd);
        if (llama)
          xr = KV_MUTANT(rms_h_llama_rz) ? static_cast<float>(round_toward_zero(c.dtypes.at("x"), xr)) : round_x(xr, c);
        store(y, r * n + j, ar(xr * wp[j]));
      }
    }
    plant_output_fault(y);
  }

  void run_bwd(TensorSet& ts, const Case& c, const DeviceProfile& p) const {
    auto dy = ts.view("dy"), x = ts.view("x"), w = ts.view("w"), rs = ts.view("rstd");
    auto dx = ts.view("dx"), dw = ts.view("dw");
    const int64_t n = c.shape.back(), rows = numel(c.shape) / n;
    const Arith ar = arith(c);
    const bool llama = c.attr("mode") == "llama" && bug_ != RmsBug::gemma_for_llama;
    const bool m_round = c.attr("m_rounding") == "x_dtype" && !KV_MUTANT(rms_h_m_rounding_ignored);
    const float off = static_cast<float>(c.attr_real("offset"));
    const int64_t lanes = 32 * c.config_int("num_warps", 4), parts = partials(c, p);
    const int64_t per_part = ceil_div(std::max<int64_t>(rows, 1), parts);
    float* part = reinterpret_cast<float*>(ts.workspaces.at("dw_partials")->payload());
    std::fill(part, part + parts * n, 0.0f);
    std::vector<float> wp(static_cast<size_t>(n)), m(static_cast<size_t>(n)), mx(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) wp[j] = ar(off + static_cast<float>(w.get(j)));
    if (KV_MUTANT(rms_h_wprime_lowp))
      for (auto& v : wp) v = round_x(v, c);
    // Rows visit the partial buffers in `order`; a row's partial is fixed by its position.
    std::vector<int64_t> row_order = order(c, rows, 0x5157);
    for (int64_t pos = 0; pos < rows; ++pos) {
      int64_t r = row_order[pos];
      float rstd = static_cast<float>(rs.get(r));
      for (int64_t j = 0; j < n; ++j) {
        float xv = static_cast<float>(x.get(r * n + j));
        // x_dtype: one rounding of the exact product (exact in double: 24 + 24 bits).
        const double dyw = dy.get(r * n + j) * static_cast<double>(KV_MUTANT(rms_h_m_no_w) ? 1.0f : wp[j]);
        m[j] = m_round ? round_x(KV_MUTANT(rms_h_m_double_rounding) ? static_cast<float>(dyw) : dyw, c)
                       : ar(static_cast<float>(dyw));
        mx[j] = ar(m[j] * xv);
      }
      float s = block_sum(mx, order(c, n, static_cast<uint64_t>(r)), lanes, ar, false);
      float r3 = KV_MUTANT(rms_h_c_rstd_squared) ? ar(rstd * rstd) : ar(ar(rstd * rstd) * rstd);
      float cc = ar(r3 * ar(KV_MUTANT(rms_h_c_no_mean) ? s : s / static_cast<float>(n)));
      bool skip_dw = bug_ == RmsBug::drop_last_dw_row && r == rows - 1;
      float* pp = part + (pos / per_part) * n;
      for (int64_t j = 0; j < n; ++j) {
        // dy is read before dx is stored: dx may be written into dy's storage (in place).
        float xv = static_cast<float>(x.get(r * n + j)), dyv = static_cast<float>(dy.get(r * n + j));
        float t = KV_MUTANT(rms_h_dw_no_rstd) ? xv : ar(xv * rstd);
        if (llama && !KV_MUTANT(rms_h_dw_llama_unrounded)) t = round_x(t, c);
        if (!skip_dw) pp[j] = pp[j] + ar(dyv * t);  // fp32 accumulation in every mode
        const float a = ar(rstd * m[j]), b = ar(cc * xv);
        store(dx, r * n + j, ar(KV_MUTANT(rms_h_dx_sign) ? a + b : a - b));
      }
    }
    // Second stage: the partials summed serially in order. (Mutants: the last partial left
    // out; an order that changes from run to run, as atomics would give.)
    const int64_t rot = KV_MUTANT(rms_h_dw_run_order) ? static_cast<int64_t>(std::random_device{}() % parts) : 0;
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t q = 0; q < parts - KV_MUTANT(rms_h_dw_last_partial); ++q)
        s = s + part[(KV_MUTANT(rms_h_dw_run_order) ? (q + rot) % parts : q) * n + j];
      store(dw, j, s);
    }
    plant_output_fault(dx);
  }
};

}  // namespace

std::unique_ptr<Impl> make_host_rms_norm(bool bwd, RmsBug bug, std::string name) {
  return std::make_unique<HostRmsNorm>(bwd, bug, std::move(name));
}

void register_host_rms_norm(Registry& r) {
  r.add(make_host_rms_norm(false));
  r.add(make_host_rms_norm(true));
}

}  // namespace kv
