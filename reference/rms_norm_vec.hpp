// The RMSNorm fast pass's row kernels on lanes (reference/lanes.hpp). Each lane
// computes exactly what the scalar element code of rms_norm_fast.hpp computes (the
// generic DualPolicy operations); a lane whose operations leave the cases written here
// (a zero or non-finite value, a product that is not exact where one is assumed, a value
// outside the normal range of a rounding's dtype, overflow) is cleared in its mask and
// redone by the scalar code. Template parameters: X the dtype of x (the mandated
// roundings), L llama mode, A the contract's accumulator dtype (AccIn's d).
#pragma once
#include <stdexcept>

#include "reference/lanes.hpp"

namespace kv {

/// One output tensor's buffers: the reference value and its error bound, the enclosure
/// under the contract and its unverifiable flag (put_ref / put_enc of ops/op_base.hpp).
struct RmsOut {
  double *v, *err, *lo, *hi;
  uint8_t* unv;
  void put(int64_t i, const Dual& e) const {
    v[i] = e.ref.m, err[i] = e.ref.r;
    lo[i] = enc_lo(e.con), hi[i] = enc_hi(e.con), unv[i] = e.con.unv;
  }
};

namespace rms_vec {

using namespace kv::lanes;
using fast_detail::AccIn;

/// Per-column W' = offset + w, both halves, as lanes: the vector kernels take columns
/// whose W' halves are short exact nonzero values (r = 0, at most 26 bits, finite, not
/// unverifiable: lanes.hpp's terms); `ok` marks them.
struct Cols {
  std::vector<double> wr, wc;
  std::vector<int64_t> ok;
  Cols(const std::vector<Dual>& wp, int64_t n_pad) : wr(n_pad, 0.0), wc(n_pad, 0.0), ok(n_pad, 0) {
    auto usable = [](const Enc& e) {
      return e.r == 0 && e.m != 0 && std::isfinite(e.m) && !e.unv &&
             (fast_detail::bits_of(e.m) & ((uint64_t(1) << 27) - 1)) == 0;
    };
    for (size_t j = 0; j < wp.size(); ++j) {
      wr[j] = wp[j].ref.m, wc[j] = wp[j].con.m;
      ok[j] = usable(wp[j].ref) && usable(wp[j].con) ? -1 : 0;
    }
  }
};

/// operator*({am, ar}, {b, 0}) (or the mirror order) for finite am, 0 <= ar < inf and a
/// short exact nonzero b: the radius (the exact-values case where ar = 0).
[[gnu::always_inline]] inline vd mul_r(vd am, vd ar, vd b, vd p, vm& ok, bool b_first) {
  const vm exact = ar == 0;
  vd r = splat(0.0);
  if (any(~exact)) r = mul_by_exact_r(ar, b, p);
  if (any(exact)) {
    vm ok_e = ok;
    r = sel(exact, b_first ? mul_exact_r(b, am, p, ok_e) : mul_exact_r(am, b, p, ok_e), r);
    ok &= ok_e | ~exact;
  }
  return r;
}

/// Llama's xr = RN_X(RN_fp32(x * s)) on lanes where it is one value Q of X, for the
/// enclosure s = {sm, sr} (finite, sm > 0, 0 < sr < inf, not unverifiable); ok is cleared
/// on the other lanes.
///
/// t = c(x) * s is {m, r} with m = RN(x sm) and r operator*'s radius. Let Q = RN_X(m),
/// normal in X, and h half the distance from Q to its nearer neighbour in X (ulp_X(Q)/2,
/// or ulp_X(Q)/4 where |Q| is a power of 2: the neighbour toward zero is nearer), so every
/// point within h of Q rounds to Q in X. Let delta = |m - Q| + r (m - Q is exact,
/// Sterbenz). If delta + ulp_32(Q) < h, the generic roundings give exactly {Q, 0}:
/// - every point of [m - r, m + r] is within h - ulp_32(Q) of Q. The fp32 rounding (its
///   quick exit, or RN_32 of enc_lo / enc_hi) moves a point by at most ulp_32(Q)/2 (a
///   point above Q stays below the next binade, Q + h < 2^(e_Q + 1), so its fp32 ulp is at
///   most ulp_32(Q)) plus enc_lo / enc_hi's outward steps, at most 2^-51 |m|;
/// - so the fp32 result is {Q32, 0} or [a, b], fp32 endpoints within h - ulp_32(Q)/2 +
///   2^-51 |m| of Q. b - a is exact (Sterbenz), so are (b - a)/2 and mid = a + (b - a)/2
///   (at most 26 bits), and the rounding to X looks at mid (quick exit) or at RN_X of
///   enc_lo / enc_hi of {mid, rad}, rad = (b - a)/2 (1 + 2^-50) rounded up: points within
///   max(|a - Q|, |b - Q|) (1 + 2^-48) + 2^-1073 of Q, still within h of Q since
///   ulp_32(Q)/2 >= 2^-25 |Q| exceeds every such 2^-48 |Q| term;
/// - each of those points rounds to Q: the quick exit gives {Q, 0}, equal endpoints
///   {Q, 0} too.
/// The test below uses r' = RN(RN(|x| rho) + 2^-1000) >= r with rho >= (sr + 2^-52 sm)
/// (1 + 2^-45): operator*'s r = rup(|x| sr + |m| 2^-53 + 2^-1074) (its other terms are
/// zeros) is at most |x| (sr + 2^-52 sm)(1 + 2^-48) + 2^-1070 (six RN steps of 2^-53 each,
/// rup's 2^-50, |m| <= |x| sm (1 + 2^-53); Higham, Accuracy and Stability, Lemma 3.1), and
/// RN(RN(|x| rho) + 2^-1000) exceeds that (the 2^-1000 also covers underflow). It requires
/// RN(|m - Q| + r') < h - 2 ulp_32(Q): then delta + ulp_32(Q) <= RN(...)(1 + 2^-52) +
/// ulp_32(Q) < h, as ulp_32(Q) = 2^(p_X - 24) ulp_X(Q) >= 2^-16 ulp_X(Q) > 2^-52 h.
template <DType X>
[[gnu::always_inline]] inline vd collapse(vd x, vd ax, double sm, double rho, vm& ok) {
  static_assert(X == DType::bf16 || X == DType::f16);
  using F = fast_detail::Fmt<X>;
  const vd m = x * sm;
  const vd am = vabs(m);
  ok &= (am >= F::min_normal) & (am <= F::max_finite);  // Q normal in X; rejects x = 0, NaN
  const vd Q = rne<X>(m, ok);
  // (h - 2 ulp_32(Q)) / ulp_X(Q), as h is ulp_X(Q)/2 or, for |Q| a power of 2, ulp_X(Q)/4.
  constexpr double k32 = X == DType::bf16 ? 0x1p-15 : 0x1p-12;
  const vm pow2 = and_bits(Q, 0xFFF0000000000000ull) == Q;
  const vd cell = sel(pow2, splat(0.25 - k32), splat(0.5 - k32));
  ok &= vabs(m - Q) + (ax * rho + 0x1p-1000) < ulp_normal<X>(Q) * cell;
  return Q;
}

/// rho of collapse() for the enclosure s (sm > 0).
inline double collapse_rho(const Enc& s) { return (s.r + s.m * 0x1p-52) * (1.0 + 0x1p-45); }

/// Output lanes: the reference {vm, vr} and the enclosure {cm, cr} (not unverifiable).
[[gnu::always_inline]] inline void put(const RmsOut& o, int64_t i, vd vm_, vd vr, vd cm, vd cr) {
  store(o.v + i, vm_);
  store(o.err + i, vr);
  store(o.lo + i, lo_of(cm, cr));
  store(o.hi + i, hi_of(cm, cr));
  std::memset(o.unv + i, 0, W);
}

/// Forward, lanes j.. of one row: y written to o at base + j; lanes cleared in the
/// returned mask are to be redone by the scalar code. R, C: rstd's halves (finite,
/// m > 0, 0 < r < inf, not unverifiable).
template <DType X, bool L, DType A>
  requires(!L || X != DType::f32)  // llama in fp32: the scalar code (the fp32 enclosure rarely collapses)
[[gnu::always_inline]] inline vm fwd_lanes(const AccIn& in, const Enc& R, const Enc& C, double rho_r, double rho_c,
                                           const double* x, const Cols& w, int64_t j, const RmsOut& o, int64_t base) {
  const vd xv = load(x + j), ax = vabs(xv);
  const vd wr = load(w.wr.data() + j), wc = load(w.wc.data() + j);
  vm ok = load_mask(w.ok.data() + j) & finite_nonzero(xv);
  if constexpr (L) {
    // Both halves of xr collapse to single values Q (short): y = Q W' is exact.
    const vd qr = collapse<X>(xv, ax, R.m, rho_r, ok), qc = collapse<X>(xv, ax, C.m, rho_c, ok);
    const vd yr = qr * wr, yc = qc * wc;
    mul_short(yr, ok);
    mul_short(yc, ok);
    put(o, base + j, yr, splat(0.0), yc, acc_in0<A>(in, yc, ok));
  } else {
    // xr = acc(x * rstd), radii positive; y = acc(xr * W').
    const vd xm = xv * R.m, xr = mul_by_exact_r(splat(R.r), xv, xm);
    const vd cm = xv * C.m, cr = acc_in_pos(in, cm, mul_by_exact_r(splat(C.r), xv, cm), ok);
    ok &= finite(xm) & finite(xr);
    const vd yr = xm * wr, yrr = mul_by_exact_r(xr, wr, yr);
    const vd yc = cm * wc, ycr = acc_in_pos(in, yc, mul_by_exact_r(cr, wc, yc), ok);
    ok &= finite(yr) & finite(yrr);
    put(o, base + j, yr, yrr, yc, ycr);
  }
  return ok;
}

/// m: m_j; t: the row sum's terms; g: dW's terms; r/c the reference and contract halves
/// (value m, radius r, unverifiable flag u: only scalar-computed elements can carry one).
struct BwdBufs {
  std::vector<double> x, dy, mrm, mrr, mcm, mcr, trm, trr, tcm, tcr;
  std::vector<uint8_t> mru, mcu, tru, tcu;
  std::vector<int64_t> ok;  // lanes the vector code of pass 1 took
  explicit BwdBufs(int64_t n_pad) {
    for (auto* v : {&x, &dy, &mrm, &mrr, &mcm, &mcr, &trm, &trr, &tcm, &tcr}) v->assign(static_cast<size_t>(n_pad), 0.0);
    for (auto* v : {&mru, &mcu, &tru, &tcu}) v->assign(static_cast<size_t>(n_pad), 0);
    ok.assign(static_cast<size_t>(n_pad), 0);
  }
};

/// dW's per-chunk column sums, both halves (h = 0 reference, 1 contract), side by side:
/// EncSum::add's operations on lanes (EncSum::from_state turns a column back into an
/// EncSum). Every column gets one term per row. The two halves' terms acc(dy t) have the
/// same value (c(dy) times t's value, which both halves share: llama's roundings act on
/// the same exact product, acc() keeps values), so their running sums and TwoSum errors
/// are the same numbers and are kept once; add() checks that.
struct ColSums {
  std::vector<double> m, err, r[2], abs[2];
  std::vector<uint8_t> unv[2];
  int64_t n = 0;  // terms added to every column
  explicit ColSums(int64_t n_pad) { reset(n_pad); }
  void reset(int64_t n_pad) {
    for (auto* v : {&m, &err, &r[0], &r[1], &abs[0], &abs[1]}) v->assign(static_cast<size_t>(n_pad), 0.0);
    for (auto* v : {&unv[0], &unv[1]}) v->assign(static_cast<size_t>(n_pad), 0);
    n = 0;
  }
  /// EncSum::add of t.ref and t.con to column j's halves.
  void add(int64_t j, const Dual& t) {
    if (fast_detail::bits_of(t.ref.m) != fast_detail::bits_of(t.con.m))
      throw std::logic_error("rms_norm fast pass: dW term values differ between the halves");
    const double s = m[j] + t.ref.m;
    err[j] += std::fabs(two_sum_err(m[j], t.ref.m, s));
    m[j] = s;
    const Enc* h[2] = {&t.ref, &t.con};
    for (int k = 0; k < 2; ++k) {
      r[k][j] += h[k]->r;
      abs[k][j] += std::fabs(h[k]->m) + h[k]->r;
      unv[k][j] |= h[k]->unv ? 1 : 0;
    }
  }
  /// The same on lanes j.. for the terms {tm, tr0} and {tm, tr1}, on the lanes set in ok
  /// (the others unchanged).
  [[gnu::always_inline]] void add(int64_t j, vd tm, vd tr0, vd tr1, vm ok) {
    double *M = m.data() + j, *E = err.data() + j, *R0 = r[0].data() + j, *R1 = r[1].data() + j;
    double *B0 = abs[0].data() + j, *B1 = abs[1].data() + j;
    const vd s0 = load(M), sum = s0 + tm, e = load(E) + vabs(two_sum_err(s0, tm, sum));
    const vd r0 = load(R0) + tr0, r1 = load(R1) + tr1, b0 = load(B0) + (vabs(tm) + tr0), b1 = load(B1) + (vabs(tm) + tr1);
    if (all(ok)) {
      store(M, sum), store(E, e), store(R0, r0), store(R1, r1), store(B0, b0), store(B1, b1);
    } else {
      store(M, sel(ok, sum, s0)), store(E, sel(ok, e, load(E))), store(R0, sel(ok, r0, load(R0)));
      store(R1, sel(ok, r1, load(R1))), store(B0, sel(ok, b0, load(B0))), store(B1, sel(ok, b1, load(B1)));
    }
  }
  DualPolicy::Sum column(int64_t j) const {
    auto half = [&](int h) { return EncSum::from_state(m[j], r[h][j], err[j], abs[h][j], n, unv[h][j] != 0); };
    return DualPolicy::Sum{half(0), half(1)};
  }
};

/// Backward pass 1, lanes j..: m_j = dy_j W'_j (rounded to X, or acc()), and the row sum's
/// term acc(m_j x_j), both halves, into the buffers; returns the lanes taken.
template <DType X, bool L, DType A>
[[gnu::always_inline]] inline vm bwd_pass1(const AccIn& in, bool m_round_x, const Cols& w, BwdBufs& b, int64_t j) {
  const vd d = load(b.dy.data() + j), xv = load(b.x.data() + j);
  const vd wr = load(w.wr.data() + j), wc = load(w.wc.data() + j);
  vm ok = load_mask(w.ok.data() + j) & finite_nonzero(d) & finite_nonzero(xv);
  // c(dy) * W': short exact values, an exact product.
  const vd pr = d * wr, pc = d * wc;
  mul_short(pr, ok);
  mul_short(pc, ok);
  vd mrm = pr, mcm = pc, mcr = splat(0.0);
  if (m_round_x) mrm = rne<X>(pr, ok), mcm = rne<X>(pc, ok);  // enc_round_to of an exact value
  else mcr = acc_in0<A>(in, pc, ok);
  // acc(m * c(x)): m has radius 0 (reference) or mcr.
  const vd tr = mrm * xv, tc = mcm * xv;
  const vd trr = mul_exact_r(mrm, xv, tr, ok);
  // Where W' has the same value on both halves (the usual case), so has the product.
  const vd tcr0 = all((mcm == mrm) & (mcr == 0)) ? trr : mul_r(mcm, mcr, xv, tc, ok, false);
  const vd tcr = acc_in<A>(in, tc, tcr0, ok);
  store(b.mrm.data() + j, mrm), store(b.mrr.data() + j, splat(0.0)), store(b.mcm.data() + j, mcm);
  store(b.mcr.data() + j, mcr), store(b.trm.data() + j, tr), store(b.trr.data() + j, trr);
  store(b.tcm.data() + j, tc), store(b.tcr.data() + j, tcr);
  store_mask(b.ok.data() + j, ok);
  for (auto* u : {&b.mru, &b.mcu, &b.tru, &b.tcu}) std::memset(u->data() + j, 0, W);
  return ok;
}

/// Backward pass 2, lanes j..: dx = acc(acc(rstd m) - acc(c x)) written to o, and dW's
/// term acc(dy t), t = x rstd (llama: rounded to fp32, then X), added to sums. c: the row
/// constant's halves (finite, 0 < r < inf, not unverifiable); rs the saved rstd (short,
/// finite, nonzero). Returns the lanes taken (pass 1's lanes only); the sums are left
/// unchanged on the others.
template <DType X, bool L, DType A>
[[gnu::always_inline]] inline vm bwd_pass2(const AccIn& in, double rs, const Dual& c, BwdBufs& b, ColSums& sums,
                                           int64_t j, const RmsOut& o, int64_t base) {
  const vd xv = load(b.x.data() + j), d = load(b.dy.data() + j);
  const vd mrm = load(b.mrm.data() + j), mcm = load(b.mcm.data() + j), mcr = load(b.mcr.data() + j);
  vm ok = load_mask(b.ok.data() + j);
  const vd R = splat(rs);
  // a = acc(rstd * m)
  const vd arm = R * mrm, arr = mul_exact_r(R, mrm, arm, ok);
  const vd acm = R * mcm;
  const vd acr0 = all((mcm == mrm) & (mcr == 0)) ? arr : mul_r(mcm, mcr, R, acm, ok, true);  // as in pass 1
  const vd acr = acc_in<A>(in, acm, acr0, ok);
  // b = acc(c * x)
  const vd brm = c.ref.m * xv, brr = mul_by_exact_r(splat(c.ref.r), xv, brm);
  const vd bcm = c.con.m * xv, bcr = acc_in_pos(in, bcm, mul_by_exact_r(splat(c.con.r), xv, bcm), ok);
  // dx = acc(a + (-b)): operator+ with TwoSum's error (Knuth), then acc().
  const vd nbr = -brm, dxm = arm + nbr, er = vabs(two_sum_err(arm, nbr, dxm));
  const vd dxr = sel((arr == 0) & (brr == 0) & (er == 0), splat(0.0), rup(arr + brr + er));
  const vd nbc = -bcm, dcm = acm + nbc, ec = vabs(two_sum_err(acm, nbc, dcm));
  const vd dcr = acc_in<A>(in, dcm, sel((acr == 0) & (bcr == 0) & (ec == 0), splat(0.0), rup(acr + bcr + ec)), ok);
  ok &= finite(dxm) & finite(dxr);
  put(o, base + j, dxm, dxr, dcm, dcr);
  // dW's term: t = x rstd, an exact product of short values.
  const vd tp = xv * R;
  mul_short(tp, ok);
  vd g, grr, gcr;
  if constexpr (L) {
    const vd qb = rne<X>(rne<DType::f32>(tp, ok), ok);  // short, t's value on both halves
    g = d * qb;
    mul_short(g, ok);
    grr = splat(0.0);
    gcr = acc_in0<A>(in, g, ok);
  } else {
    const vd tcr = acc_in0<A>(in, tp, ok);
    g = d * tp;
    grr = mul_exact_r(d, tp, g, ok);
    gcr = acc_in<A>(in, g, mul_r(tp, tcr, d, g, ok, true), ok);
  }
  // Only now is ok final: the scalar code adds the terms of the other lanes.
  sums.add(j, g, grr, gcr, ok);
  return ok;
}

}  // namespace rms_vec
}  // namespace kv
