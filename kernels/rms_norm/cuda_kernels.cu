// CUDA RMSNorm, forward and backward. A team of wpr warps owns a row (cuda_launch.hpp):
// each lane sums its chunks serially (16-byte accesses where aligned, element accesses
// otherwise, the same order either way), then a shuffle tree in each warp and a tree
// across the team's warps: the reduction shape the contract declares (row_reduction with
// P = 32*wpr threads). A lane keeps its first chunks in registers between the sum and the
// second pass, so x (and dy) are read from global memory once. The x dtype is a template
// parameter (also the compute dtype of mode none); the other tensors have runtime dtypes.
// bwd: each team is a dW program over a contiguous chunk of rows, its fp32 partials in
// registers (in its workspace row for chunks past the registers); the second stage
// (cuda_rows.cu) sums the programs' partials in program order, or reads the atomic sums.
#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/mutant.cuh"
#include "kernels/rms_norm/cuda_launch.hpp"

namespace kv::rmscuda {

using namespace kv::rowcuda;

namespace {

/// Rounds to the compute dtype in mode none; identity otherwise.
template <typename X>
__device__ __forceinline__ float cr(float v, bool none) {
  return none ? rnd<X>(v) : v;
}

/// A team's sum: shuffle tree in each warp, then across the team's warps (each warp's
/// total at red[warp]; every warp of the block calls it, the barriers are the block's).
/// Every lane of the team returns the total.
template <typename X>
__device__ float team_sum(float v, bool none, const Team& t, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int off = KV_MUTANT(cu_shfl_short) ? 8 : 16; off > 0; off >>= 1)
    v = cr<X>(v + __shfl_xor_sync(0xffffffffu, v, off), none);
  if (t.wpr == 1) return v;
  if (!KV_MUTANT(cu_barrier_war)) __syncthreads();  // red[] may still be read from the previous call
  if (lane == 0) red[warp] = v;
  if (!KV_MUTANT(cu_barrier_raw)) __syncthreads();
  v = lane < t.wpr - KV_MUTANT(cu_last_warp) ? red[t.id * t.wpr + lane] : 0.0f;
  for (int off = 16; off > 0; off >>= 1) v = cr<X>(v + __shfl_xor_sync(0xffffffffu, v, off), none);
  return v;
}

/// M: the mode (a template parameter: no per-element tests of it). F: every chunk whole
/// and x, y (in x's dtype) and w aligned for vector accesses: no element paths, which
/// would take registers (FwdArgs::fast).
template <typename X, int C, int M, bool F>
__global__ void __launch_bounds__(C == 2 ? 1024 : 256, 1) fwd_kernel_t(FwdArgs a) {
  constexpr int V = kV<X>;
  constexpr bool none = M == Mode::none, llama = M == Mode::llama;
  __shared__ float red[32];
  const Team t(a.wpr);
  const int nch = chunks<V>(a.n);
  const int64_t rows = a.rows - KV_MUTANT(cu_fwd_last_row), nsq = a.n - KV_MUTANT(cu_sq_tail);
  const float offset = KV_MUTANT(cu_offset_dropped) ? 0.0f : a.offset;
  Mat w = a.w;
  if (KV_MUTANT(cu_w_stride_ignored)) w.cs = 1, w.vec = 0;
  // Adds the squares of a chunk's elements (those before nsq) to acc, in order.
  auto squares = [&](const uint4& raw, int c, int cnt, float& acc) {
    float v[V];
    unpack_all<X>(raw, v);
    const int64_t left = nsq - static_cast<int64_t>(c) * V;
    for_elems<V>(left < cnt ? static_cast<int>(left) : cnt,
                 [&](int i) { acc = none ? rnd<X>(acc + rnd<X>(v[i] * v[i])) : acc + v[i] * v[i]; });
  };
  auto count = [&](int c) { return F ? V : chunk_count<V>(a.n, c); };
  auto load_x = [&](int64_t row, int c, int cnt) {
    if constexpr (F) return *reinterpret_cast<const uint4*>(static_cast<const X*>(a.x.base) + row * a.x.rs + c * V);
    return load_raw<X>(a.x, row, static_cast<int64_t>(c) * V, cnt);
  };
  auto out = [&](const uint4& raw, int64_t row, int c, int cnt, float rstd) {
    float wv[V], y[V];
    if constexpr (F) load_vec<V>(w, static_cast<int64_t>(c) * V, wv);
    else load_any<V>(w, 0, static_cast<int64_t>(c) * V, cnt, wv);
    unpack_all<X>(raw, y);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float wp = cr<X>(__fadd_rn(offset, wv[i]), none);
      float xn = cr<X>(__fmul_rn(y[i], rstd), none);
      if (llama && !KV_MUTANT(cu_llama_unrounded)) xn = rnd<X>(xn);
      y[i] = cr<X>(__fmul_rn(xn, wp), none);
      if (KV_MUTANT(cu_y_rz)) y[i] = rz_any(a.y.dtype, y[i]);
    }
    if constexpr (F) return store_vec<X>(static_cast<X*>(a.y.base) + row * a.y.rs + c * V, y);
    if (a.y.dtype == kDT<X>) store_chunk<X>(a.y, row, static_cast<int64_t>(c) * V, cnt, y);
    else store_any<V>(a.y, row, static_cast<int64_t>(c) * V, cnt, y);
  };
  // A group is t.count rows, one per team; a team past the last row reads the group's first
  // row and stores nothing.
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * t.count; g < rows; g += static_cast<int64_t>(gridDim.x) * t.count) {
    const bool ok = g + t.id < rows;
    const int64_t row = ok ? g + t.id : g;
    uint4 raw[C];
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = t.lane + k * t.P;
      if (c < nch) raw[k] = load_x(row, c, count(c));
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = t.lane + k * t.P;
      if (c < nch) squares(raw[k], c, count(c), acc);
    }
    for (int c = t.lane + C * t.P; c < nch; c += t.P) {  // past the registers
      const int cnt = count(c);
      squares(load_x(row, c, cnt), c, cnt, acc);
    }
    const float total = team_sum<X>(acc, none, t, red);
    const float ms = cr<X>(total / static_cast<float>(a.n), none);
    float rstd = cr<X>(rsqrtf(cr<X>(ms + (KV_MUTANT(cu_eps_after_rsqrt) ? 0.0f : a.eps), none)), none);
    if (KV_MUTANT(cu_eps_after_rsqrt)) rstd = cr<X>(rstd + a.eps, none);
    if (!ok) continue;
    if (t.lane == 0) st_any(a.rstd.base, a.rstd.dtype, row * a.rstd.rs, rstd);
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = t.lane + k * t.P;
      if (c < nch) out(raw[k], row, c, count(c), rstd);
    }
    for (int c = t.lane + C * t.P; c < nch; c += t.P) {  // read again (L2): y may share x's storage
      const int cnt = count(c);
      out(load_x(row, c, cnt), row, c, cnt, rstd);
    }
  }
}

