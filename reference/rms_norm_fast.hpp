// RMSNorm's reference and enclosure in one pass, fast. The results are those of the
// generic pass (ops/rms_norm.cpp's compute over DualPolicy), bit for bit: every element
// goes through the same Enc operations in the same order, only cheaper:
// - FastDualPolicy's acc() and mand() (reference/dual_fast.hpp), and fmul, which takes
//   the exact product of two exact values before operator* computes a radius it discards;
// - elements side by side in vector lanes in the common cases (lanes.inc,
//   rms_norm_lanes.inc: AVX2 where the CPU has it, else SSE2), where llama's two mandated
//   roundings collapse to one where x * rstd's enclosure lies inside one rounding cell of
//   x's dtype; other elements by the scalar code of rms_norm_fast_elems.hpp;
// - no per-element allocation or std::function; dW's per-chunk sums live in buffers
//   reused across waves of chunks, merged in chunk order as the generic pass merges them.
#pragma once
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) && defined(__SSE2__) && !defined(KV_RMS_LANES_ONE)
#include <immintrin.h>
#endif

#include "core/par.hpp"
#include "reference/rms_norm_fast_elems.hpp"

// The per-row code, once per instruction set.
#if defined(__x86_64__) && defined(__SSE2__) && !defined(KV_RMS_LANES_ONE)
namespace kv::rms_fast::sse2 {
#define KV_LANES_ISA 1
#include "reference/lanes.inc"
#include "reference/rms_norm_lanes.inc"
#undef KV_LANES_ISA
}  // namespace kv::rms_fast::sse2
#if defined(__GNUC__) && !defined(__clang__)
#define KV_RMS_FAST_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
namespace kv::rms_fast::avx2 {
#define KV_LANES_ISA 2
#include "reference/lanes.inc"
#include "reference/rms_norm_lanes.inc"
#undef KV_LANES_ISA
}  // namespace kv::rms_fast::avx2
#pragma GCC pop_options
#endif
#else
namespace kv::rms_fast::one {
#define KV_LANES_ISA 0
#include "reference/lanes.inc"
#include "reference/rms_norm_lanes.inc"
#undef KV_LANES_ISA
}  // namespace kv::rms_fast::one
#endif

