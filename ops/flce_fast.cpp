// FLCE's one-pass reference and enclosure over dense products. Rows are taken in chunks
// so the BT x V logits never exist whole; within a chunk the products are tiled over
// oneTBB, each tile one single-threaded Eigen product (reference/gemm.hpp).
//
// Every sum of products s = sum_i a_i b_i is computed twice: in double for its value, and
// in float over |a_i| and |b_i| rounded up, for a bound on S = sum_i |a_i b_i|. Both rest
// on Higham, Accuracy and Stability, Lemma 3.1 and eq. (3.5): a sum of n products
// evaluated in any order, products rounded or fused, errs by at most gamma_{n+1}(u) times
// the sum of the magnitudes (n+1 covers the product's own rounding). With every term
// non-negative that gives S <= s_float / (1 - gamma_{n+1}(2^-24)); the float products
// flush subnormal results to zero, losing at most 2^-126 in each of their 2n + 1
// operations, and double products below the normal range lose 2^-1075 each.
#include "ops/flce_fast.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include "ops/ce_common.hpp"
#include "ops/flce.hpp"
#include "ops/flce_certify.hpp"
#include "reference/dual_policy.hpp"
#include "reference/flce.hpp"
#include "reference/gemm.hpp"

namespace kv {

namespace {

using enc_detail::kInf;
template <class T>
using Buf = std::vector<T, NoInitAlloc<T>>;  // uninitialized, on huge pages when large
using enc_detail::rup;

/// x >= 0 rounded up to a float that is zero or normal (an upper bound on a magnitude,
/// fit for the flush-to-zero float products of gemm.hpp); NaN becomes +inf.
inline float f_up(double x) {
  if (!(x <= static_cast<double>(std::numeric_limits<float>::max()))) return std::numeric_limits<float>::infinity();
  if (x == 0) return 0.0f;
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return std::max(f, std::numeric_limits<float>::min());
}

/// Bounds for a sum of n products: its double value's error and its magnitude.
struct SumBound {
  double mag_scale = 0;  // S <= s_float * mag_scale + mag_eta
  double mag_eta = 0;
  double g53 = 0;  // |double value - exact| <= g53 * S + eta53
  double eta53 = 0;
  explicit SumBound(int64_t n) {
    const double g24 = gamma_n(n + 1, 0x1p-24);
    mag_scale = g24 < 1 ? rup(1.0 / (1.0 - g24)) : kInf;
    mag_eta = static_cast<double>(2 * n + 1) * 0x1p-125;
    g53 = gamma_n(n + 1, 0x1p-53);
    eta53 = static_cast<double>(n + 1) * 0x1p-1074;
  }
  /// S <= (s + E) / (1 - gamma): E bounds what the flushes lost, each loss carried through
  /// the remaining operations (a factor below 2, taken as 2).
  double mag(float s) const { return rup((static_cast<double>(s) + mag_eta) * mag_scale); }
  /// The double value's error given the magnitude bound S, before rounding up.
  double err(double S) const { return g53 * S + eta53; }
};

/// The contract of one reduced axis as the generic EncSum::contract applies it.
struct AxisContract {
  double g = 0;  // gamma_{n_eff}(u) of the axis
  DType acc = DType::f32;
  bool unv = false;
  AxisContract(const Contract& k, const char* axis)
      : g(gamma_n(k.reduction(axis).n_eff(), k.unit_of(axis))), acc(k.acc_of(axis)), unv(!(g < kInf)) {}
  /// The enclosure under the contract of a sum with exact-math enclosure `e`, and `abs`
  /// a bound on the sum of its terms' magnitudes (midpoints and radii); flags as the
  /// terms' (unverifiable, NaN admissible). A sum that may overflow admits ±inf, and NaN
  /// where it may overflow both ways (EncSum::contract).
  Enc apply(const Enc& e, double abs, bool unv_terms, bool nan_terms) const {
    if (abs == 0) return Enc{e.m, e.r, unv_terms, nan_terms};
    if (unv) return Enc{e.m, kInf, true, true};
    if (abs * (1.0 + g) >= max_finite(acc))
      return Enc{e.m, kInf, unv_terms, nan_terms || enc_detail::sum_may_overflow_both(e, abs, g, acc)};
    return Enc{e.m, rup(e.r + g * abs), unv_terms, nan_terms};
  }
};

/// One accumulator rounding of a term (EncPolicy::acc under the contract): |RN(t) - t| <=
/// u |t| + eta.
struct AccRound {
  double u = 0, eta = 0;
  explicit AccRound(const Contract& k) : u(k.unit()), eta(k.ftz ? min_normal(k.acc) : min_subnormal(k.acc) * 0.5) {}
};

/// Magnitude of `in` as floats (exact: every bf16, fp16 and fp32 value is a float),
/// with the smallest nonzero, the largest and the largest finite magnitude.
struct AbsFloat {
  Buf<float> a;
  double lo = kInf, hi = 0, fin_hi = 0;
};
AbsFloat abs_float(const DoubleBuf& in) {
  AbsFloat r;
  r.a.resize(in.size());
  const int64_t n = static_cast<int64_t>(in.size()), chunk = 1 << 16;
  const int64_t nch = (n + chunk - 1) / chunk;
  std::vector<double> lo(static_cast<size_t>(nch), kInf), hi(static_cast<size_t>(nch), 0), fin(static_cast<size_t>(nch), 0);
  tbb::parallel_for(int64_t(0), nch, [&](int64_t c) {
    for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) {
      const double v = std::fabs(in[i]);
      r.a[i] = f_up(v);
      if (v != 0) lo[c] = std::min(lo[c], v);
      hi[c] = std::max(hi[c], v);
      if (v < kInf) fin[c] = std::max(fin[c], v);
    }
  });
  for (int64_t c = 0; c < nch; ++c)
    r.lo = std::min(r.lo, lo[c]), r.hi = std::max(r.hi, hi[c]), r.fin_hi = std::max(r.fin_hi, fin[c]);
  return r;
}

/// The largest finite magnitude among n values (0 if none).
double finite_max(const double* v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(v[i])) m = std::max(m, std::fabs(v[i]));
  return m;
}