/// m = dy * W' at element i of a chunk, W' = offset + w in the compute dtype, m rounded per
/// m_rounding (one rounding of the exact product to x's dtype, or a compute-dtype product).
template <typename X, bool MR>
__device__ __forceinline__ float grad_m(const BwdArgs& a, float w, float dyv, bool none) {
  const float wp = cr<X>(__fadd_rn(a.offset, w), none);
  if (KV_MUTANT(cu_m_double_rounding) && MR) return rnd<X>(__fmul_rn(dyv, wp));
  return MR && !KV_MUTANT(cu_m_rounding_ignored)
             ? rnd_from_double<X>(static_cast<double>(dyv) * static_cast<double>(wp))
             : cr<X>(__fmul_rn(dyv, wp), none);
}

/// Adds the m*x terms of W elements at j0 (cnt of them) to acc in order (MR: m_rounding is
/// x_dtype).
template <typename X, bool MR, int W>
__device__ __forceinline__ void add_terms(const BwdArgs& a, bool none, int64_t j0, int cnt, const float (&dy)[W],
                                          const float (&x)[W], float& acc) {
  float w[W];
  load_any<W>(a.w, 0, j0, cnt, w);
  for_elems<W>(cnt, [&](int i) {
    const float m = grad_m<X, MR>(a, w[i], dy[i], none);
    acc = none ? rnd<X>(acc + rnd<X>(m * x[i])) : acc + m * x[i];
  });
}

