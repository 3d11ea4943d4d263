// RMSNorm's reference and enclosure in one pass, fast. The results are those of
// rms_fwd_into / rms_bwd_into over DualPolicy, bit for bit: every element goes through
// the same Enc operations in the same order, only cheaper:
// - FastDualPolicy's acc() and mand() (reference/dual_fast.hpp), and fmul, which takes
//   the exact product of two exact values before operator* computes a radius it discards;
// - elements side by side in SSE2 lanes in the common cases (reference/rms_norm_vec.hpp),
//   where llama's two mandated roundings collapse to one where x * rstd's enclosure lies
//   inside one rounding cell of x's dtype; other elements by the scalar code below;
// - no per-element allocation or std::function; dW's per-chunk sums live in buffers
//   reused across waves of chunks, merged in chunk order as the generic pass merges them.
#pragma once
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <vector>

#include "reference/dual_fast.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rms_norm_vec.hpp"

namespace kv {

namespace rms_fast {

using fast_detail::round_enc;

/// operator*(a, b), taking first the case of two exact values with significands of at
/// most 26 bits and a product in [2^-1000, 2^1000] (every product of two fp32/fp16/bf16
/// values): there operator* returns {a.m * b.m, 0} (product_exact's quick accept).
[[gnu::always_inline]] inline Enc fmul(const Enc& a, const Enc& b) {
  if (a.r == 0 && b.r == 0) {
    const double p = a.m * b.m;
    constexpr uint64_t low27 = (uint64_t(1) << 27) - 1;
    const double ap = std::fabs(p);
    if (((fast_detail::bits_of(a.m) | fast_detail::bits_of(b.m)) & low27) == 0 && ap >= 0x1p-1000 && ap <= 0x1p1000)
      return Enc{p, 0.0, a.unv || b.unv};
  }
  return a * b;
}

/// rms_rstd_row's operations (x_j^2 by fmul).
inline Dual rstd_row(const FastDualPolicy& p, const RmsParams& q, const double* x) {
  FastDualPolicy::Sum s;
  for (int64_t j = 0; j < q.n; ++j) {
    const Enc e = enc_exact(x[j]);
    const Enc t = fmul(e, e);
    s.add(Dual{t, p.in(t)});
  }
  return rms_rstd_of_sum(p, q, s);
}

// The scalar code: rms_fwd_row's and rms_bwd_row's operations on one element.

/// y_j.
template <DType X, bool L>
Dual fwd_elem(const FastDualPolicy& p, const Dual& rstd, double x, const Dual& w) {
  const Enc xe = enc_exact(x);
  Dual xr;
  if constexpr (L)
    xr = Dual{round_enc<X>(round_enc<DType::f32>(fmul(xe, rstd.ref))), round_enc<X>(round_enc<DType::f32>(fmul(xe, rstd.con)))};
  else
    xr = Dual{fmul(xe, rstd.ref), p.in(fmul(xe, rstd.con))};
  return Dual{fmul(xr.ref, w.ref), p.in(fmul(xr.con, w.con))};
}

/// m_j and the row sum's term acc(m_j x_j).
template <DType X>
void bwd_m_elem(const FastDualPolicy& p, bool m_round_x, double dy, double x, const Dual& w, Dual& m, Dual& term) {
  const Enc d = enc_exact(dy);
  const Enc mr = fmul(d, w.ref), mc = fmul(d, w.con);
  m = m_round_x ? Dual{round_enc<X>(mr), round_enc<X>(mc)} : Dual{mr, p.in(mc)};
  const Enc xe = enc_exact(x);
  term = Dual{fmul(m.ref, xe), p.in(fmul(m.con, xe))};
}

/// dx_j and dW's term acc(dy_j t_j).
template <DType X, bool L>
void bwd_dx_elem(const FastDualPolicy& p, const Enc& R, const Dual& c, double dy, double x, const Dual& m, Dual& dx,
                 Dual& g) {
  const Enc xe = enc_exact(x);
  const Enc ar = fmul(R, m.ref), ac = p.in(fmul(R, m.con));
  const Enc br = fmul(c.ref, xe), bc = p.in(fmul(c.con, xe));
  dx = Dual{ar - br, p.in(ac - bc)};
  Dual t;  // x_j * rstd: the same exact product on both sides, llama's roundings too
  if constexpr (L) {
    const Enc tt = round_enc<X>(round_enc<DType::f32>(fmul(xe, R)));
    t = Dual{tt, tt};
  } else {
    const Enc tt = fmul(xe, R);
    t = Dual{tt, p.in(tt)};
  }
  const Enc d = enc_exact(dy);
  g = Dual{fmul(d, t.ref), p.in(fmul(d, t.con))};
}

[[gnu::always_inline]] inline bool lean(const Enc& e) {
  return std::isfinite(e.m) && e.r > 0 && e.r < enc_detail::kInf && !e.unv;
}

inline int64_t padded(int64_t n) { return (n + lanes::W - 1) / lanes::W * lanes::W; }

/// One forward row: y to out, rstd to rstd_out. x has padded(n) entries.
template <DType X, bool L, DType A>
void fwd_row(const FastDualPolicy& p, const RmsParams& q, int64_t row, const double* x, const std::vector<Dual>& wp,
             const rms_vec::Cols& cols, bool vec, const RmsOut& out, const RmsOut& rstd_out) {
  const Dual rstd = rstd_row(p, q, x);
  rstd_out.put(row, rstd);
  const Enc &R = rstd.ref, &C = rstd.con;
  const int64_t n = q.n, n4 = n - n % lanes::W, base = row * n;
  int64_t j = 0;
  if constexpr (!L || X != DType::f32)
    if (vec && lean(R) && lean(C) && R.m > 0 && C.m > 0) {
      const double rho_r = rms_vec::collapse_rho(R), rho_c = rms_vec::collapse_rho(C);
      for (; j < n4; j += lanes::W) {
        const auto ok = rms_vec::fwd_lanes<X, L, A>(p.in, R, C, rho_r, rho_c, x, cols, j, out, base);
        if (!lanes::all(ok))
          for (int l = 0; l < lanes::W; ++l)
            if (!(lanes::lane_bits(ok) >> l & 1)) out.put(base + j + l, fwd_elem<X, L>(p, rstd, x[j + l], wp[j + l]));
      }
    }
  for (; j < n; ++j) out.put(base + j, fwd_elem<X, L>(p, rstd, x[j], wp[j]));
}

/// One backward row (b.x, b.dy hold it): dx to out, dW's terms added to sums.
template <DType X, bool L, DType A>
void bwd_row(const FastDualPolicy& p, const RmsParams& q, int64_t row, double rs, const std::vector<Dual>& wp,
             const rms_vec::Cols& cols, bool vec, rms_vec::BwdBufs& b, rms_vec::ColSums& sums, const RmsOut& out) {
  const int64_t n = q.n, n4 = n - n % lanes::W, base = row * n;
  auto scalar1 = [&](int64_t j) {
    Dual m, t;
    bwd_m_elem<X>(p, q.m_round_x, b.dy[j], b.x[j], wp[j], m, t);
    b.mrm[j] = m.ref.m, b.mrr[j] = m.ref.r, b.mru[j] = m.ref.unv, b.mcm[j] = m.con.m, b.mcr[j] = m.con.r;
    b.mcu[j] = m.con.unv, b.trm[j] = t.ref.m, b.trr[j] = t.ref.r, b.tru[j] = t.ref.unv, b.tcm[j] = t.con.m;
    b.tcr[j] = t.con.r, b.tcu[j] = t.con.unv, b.ok[j] = 0;
  };
  int64_t j = 0;
  if (vec)
    for (; j < n4; j += lanes::W) {
      const auto ok = rms_vec::bwd_pass1<X, L, A>(p.in, q.m_round_x, cols, b, j);
      if (!lanes::all(ok))
        for (int l = 0; l < lanes::W; ++l)
          if (!(lanes::lane_bits(ok) >> l & 1)) scalar1(j + l);
    }
  for (; j < n; ++j) scalar1(j);
  FastDualPolicy::Sum s;
  for (j = 0; j < n; ++j)
    s.add(Dual{Enc{b.trm[j], b.trr[j], b.tru[j] != 0}, Enc{b.tcm[j], b.tcr[j], b.tcu[j] != 0}});
  const Dual c = rms_bwd_c(p, q, p.c(rs), p.finish(s, "row"));
  const Enc R = enc_exact(rs);
  auto scalar2 = [&](int64_t j) {
    const Dual m{Enc{b.mrm[j], b.mrr[j], b.mru[j] != 0}, Enc{b.mcm[j], b.mcr[j], b.mcu[j] != 0}};
    Dual dx, g;
    bwd_dx_elem<X, L>(p, R, c, b.dy[j], b.x[j], m, dx, g);
    out.put(base + j, dx);
    sums.add(j, g);
  };
  j = 0;
  if (vec && lean(c.ref) && lean(c.con) && std::isfinite(rs) && rs != 0 &&
      (fast_detail::bits_of(rs) & ((uint64_t(1) << 27) - 1)) == 0)
    for (; j < n4; j += lanes::W) {
      const auto ok = rms_vec::bwd_pass2<X, L, A>(p.in, rs, c, b, sums, j, out, base);
      if (!lanes::all(ok))
        for (int l = 0; l < lanes::W; ++l)
          if (!(lanes::lane_bits(ok) >> l & 1)) scalar2(j + l);
    }
  for (; j < n; ++j) scalar2(j);
  ++sums.n;
}

template <DType X, bool L, DType A>
void fwd_all(const FastDualPolicy& p, const RmsParams& q, const RmsSource& d, const RmsOut& y, const RmsOut& rstd) {
  const auto wp = rms_wprime(p, q, d.w.data());
  const int64_t n_pad = padded(q.n);
  const rms_vec::Cols cols(wp, n_pad);
  const bool vec = p.in.d == A;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, q.rows), [&](const tbb::blocked_range<int64_t>& rr) {
    std::vector<double> x(static_cast<size_t>(n_pad), 0.0);
    for (int64_t r = rr.begin(); r < rr.end(); ++r) {
      d.x_row(r, x.data());
      fwd_row<X, L, A>(p, q, r, x.data(), wp, cols, vec, y, rstd);
    }
  });
}

