// The bounds and helpers of FLCE's one-pass reference (ops/flce_fast.cpp, whose header
// derives them): float magnitudes rounded up, the a-priori bounds of a sum of products
// (SumBound), an axis's contract (AxisContract), the accumulator's rounding (AccRound),
// a gradient sum's enclosure pair (GradSum), oneTBB tiling and per-phase timing.
#pragma once
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/contract.hpp"
#include "ops/op_base.hpp"
#include "reference/dual_policy.hpp"
#include "core/par.hpp"

namespace kv::flce_fast {

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
inline AbsFloat abs_float(const DoubleBuf& in) {
  AbsFloat r;
  r.a.resize(in.size());
  const int64_t n = static_cast<int64_t>(in.size()), chunk = 1 << 16;
  const int64_t nch = (n + chunk - 1) / chunk;
  std::vector<double> lo(static_cast<size_t>(nch), kInf), hi(static_cast<size_t>(nch), 0), fin(static_cast<size_t>(nch), 0);
  par_for(int64_t(0), nch, [&](int64_t c) {
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
inline double finite_max(const double* v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(v[i])) m = std::max(m, std::fabs(v[i]));
  return m;
}

/// Tiles a product over oneTBB: f(i0, i1, j0, j1) for tiles of `ti` x `tj`.
template <class F>
void tiles(int64_t ni, int64_t nj, int64_t ti, int64_t tj, F&& f) {
  const int64_t bi = (ni + ti - 1) / ti, bj = (nj + tj - 1) / tj;
  par_for(int64_t(0), bi * bj, [&](int64_t t) {
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

}  // namespace kv::flce_fast