namespace kv {

/// The lanes the fast pass runs on: best picks AVX2 where the CPU (and OS) has it, else
/// SSE2 (x86-64), else one lane (elsewhere, or built with KV_RMS_LANES_ONE); tests ask for
/// each.
enum class RmsLanes { best, one, sse2, avx2 };

inline bool rms_lanes_available(RmsLanes l) {
#if defined(__x86_64__) && defined(__SSE2__) && !defined(KV_RMS_LANES_ONE)
  if (l == RmsLanes::sse2 || l == RmsLanes::best) return true;
#ifdef KV_RMS_FAST_AVX2
  if (l == RmsLanes::avx2) return __builtin_cpu_supports("avx2");  // checks the OS saves the registers too
#endif
  return false;
#else
  return l == RmsLanes::one || l == RmsLanes::best;
#endif
}

namespace rms_fast {

template <DType X, bool L, DType A>
using FwdRow = void (*)(const FastDualPolicy&, const RmsParams&, int64_t, const double*, const std::vector<Dual>&,
                        const Cols&, bool, const RmsOut&, const RmsOut&);
template <DType X, bool L, DType A>
using BwdRow = void (*)(const FastDualPolicy&, const RmsParams&, int64_t, double, const std::vector<Dual>&, const Cols&,
                        bool, BwdBufs&, ColSums&, const RmsOut&);

/// The row functions of the lanes asked for (which must be available).
template <DType X, bool L, DType A>
std::pair<FwdRow<X, L, A>, BwdRow<X, L, A>> rows_for(RmsLanes l) {
  if (!rms_lanes_available(l)) throw std::logic_error("rms_norm fast pass: those lanes are not available here");
#if defined(__x86_64__) && defined(__SSE2__) && !defined(KV_RMS_LANES_ONE)
#ifdef KV_RMS_FAST_AVX2
  if (l == RmsLanes::avx2 || (l == RmsLanes::best && rms_lanes_available(RmsLanes::avx2)))
    return {&avx2::fwd_row<X, L, A>, &avx2::bwd_row<X, L, A>};
#endif
  return {&sse2::fwd_row<X, L, A>, &sse2::bwd_row<X, L, A>};
#else
  return {&one::fwd_row<X, L, A>, &one::bwd_row<X, L, A>};
#endif
}

template <DType X, bool L, DType A>
void fwd_all(const FastDualPolicy& p, const RmsParams& q, const RmsSource& d, const RmsOut& y, const RmsOut& rstd,
             RmsLanes lanes) {
  const auto fwd_row = rows_for<X, L, A>(lanes).first;
  const auto wp = rms_wprime(p, q, d.w.data());
  const int64_t n_pad = padded(q.n);
  const Cols cols(wp, n_pad);
  const bool vec = p.in.d == A;
  par_for(tbb::blocked_range<int64_t>(0, q.rows), [&](const tbb::blocked_range<int64_t>& rr) {
    std::vector<double> x(static_cast<size_t>(n_pad), 0.0);
    for (int64_t r = rr.begin(); r < rr.end(); ++r) {
      d.x_row(r, x.data());
      fwd_row(p, q, r, x.data(), wp, cols, vec, y, rstd);
    }
  });
}

/// A chunk's rows of dx where dx is not wanted (RmsOut with null buffers): each chunk
/// writes its rows here, row 0 first, and they are dropped.
struct DxScratch {
  std::vector<double> v, err, lo, hi;
  std::vector<uint8_t> unv, nan;
  explicit DxScratch(size_t n) : v(n), err(n), lo(n), hi(n), unv(n), nan(n) {}
  RmsOut out() { return {v.data(), err.data(), lo.data(), hi.data(), unv.data(), nan.data()}; }
};

/// dW's partials of kRmsDwChunkRows rows are computed a wave of chunks at a time and
/// merged into the running column sums in chunk order, as the generic pass merges them.
/// dx with null buffers: dW alone (the streamed runner's whole pass).
template <DType X, bool L, DType A>
void bwd_all(const FastDualPolicy& p, const RmsParams& q, const RmsSource& d, const RmsOut& dx, const RmsOut& dw,
             RmsLanes lanes) {
  const auto bwd_row = rows_for<X, L, A>(lanes).second;
  const auto wp = rms_wprime(p, q, d.w.data());
  const int64_t n = q.n, n_pad = padded(n), chunk = kRmsDwChunkRows, nchunks = (q.rows + chunk - 1) / chunk;
  const Cols cols(wp, n_pad);
  const bool vec = p.in.d == A;
  const int64_t wave = std::max<int64_t>(1, std::min<int64_t>(nchunks, 4 * tbb::this_task_arena::max_concurrency()));
  std::vector<ColSums> part(static_cast<size_t>(wave), ColSums(n_pad));
  std::vector<FastDualPolicy::Sum> total(static_cast<size_t>(n));
  for (int64_t w0 = 0; w0 < nchunks; w0 += wave) {
    const int64_t w1 = std::min(nchunks, w0 + wave);
    par_for(w0, w1, [&](int64_t c) {
      ColSums& sums = part[c - w0];
      sums.reset(n_pad);
      BwdBufs b(n_pad);
      std::optional<DxScratch> scratch;  // bwd_row writes row `row` at row * n
      if (!dx.v) scratch.emplace(static_cast<size_t>(chunk * n));
      const RmsOut out = scratch ? scratch->out() : dx;
      const int64_t row0 = scratch ? c * chunk : 0;
      for (int64_t r = c * chunk; r < std::min(q.rows, (c + 1) * chunk); ++r) {
        d.x_row(r, b.x.data());
        d.dy_row(r, b.dy.data());
        bwd_row(p, q, r - row0, d.rstd[r], wp, cols, vec, b, sums, out);
      }
    });
    par_for(tbb::blocked_range<int64_t>(0, n), [&](const tbb::blocked_range<int64_t>& jr) {
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
  // Declared rounding sites other than m in x's dtype take the generic pass.
  if (q.dw_product || (q.m_round_x && q.m_dtype != q.x)) return false;
  return q.x == DType::f32 || q.x == DType::f16 || q.x == DType::bf16;
}

/// The generic forward pass over DualPolicy{&k}, y and rstd put into y and rstd.
inline void rms_fwd_fast(const Contract& k, const RmsParams& q, const RmsSource& d, const RmsOut& y,
                         const RmsOut& rstd, RmsLanes lanes = RmsLanes::best) {
  const FastDualPolicy p(&k);
  rms_fast::dispatch(q, k.acc,
                     [&]<DType X, bool L, DType A>() { rms_fast::fwd_all<X, L, A>(p, q, d, y, rstd, lanes); });
}

/// The generic backward pass over DualPolicy{&k}, dx and dW put into dx and dw.
inline void rms_bwd_fast(const Contract& k, const RmsParams& q, const RmsSource& d, const RmsOut& dx,
                         const RmsOut& dw, RmsLanes lanes = RmsLanes::best) {
  const FastDualPolicy p(&k);
  rms_fast::dispatch(q, k.acc, [&]<DType X, bool L, DType A>() { rms_fast::bwd_all<X, L, A>(p, q, d, dx, dw, lanes); });
}

}  // namespace kv