/// Tiles a product over oneTBB: f(i0, i1, j0, j1) for tiles of `ti` x `tj`.
template <class F>
void tiles(int64_t ni, int64_t nj, int64_t ti, int64_t tj, F&& f) {
  const int64_t bi = (ni + ti - 1) / ti, bj = (nj + tj - 1) / tj;
  tbb::parallel_for(int64_t(0), bi * bj, [&](int64_t t) {
    const int64_t i0 = (t / bj) * ti, j0 = (t % bj) * tj;
    f(i0, std::min(ni, i0 + ti), j0, std::min(nj, j0 + tj));
  });
}

/// The enclosure pair of sum_v g_v b_v from the chunked products: m its double value, A a
/// bound on sum (|g_v.m| + r_v) |b_v|, R on sum r_v |b_v|, where r_v covers the contract's
/// enclosure of g_v around the reference midpoint, and F on sum f_v |b_v|, f_v the
/// reference's own radius of g_v. Under the contract each term is acc(g_v b_v):
/// the double product errs by 2^-53 |g b| + 2^-1074 (Enc's operator*), the accumulator
/// rounding adds u(|t.m| + t.r) + eta (AccRound), and the axis's contract adds
/// gamma_{n_eff} sum(|t.m| + t.r) (AxisContract); the terms' radii sum to at most
///   T = R (1 + u) + A (2^-53 + u (1 + 2^-52)) + n (2^-1074 (1 + u) + eta).
struct GradSum {
  SumBound sb;
  AccRound ar;
  AxisContract ax;
  int64_t n;
  GradSum(int64_t n_, const Contract& k, const char* axis) : sb(n_), ar(k), ax(k, axis), n(n_) {}
  /// G's magnitudes and radii enter the float products scaled by 2^kExp: radii are 2^-50
  /// of the values and less, and would otherwise sit at float's subnormal floor.
  static constexpr int kExp = 64;
  static float scaled_up(double x) { return f_up(std::ldexp(x, kExp)); }
  double unscale(float s) const { return rup(std::ldexp(sb.mag(s), -kExp)); }
  /// The double value's own error.
  double mid_bound(float a_hat) const { return rup(sb.err(unscale(a_hat))); }
  /// unv, nan: whether some g_v is unverifiable or may be NaN under the contract.
  Dual at(double m, float a_hat, float r_hat, float f_hat, bool unv, bool nan) const {
    const double A = unscale(a_hat), R = unscale(r_hat);
    const double mid = sb.err(A);  // the double value's own error
    Enc ref{m, rup(mid + unscale(f_hat)), false, false};
    const double T = rup(R * (1.0 + ar.u) + A * (0x1p-53 + ar.u * (1.0 + 0x1p-52)) +
                         static_cast<double>(n) * (0x1p-1074 * (1.0 + ar.u) + ar.eta));
    const double abs = rup(A * (1.0 + 0x1p-53) + T);
    Enc con = ax.apply(Enc{m, rup(mid + T), unv, nan}, abs, unv, nan);
    return {ref, con};
  }
};