/// dx of W elements at j0 (stored; x is overwritten with it) and their dW terms added to d
/// (in row order: each column's run over the program's rows is serial).
template <typename X, bool MR, int W>
__device__ __forceinline__ void grads(const BwdArgs& a, bool none, bool llama, int64_t row, int64_t j0, int cnt, float r, float cc,
                                      const float (&dy)[W], float (&x)[W], float (&d)[W]) {
  float w[W];
  load_any<W>(a.w, 0, j0, cnt, w);
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const float m = grad_m<X, MR>(a, w[i], dy[i], none);
    float tx = KV_MUTANT(cu_dw_no_rstd) ? x[i] : cr<X>(__fmul_rn(x[i], r), none);
    if (llama) tx = rnd<X>(tx);
    d[i] = d[i] + cr<X>(dy[i] * tx, none);  // dW accumulates in fp32 in every mode
    const float rm = cr<X>(__fmul_rn(r, m), none), cx = cr<X>(__fmul_rn(cc, x[i]), none);
    x[i] = cr<X>(KV_MUTANT(cu_dx_sign) ? rm + cx : rm - cx, none);
  }
  if constexpr (W == kV<X>)
    if (a.dx.dtype == kDT<X>) return store_chunk<X>(a.dx, row, j0, cnt, x);
  store_any<W>(a.dx, row, j0, cnt, x);
}

/// M: the mode, MR: m_rounding is x_dtype (template parameters: no per-element tests).
template <typename X, int C, int M, bool MR>
__global__ void __launch_bounds__(C == 0 ? 1024 : 512, C == 0 ? 0 : 1) bwd_kernel_t(BwdArgs a) {
  constexpr int V = kV<X>, CR = C > 0 ? C : 1;  // CR: array extents
  constexpr bool none = M == Mode::none;
  __shared__ float red[32];
  const Team t(a.wpr);
  const int nch = chunks<V>(a.n);
  const bool dy_kept = a.dy.dtype == kDT<X>;  // dy in registers as raw X values, else read again
  const int64_t prog = static_cast<int64_t>(blockIdx.x) * t.count + t.id;
  const int64_t per = KV_MUTANT(cu_rows_per_program_floor) ? a.rows / a.programs
                                                           : (a.rows + a.programs - 1) / a.programs;
  const int64_t r0 = prog * per, r1 = min(a.rows, r0 + per);
  float* part = a.ws_partials + prog * a.n;  // chunks past the registers accumulate here
  for (int c = t.lane + C * t.P; c < nch; c += t.P)
    for (int i = 0; i < chunk_count<V>(a.n, c); ++i) part[static_cast<int64_t>(c) * V + i] = 0.0f;
  float dw[CR][V];
#pragma unroll
  for (int k = 0; k < CR; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) dw[k][i] = 0.0f;
  // The chunks in registers: f(k, j0, cnt, dy, x) with x unpacked, dy unpacked where kept
  // (else read again: dx may live in dy's storage, and dy is read before dx is written).
  auto each_kept_chunk = [&](const auto& rdy, const auto& rx, int64_t row, auto&& f) {
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = t.lane + k * t.P;
      if (c >= nch) continue;
      const int cnt = chunk_count<V>(a.n, c);
      const int64_t j0 = static_cast<int64_t>(c) * V;
      float dy[V], x[V];
      if (dy_kept) unpack_all<X>(rdy[k], dy);
      else load_any<V>(a.dy, row, j0, cnt, dy);
      unpack_all<X>(rx[k], x);
      f(k, j0, cnt, dy, x);
    }
  };
  // Chunks past the registers, 4 elements at a time (few registers): f(j0, cnt, dy, x).
  auto each_far_plane = [&](int64_t row, auto&& f) {
    for (int c = t.lane + C * t.P; c < nch; c += t.P) {
      const int cnt = chunk_count<V>(a.n, c);
#pragma unroll 1
      for (int h = 0; 4 * h < cnt; ++h) {
        const int64_t j0 = static_cast<int64_t>(c) * V + 4 * h;
        const int pc = cnt - 4 * h < 4 ? cnt - 4 * h : 4;
        float dy[4], x[4];
        load_any<4>(a.dy, row, j0, pc, dy);
        load_any<4>(a.x, row, j0, pc, x);
        f(j0, pc, dy, x);
      }
    }
  };
  // Every team of the block runs `per` iterations (the barriers of team_sum are the block's).
  for (int64_t i = 0; i < per; ++i) {
    const int64_t row = r0 + i;
    const bool ok = row < r1;
    uint4 rdy[CR], rx[CR];
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = t.lane + k * t.P;
      if (ok && c < nch) {
        const int cnt = chunk_count<V>(a.n, c);
        rx[k] = load_raw<X>(a.x, row, static_cast<int64_t>(c) * V, cnt);
        if (dy_kept) rdy[k] = load_raw<X>(a.dy, row, static_cast<int64_t>(c) * V, cnt);
      }
    }
    const float r = ok ? ld_any(a.rstd.base, a.rstd.dtype, row * a.rstd.rs) : 0.0f;
    float acc = 0.0f;
    if (ok) {
      each_kept_chunk(rdy, rx, row, [&](int, int64_t j0, int cnt, float(&dy)[V], float(&x)[V]) { add_terms<X, MR>(a, none, j0, cnt, dy, x, acc); });
      each_far_plane(row, [&](int64_t j0, int pc, const float(&dy)[4], const float(&x)[4]) { add_terms<X, MR>(a, none, j0, pc, dy, x, acc); });
    }
    const float s = team_sum<X>(acc, none, t, red);
    if (!ok) continue;
    const float r2 = cr<X>(__fmul_rn(r, r), none), r3 = KV_MUTANT(cu_c_rstd_squared) ? r2 : cr<X>(__fmul_rn(r2, r), none);
    const float cc = cr<X>(__fmul_rn(r3, cr<X>(s / static_cast<float>(a.n), none)), none);
    each_kept_chunk(rdy, rx, row, [&](int k, int64_t j0, int cnt, float(&dy)[V], float(&x)[V]) {
      grads<X, MR>(a, none, M == Mode::llama, row, j0, cnt, r, cc, dy, x, dw[k]);
    });
    each_far_plane(row, [&](int64_t j0, int pc, const float(&dy)[4], const float(&x)[4]) {
      float d[4], xx[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) d[e] = e < pc ? part[j0 + e] : 0.0f, xx[e] = x[e];
      grads<X, MR>(a, none, M == Mode::llama, row, j0, pc, r, cc, dy, xx, d);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (e < pc) part[j0 + e] = d[e];
    });
  }
  // Publish the program's partials: its workspace row, or atomically.