/// dW's partials of kRmsDwChunkRows rows are computed a wave of chunks at a time and
/// merged into the running column sums in chunk order, as the generic pass merges them.
template <DType X, bool L, DType A>
void bwd_all(const FastDualPolicy& p, const RmsParams& q, const RmsSource& d, const RmsOut& dx, const RmsOut& dw) {
  const auto wp = rms_wprime(p, q, d.w.data());
  const int64_t n = q.n, n_pad = padded(n), chunk = kRmsDwChunkRows, nchunks = (q.rows + chunk - 1) / chunk;
  const rms_vec::Cols cols(wp, n_pad);
  const bool vec = p.in.d == A;
  const int64_t wave = std::max<int64_t>(1, std::min<int64_t>(nchunks, 4 * tbb::this_task_arena::max_concurrency()));
  std::vector<rms_vec::ColSums> part(static_cast<size_t>(wave), rms_vec::ColSums(n_pad));
  std::vector<FastDualPolicy::Sum> total(static_cast<size_t>(n));
  for (int64_t w0 = 0; w0 < nchunks; w0 += wave) {
    const int64_t w1 = std::min(nchunks, w0 + wave);
    tbb::parallel_for(w0, w1, [&](int64_t c) {
      rms_vec::ColSums& sums = part[c - w0];
      sums.reset(n_pad);
      rms_vec::BwdBufs b(n_pad);
      for (int64_t r = c * chunk; r < std::min(q.rows, (c + 1) * chunk); ++r) {
        d.x_row(r, b.x.data());
        d.dy_row(r, b.dy.data());
        bwd_row<X, L, A>(p, q, r, d.rstd[r], wp, cols, vec, b, sums, dx);
      }
    });
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n), [&](const tbb::blocked_range<int64_t>& jr) {
      for (int64_t j = jr.begin(); j < jr.end(); ++j)
        for (int64_t c = w0; c < w1; ++c) total[j].merge(part[c - w0].column(j));
    });
  }
  for (int64_t j = 0; j < n; ++j) dw.put(j, p.finish(total[j], "rows"));
}