/// Seconds per phase, printed to stderr at the end when KV_TRACE is set.
class PhaseTimes {
 public:
  PhaseTimes() : on_(std::getenv("KV_TRACE") != nullptr), t0_(std::chrono::steady_clock::now()) {}
  PhaseTimes(const PhaseTimes&) = delete;
  PhaseTimes& operator=(const PhaseTimes&) = delete;
  void lap(const char* phase) {
    if (!on_) return;
    auto t = std::chrono::steady_clock::now();
    secs_[phase] += std::chrono::duration<double>(t - t0_).count();
    t0_ = t;
  }
  ~PhaseTimes() {
    for (auto& [k, v] : secs_) std::fprintf(stderr, "flce phase %-12s %8.3f s\n", k.c_str(), v);
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point t0_;
  std::map<std::string, double> secs_;
};

struct Chunk {
  int64_t r0 = 0, n = 0;
};

class FlceFast {
 public:
  FlceFast(const Case& c, const OpInputs& in, const Contract& k, bool bwd)
      : in_(in), k_(k), bwd_(bwd), p_(&k), gemm_(gemm_table()) {
    g_ = flce_geom(c);
    q_ = ce_params(c, g_.v);
    x_ = in["x"].data();
    w_ = in["weight"].data();
    b_ = g_.bias ? in["bias"].data() : nullptr;
    xa_ = abs_float(in["x"]);
    x_zero_.resize(static_cast<size_t>(g_.bt));
    x_fin_max_.resize(static_cast<size_t>(g_.bt));
    par_rows(g_.bt, true, [&](int64_t r) {
      x_zero_[r] = std::all_of(x_ + r * g_.h, x_ + (r + 1) * g_.h, [](double e) { return e == 0; });
      x_fin_max_[r] = finite_max(x_ + r * g_.h, g_.h);
    });
    wa_ = abs_float(in["weight"]);
    // Is each product x_h W_vh an accumulator number (no rounding in acc())? Significands
    // of p_x and p_w bits multiply into at most p_x + p_w bits; the range check keeps
    // every nonzero product normal and finite in the accumulator's format.
    const int px = format_of(c.dtypes.at("x")).p, pw = format_of(c.dtypes.at("weight")).p;
    logit_prod_exact_ = px + pw <= format_of(k.acc).p && xa_.lo * wa_.lo >= min_normal(k.acc) &&
                        xa_.hi * wa_.hi <= 0.5 * max_finite(k.acc);
  }

  void run(RefResult& ref, std::vector<OutputEnclosure>& out) {
    times_.lap("setup");
    ref.method += std::string("+gemm:eigen-") + gemm_.isa;
    const int64_t bt = g_.bt;
    if (!bwd_) {
      std::vector<Dual> loss(static_cast<size_t>(bt));
      for (int64_t r0 = 0; r0 < bt; r0 += kRows) {
        Chunk ch{r0, std::min(kRows, bt - r0)};
        logits(ch);
        if (r0 == 0) certify_logits(ch);
        times_.lap("logits");
        par_rows(ch.n, true, [&](int64_t i) {
          const int64_t r = ch.r0 + i;
          auto l = logit_row(ch, i);
          loss[r] = ce_row_loss(p_, q_, l.data(), nullptr, static_cast<int64_t>(in_["target"][r]));
        });
        times_.lap("ce");
      }
      auto sink = [&](int o, int64_t i, const Dual& e) {
        put_ref(ref.outputs[o], i, e.ref);
        put_enc(out[o], i, e.con);
      };
      ce_emit_loss(p_, q_, bt, in_["target"], nullptr, sink, RowSet{}, true,
                   [&](int64_t r) { return loss[r]; });
    } else {
      backward(ref, out);
    }
    ref.method += "+sampled:mpfr-256(" + std::to_string(sampled_) + ")";
  }

 private:
  // Rows per chunk (whole dbias chunks). Tiles are shaped so each chunk streams W through
  // the products a few times only: the logits tile all of the chunk's rows, dx tiles 256 x 256.
  static constexpr int64_t kRows = 8 * kColChunk;