#pragma unroll
  for (int k = 0; k < C; ++k) {
    const int c = t.lane + k * t.P;
    if (c >= nch) continue;
    const int cnt = chunk_count<V>(a.n, c);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      if (e >= cnt) continue;
      const int64_t j = static_cast<int64_t>(c) * V + e;
      if (a.strategy == atomics) atomicAdd(a.ws_acc + j, dw[k][e]);
      else part[j] = dw[k][e];
    }
  }
  if (a.strategy == atomics)
    for (int c = t.lane + C * t.P; c < nch; c += t.P)
      for (int e = 0; e < chunk_count<V>(a.n, c); ++e)
        atomicAdd(a.ws_acc + static_cast<int64_t>(c) * V + e, part[static_cast<int64_t>(c) * V + e]);
}

template <typename X>
constexpr DType kDType = sizeof(X) == 4 ? DType::f32 : std::is_same_v<X, __half> ? DType::f16 : DType::bf16;

/// The forward kernel for a block size (2 chunks per lane kept with 1024 threads, else 8 for
/// 2-byte x, 4 for fp32) and mode; f(kernel) launches or names it.
template <typename X, int M, bool Fast, class F>
auto with_fwd(int threads, F&& f) {
  if (fwd_chunks(kDType<X>, threads) == 2) return f(&fwd_kernel_t<X, 2, M, Fast>);
  return f(&fwd_kernel_t<X, kV<X> == 8 ? 8 : 4, M, Fast>);
}
template <typename X, int M, class F>
auto with_fwd(int threads, bool fast, F&& f) {
  return fast ? with_fwd<X, M, true>(threads, f) : with_fwd<X, M, false>(threads, f);
}
template <typename X, class F>
auto with_fwd(int threads, int mode, bool fast, F&& f) {
  if (mode == Mode::none) return with_fwd<X, Mode::none>(threads, fast, f);
  if (mode == Mode::gemma) return with_fwd<X, Mode::gemma>(threads, fast, f);
  return with_fwd<X, Mode::llama>(threads, fast, f);
}