/// Calls f.template operator()<X, L, A>() for q's x dtype and mode and the contract's
/// accumulator A (fp32 or x's dtype; the vector code is off for another).
template <class F>
void dispatch(const RmsParams& q, DType acc, F&& f) {
  auto by_acc = [&](auto xd, auto l) {
    constexpr DType X = decltype(xd)::value;
    constexpr bool L = decltype(l)::value;
    if (acc == X) f.template operator()<X, L, X>();
    else f.template operator()<X, L, DType::f32>();
  };
  auto by_mode = [&](auto xd) {
    if (q.mode == RmsMode::llama) by_acc(xd, std::true_type{});
    else by_acc(xd, std::false_type{});
  };
  switch (q.x) {
    case DType::f32: by_mode(std::integral_constant<DType, DType::f32>{}); break;
    case DType::f16: by_mode(std::integral_constant<DType, DType::f16>{}); break;
    case DType::bf16: by_mode(std::integral_constant<DType, DType::bf16>{}); break;
    default: throw std::logic_error("rms_norm fast pass: x is not a float dtype");
  }
}

}  // namespace rms_fast

/// Whether the fast pass applies (x in a float format); otherwise run the generic one.
inline bool rms_fast_applies(const RmsParams& q) {
  return q.x == DType::f32 || q.x == DType::f16 || q.x == DType::bf16;
}

/// rms_fwd_into(DualPolicy{&k}, q, d, true, sink) with y and rstd put into y and rstd.
inline void rms_fwd_fast(const Contract& k, const RmsParams& q, const RmsSource& d, const RmsOut& y,
                         const RmsOut& rstd) {
  const FastDualPolicy p(&k);
  rms_fast::dispatch(q, k.acc, [&]<DType X, bool L, DType A>() { rms_fast::fwd_all<X, L, A>(p, q, d, y, rstd); });
}

/// rms_bwd_into(DualPolicy{&k}, q, d, true, sink) with dx and dW put into dx and dw.
inline void rms_bwd_fast(const Contract& k, const RmsParams& q, const RmsSource& d, const RmsOut& dx,
                         const RmsOut& dw) {
  const FastDualPolicy p(&k);
  rms_fast::dispatch(q, k.acc, [&]<DType X, bool L, DType A>() { rms_fast::bwd_all<X, L, A>(p, q, d, dx, dw); });
}

}  // namespace kv