  /// L = x W^T and its magnitudes for the chunk's rows.
  void logits(const Chunk& ch) {
    const int64_t v = g_.v, h = g_.h;
    lm_.resize(static_cast<size_t>(ch.n * v));
    ls_.resize(static_cast<size_t>(ch.n * v));
    tiles(ch.n, v, ch.n, 1024, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
      gemm_.d(GemmOp::nt, i1 - i0, j1 - j0, h, x_ + (ch.r0 + i0) * h, h, w_ + j0 * h, h, lm_.data() + i0 * v + j0, v,
              false);
      gemm_.s(GemmOp::nt, i1 - i0, j1 - j0, h, xa_.a.data() + (ch.r0 + i0) * h, h, wa_.a.data() + j0 * h, h,
              ls_.data() + i0 * v + j0, v, false);
    });
  }

  /// Certification samples of the first chunk's logits (before the bias).
  void certify_logits(const Chunk& ch) {
    const SumBound sb(g_.h);
    std::vector<ProductSample> smp;
    for (auto [i, v] : {std::pair<int64_t, int64_t>{0, 0}, {ch.n - 1, g_.v - 1}}) {
      const int64_t e = i * g_.v + v;
      smp.push_back({"logit (" + std::to_string(ch.r0 + i) + ", " + std::to_string(v) + ")", x_ + (ch.r0 + i) * g_.h,
                     1, w_ + v * g_.h, 1, g_.h, lm_[e], rup(sb.err(sb.mag(ls_[e])))});
    }
    certify_samples(smp);
    sampled_ += static_cast<int>(smp.size());
  }

  /// Certification samples of the first chunk's dx sums (G's rows times W's columns).
  void certify_dx(const Chunk& ch, const Buf<double>& gm, const Buf<double>& dxm, const Buf<float>& dxa,
                  const GradSum& dx_sum) {
    const int64_t v = g_.v, h = g_.h;
    std::vector<ProductSample> smp;
    for (auto [i, kk] : {std::pair<int64_t, int64_t>{0, 0}, {ch.n - 1, h - 1}}) {
      const int64_t e = i * h + kk;
      smp.push_back({"dx (" + std::to_string(ch.r0 + i) + ", " + std::to_string(kk) + ")", gm.data() + i * v, 1,
                     w_ + kk, h, v, dxm[e], dx_sum.mid_bound(dxa[e])});
    }
    certify_samples(smp);
    sampled_ += static_cast<int>(smp.size());
  }

  /// Row i of the chunk's logits as enclosure pairs: the products x_h W_vh are exact in
  /// double (two significands of at most 24 bits), so the double sum errs by at most
  /// g53 S; under the contract each product is rounded to the accumulator unless it is
  /// known to be an accumulator number, then the "h" axis's contract applies (as in
  /// flce_logits_row), then the bias is added in the accumulator.
  std::vector<Dual> logit_row(const Chunk& ch, int64_t i) const {
    const SumBound sb(g_.h);
    const AccRound ar(k_);
    const AxisContract ax(k_, "h");
    std::vector<Dual> l(static_cast<size_t>(g_.v));
    for (int64_t v = 0; v < g_.v; ++v) {
      const double m = lm_[i * g_.v + v];
      const double S = sb.mag(ls_[i * g_.v + v]);
      Dual d;
      if (x_zero_[static_cast<size_t>(ch.r0 + i)]) {
        d = {enc_exact(m), enc_exact(m)};  // every product is an exact zero
      } else if (!enc_detail::finite(m)) [[unlikely]] {
        // A non-finite x_h (or W_vh): the double sum of the exact products is IEEE's value,
        // ±inf or NaN, in any order (its finite products cannot overflow a double). Under
        // the contract the finite products' partial sums might still overflow the other way
        // (inf - inf): bounded by h max|x_h| max|W_vh| over the finite values.
        const double fin = rup(static_cast<double>(g_.h) * x_fin_max_[static_cast<size_t>(ch.r0 + i)] * wa_.fin_hi);
        d.ref = enc_exact(m);
        d.con = Enc{m, 0.0, false, std::isinf(m) && !(rup(fin * (1.0 + ar.u)) * (1.0 + ax.g) < max_finite(ax.acc))};
      } else {
        d.ref = Enc{m, rup(sb.err(S)), false, false};
        const double tr = logit_prod_exact_ ? 0.0 : rup(ar.u * S + static_cast<double>(g_.h) * ar.eta);
        d.con = ax.apply(Enc{m, rup(d.ref.r + tr), false, false}, rup(S + tr), false, false);
      }
      if (b_) d = p_.acc(d + p_.c(b_[v]));
      l[v] = d;
    }
    return l;
  }