/// The backward kernel for a block size (none kept with 1024 threads), mode and m_rounding.
template <typename X, int M, bool MR, class F>
auto with_bwd(int threads, F&& f) {
  if (bwd_chunks(threads) == 0) return f(&bwd_kernel_t<X, 0, M, MR>);
  return f(&bwd_kernel_t<X, kBwdChunks, M, MR>);
}
template <typename X, int M, class F>
auto with_bwd(int threads, bool m_round_x, F&& f) {
  return m_round_x ? with_bwd<X, M, true>(threads, f) : with_bwd<X, M, false>(threads, f);
}
template <typename X, class F>
auto with_bwd(int threads, int mode, bool m_round_x, F&& f) {
  if (mode == Mode::none) return with_bwd<X, Mode::none>(threads, m_round_x, f);
  if (mode == Mode::gemma) return with_bwd<X, Mode::gemma>(threads, m_round_x, f);
  return with_bwd<X, Mode::llama>(threads, m_round_x, f);
}

template <typename X>
void fwd_t(const FwdArgs& a, cudaStream_t s) {
  if (a.rows == 0) return;
  KV_MUTANT_UPLOAD(s);
  const int64_t teams = a.threads / (32 * a.wpr);
  with_fwd<X>(a.threads, a.mode, a.fast != 0, [&](auto* k) {
    k<<<grid_rows((a.rows + teams - 1) / teams), a.threads, 0, s>>>(a);
    KV_CUDA_LAUNCHED();
    return 0;
  });
}

template <typename X>
void bwd_t(BwdArgs a, cudaStream_t s) {
  KV_MUTANT_UPLOAD(s);
  if (KV_MUTANT(cu_dw_atomics) && a.strategy == fixed_partials) a.strategy = atomics;  // still claims run_to_run
  if (a.strategy == atomics) KV_CUDA(cudaMemsetAsync(a.ws_acc, 0, sizeof(float) * a.n, s));
  const auto blocks = static_cast<unsigned>(a.programs / (a.threads / (32 * a.wpr)));
  with_bwd<X>(a.threads, a.mode, a.m_round_x, [&](auto* k) {
    k<<<blocks, a.threads, 0, s>>>(a);
    KV_CUDA_LAUNCHED();
    return 0;
  });
  // Second stage (cuda_rows.cu): the partials of each column summed serially in program order.
  const ColSum dw{a.ws_partials, a.ws_acc, a.dw.base, a.dw.dtype, a.dw.cs};
  launch_col_sums(&dw, 1, a.n, a.programs, a.strategy, s);
}

}  // namespace

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s) {
  if (x == DType::f32) fwd_t<float>(a, s);
  else if (x == DType::f16) fwd_t<__half>(a, s);
  else fwd_t<__nv_bfloat16>(a, s);
}

void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s) {
  if (x == DType::f32) bwd_t<float>(a, s);
  else if (x == DType::f16) bwd_t<__half>(a, s);
  else bwd_t<__nv_bfloat16>(a, s);
}

const void* fwd_kernel(DType x, int threads, int mode) {  // the general one: same launch bounds
  if (x == DType::f32) return with_fwd<float>(threads, mode, false, KernelAddr{});
  if (x == DType::f16) return with_fwd<__half>(threads, mode, false, KernelAddr{});
  return with_fwd<__nv_bfloat16>(threads, mode, false, KernelAddr{});
}

const void* bwd_kernel(DType x, int threads, int mode, bool m_round_x) {
  if (x == DType::f32) return with_bwd<float>(threads, mode, m_round_x, KernelAddr{});
  if (x == DType::f16) return with_bwd<__half>(threads, mode, m_round_x, KernelAddr{});
  return with_bwd<__nv_bfloat16>(threads, mode, m_round_x, KernelAddr{});
}

}  // namespace kv::rmscuda