  void backward(RefResult& ref, std::vector<OutputEnclosure>& out) {
    const int64_t bt = g_.bt, v = g_.v, h = g_.h;
    const auto& target = in_["target"];
    const Dual wsum = ce_weight_sum(p_, q_, target, nullptr), wbar = p_.c(1);
    const bool any = numel_nonignored(q_, target) > 0;
    Buf<double> dwm(static_cast<size_t>(v * h));
    Buf<float> dwa(static_cast<size_t>(v * h)), dwr(dwa.size()), dwf(dwa.size());
    std::vector<DualPolicy::Sum> db(b_ ? static_cast<size_t>(v) : 0, p_.sum());
    Buf<Dual> gd;  // the chunk's gradient rows, kept for dbias
    Buf<double> gm, dxm;
    Buf<float> ga, gr, gf, dxa, dxr, dxf;
    // Per row: some g_v unverifiable, some g_v admitting NaN, every g_v an exact zero.
    std::vector<char> unv(static_cast<size_t>(kRows)), nan(static_cast<size_t>(kRows)), g_zero(static_cast<size_t>(kRows));
    bool unv_all = false, nan_all = false;
    const GradSum dx_sum(v, k_, "v"), dw_sum(bt, k_, "rows");
    for (int64_t r0 = 0; r0 < bt; r0 += kRows) {
      Chunk ch{r0, std::min(kRows, bt - r0)};
      logits(ch);
      if (r0 == 0) certify_logits(ch);
      times_.lap("logits");
      gm.resize(static_cast<size_t>(ch.n * v));
      ga.resize(gm.size());
      gr.resize(gm.size());
      gf.resize(gm.size());
      if (b_) gd.resize(gm.size());
      par_rows(ch.n, true, [&](int64_t i) {
        const int64_t r = ch.r0 + i;
        auto l = logit_row(ch, i);
        std::vector<Dual> g(static_cast<size_t>(v));
        ce_row_grad(p_, q_, l.data(), nullptr, static_cast<int64_t>(target[r]), wbar,
                    ce_scale(p_, q_, in_["dloss"], r, wsum, any), g.data());
        flce_round_grad(p_, g_, g.data());
        // The contract's enclosure of g_v, recentred on the reference midpoint.
        bool u = false, nn = false, zero = true;
        for (int64_t j = 0; j < v; ++j) {
          const Dual& e = g[j];
          const double rc = rup(e.con.r + std::fabs(e.con.m - e.ref.m));
          const double a = std::fabs(e.ref.m) + std::max(e.ref.r, rc);
          gm[i * v + j] = e.ref.m;
          ga[i * v + j] = GradSum::scaled_up(a * (1.0 + 0x1p-52));
          gr[i * v + j] = GradSum::scaled_up(rc);
          gf[i * v + j] = GradSum::scaled_up(e.ref.r);
          u = u || e.con.unv;
          nn = nn || e.con.nan;
          zero = zero && e.ref.m == 0 && e.ref.r == 0 && e.con.m == 0 && e.con.r == 0 && !e.con.nan;
        }
        g_zero[i] = zero;
        unv[i] = u;
        nan[i] = nn;
        if (b_) std::copy(g.begin(), g.end(), gd.begin() + i * v);
      });
      for (int64_t i = 0; i < ch.n; ++i) unv_all = unv_all || unv[i], nan_all = nan_all || nan[i];
      times_.lap("ce");
      // dx = G W for the chunk's rows.
      dxm.resize(static_cast<size_t>(ch.n * h));
      dxa.resize(dxm.size());
      dxr.resize(dxm.size());
      dxf.resize(dxm.size());
      tiles(ch.n, h, 256, 256, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
        gemm_.d(GemmOp::nn, i1 - i0, j1 - j0, v, gm.data() + i0 * v, v, w_ + j0, h, dxm.data() + i0 * h + j0, h, false);
        gemm_.s(GemmOp::nn, i1 - i0, j1 - j0, v, ga.data() + i0 * v, v, wa_.a.data() + j0, h, dxa.data() + i0 * h + j0,
                h, false);
        gemm_.s(GemmOp::nn, i1 - i0, j1 - j0, v, gr.data() + i0 * v, v, wa_.a.data() + j0, h, dxr.data() + i0 * h + j0,
                h, false);
        gemm_.s(GemmOp::nn, i1 - i0, j1 - j0, v, gf.data() + i0 * v, v, wa_.a.data() + j0, h, dxf.data() + i0 * h + j0,
                h, false);
      });
      if (r0 == 0) certify_dx(ch, gm, dxm, dxa, dx_sum);
      times_.lap("dx gemm");
      par_rows(ch.n, true, [&](int64_t i) {
        const int64_t r = ch.r0 + i;
        for (int64_t kk = 0; kk < h; ++kk) {
          const int64_t e = i * h + kk;
          // A row of exact zeros (an ignored target) gives exact zeros.
          Dual d = g_zero[i] ? Dual{enc_exact(0), enc_exact(0)} : dx_sum.at(dxm[e], dxa[e], dxr[e], dxf[e], unv[i], nan[i]);
          put_ref(ref.outputs[0], r * h + kk, d.ref);
          put_enc(out[0], r * h + kk, d.con);
        }
      });
      times_.lap("dx out");
      // dW += G^T x over the chunk's rows.
      const bool first = r0 == 0;
      tiles(v, h, 512, h, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
        gemm_.d(GemmOp::tn, i1 - i0, j1 - j0, ch.n, gm.data() + i0, v, x_ + ch.r0 * h + j0, h,
                dwm.data() + i0 * h + j0, h, !first);
        gemm_.s(GemmOp::tn, i1 - i0, j1 - j0, ch.n, ga.data() + i0, v, xa_.a.data() + ch.r0 * h + j0, h,
                dwa.data() + i0 * h + j0, h, !first);
        gemm_.s(GemmOp::tn, i1 - i0, j1 - j0, ch.n, gr.data() + i0, v, xa_.a.data() + ch.r0 * h + j0, h,
                dwr.data() + i0 * h + j0, h, !first);
        gemm_.s(GemmOp::tn, i1 - i0, j1 - j0, ch.n, gf.data() + i0, v, xa_.a.data() + ch.r0 * h + j0, h,
                dwf.data() + i0 * h + j0, h, !first);
      });
      times_.lap("dw gemm");
      // dbias: column sums in chunks of kColChunk rows merged in order, as column_sums.
      if (b_)
        for (int64_t s0 = 0; s0 < ch.n; s0 += kColChunk)
          par_rows(v, true, [&](int64_t j) {
            auto part = p_.sum();
            for (int64_t i = s0; i < std::min(ch.n, s0 + kColChunk); ++i) part.add(gd[i * v + j]);
            db[j].merge(part);
          });
    }
    par_rows(v, true, [&](int64_t j) {
      for (int64_t kk = 0; kk < h; ++kk) {
        const int64_t e = j * h + kk;
        Dual d = dw_sum.at(dwm[e], dwa[e], dwr[e], dwf[e], unv_all, nan_all);
        put_ref(ref.outputs[1], e, d.ref);
        put_enc(out[1], e, d.con);
      }
      if (b_) {
        Dual d = p_.finish(db[j], "rows");
        put_ref(ref.outputs[2], j, d.ref);
        put_enc(out[2], j, d.con);
      }
    });
    times_.lap("dw out");
  }

  PhaseTimes times_;  // first: it times the constructor too
  const OpInputs& in_;
  const Contract& k_;
  bool bwd_;
  DualPolicy p_;
  const GemmTable& gemm_;
  FlceGeom g_;
  CeParams q_;
  const double *x_ = nullptr, *w_ = nullptr, *b_ = nullptr;
  AbsFloat xa_, wa_;
  bool logit_prod_exact_ = false;
  int sampled_ = 0;  // certification samples checked
  std::vector<char> x_zero_;  // rows of x that are all zeros
  std::vector<double> x_fin_max_;  // per row of x, the largest finite magnitude
  Buf<double> lm_;  // the chunk's logits (double)
  Buf<float> ls_;   // and their magnitude sums (float)
};

}  // namespace

void flce_fast_evaluate(const Case& c, const OpInputs& in, const Contract& k, bool bwd, RefResult& ref,
                        std::vector<OutputEnclosure>& out) {
  FlceFast(c, in, k, bwd).run(ref, out);
}

}  // namespace kv
