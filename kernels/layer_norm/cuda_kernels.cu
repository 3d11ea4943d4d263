// CUDA LayerNorm, forward and backward, as reference/layer_norm.hpp defines it, in fp32
// with x's dtype a template parameter (w, b, dw, db and the statistics in any dtype). A team
// of wpr warps owns a row (cuda_launch.hpp): each lane takes its chunks serially (16-byte
// accesses where aligned, element accesses otherwise, the same order either way), then a
// shuffle tree in each warp and a tree across the team's warps: the reduction shape the
// contract declares (row_reduction with P = 32*wpr threads). A lane keeps its first chunks
// in registers between the passes, so rows are read from global memory once.
// fwd: mean = sum x / N, then var = sum (x - mean)^2 / N, rstd = rsqrtf(var + eps), then
// y = ((x - mean)*rstd)*w + b.
// bwd: each team is a dW/dB program over a contiguous chunk of rows, the next row's dy and
// x loaded while the current one is reduced: per row c1 = sum(xhat*wdy)/N and
// c2 = sum(wdy)/N, dx from them; the dW and dB partials in fp32 registers (its workspace
// rows for chunks past the registers); the second stage (cuda_rows.cu) sums the programs'
// partials in program order, or reads the atomic sums.
#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/layer_norm/cuda_launch.hpp"

namespace kv::lncuda {

using namespace kv::rowcuda;

namespace {

/// F: every chunk whole and x, y, w, b aligned (no element paths: fewer registers).
template <typename X, int C, bool F>
__global__ void __launch_bounds__(C == 2 ? 1024 : 256, 1) fwd_kernel_t(FwdArgs a) {
  constexpr int V = kV<X>;
  __shared__ float red[32];
  const Team t(a.wpr);
  const Lanes<V, C, F> L(t, a.n);
  const float N = static_cast<float>(a.n);  // exact: the host takes n <= 2^24
  team_rows(a.rows, t, [&](int64_t row, bool ok) {
    uint4 raw[C];
    L.kept([&](int k, int c, int cnt) { raw[k] = row_chunk<X, F>(a.x, row, c, cnt); });
    float s = 0.0f;
    auto add = [&](const uint4& r, int cnt) {
      float v[V];
      unpack_all<X>(r, v);
      for_elems<V>(cnt, [&](int i) { s += v[i]; });
    };
    L.kept([&](int k, int, int cnt) { add(raw[k], cnt); });
    L.far([&](int c, int cnt) { add(row_chunk<X, F>(a.x, row, c, cnt), cnt); });
    const float mean = __fdiv_rn(team_reduce1<SumOp>(s, t, red), N);
    float q = 0.0f;
    auto add_sq = [&](const uint4& r, int cnt) {
      float v[V];
      unpack_all<X>(r, v);
      for_elems<V>(cnt, [&](int i) {
        const float d = v[i] - mean;
        q += d * d;
      });
    };
    L.kept([&](int k, int, int cnt) { add_sq(raw[k], cnt); });
    L.far([&](int c, int cnt) { add_sq(row_chunk<X, F>(a.x, row, c, cnt), cnt); });
    const float rstd = rsqrtf(__fdiv_rn(team_reduce1<SumOp>(q, t, red), N) + a.eps);
    if (!ok) return;
    if (t.lane == 0) {
      st_any(a.mean.base, a.mean.dtype, row * a.mean.rs, mean);
      st_any(a.rstd.base, a.rstd.dtype, row * a.rstd.rs, rstd);
    }
    auto out = [&](const uint4& r, int c, int cnt) {
      float w[V], b[V], d[V];
      col_chunk<V, F>(a.w, c, cnt, w);
      col_chunk<V, F>(a.b, c, cnt, b);
      unpack_all<X>(r, d);
#pragma unroll
      for (int i = 0; i < V; ++i) d[i] = ((d[i] - mean) * rstd) * w[i] + b[i];
      put_row_chunk<X, F>(a.y, row, c, cnt, d);
    };
    L.kept([&](int k, int c, int cnt) { out(raw[k], c, cnt); });
    // y may share x's storage: each lane reads its chunk before writing it.
    L.far([&](int c, int cnt) { out(row_chunk<X, F>(a.x, row, c, cnt), c, cnt); });
  });
}

/// F: every chunk whole and dy, x, dx, w aligned.
template <typename X, int C, bool F>
__global__ void __launch_bounds__(C == 4 ? 256 : C == 2 ? 512 : 1024, 1) bwd_kernel_t(BwdArgs a) {
  constexpr int V = kV<X>, CR = C > 0 ? C : 1;  // CR: array extents
  __shared__ float red[2 * 32];
  const Team t(a.wpr);
  const Lanes<V, C, F> L(t, a.n);
  const float N = static_cast<float>(a.n);  // exact: the host takes n <= 2^24
  const int64_t prog = static_cast<int64_t>(blockIdx.x) * t.count + t.id;
  const int64_t per = (a.rows + a.programs - 1) / a.programs;
  const int64_t r0 = prog * per, r1 = min(a.rows, r0 + per);
  float* pw = a.dw_partials + prog * a.n;  // chunks past the registers accumulate here
  float* pb = a.db_partials + prog * a.n;
  L.far([&](int c, int cnt) {
    for (int e = 0; e < cnt; ++e) pw[static_cast<int64_t>(c) * V + e] = pb[static_cast<int64_t>(c) * V + e] = 0.0f;
  });
  float dw[CR][V], db[CR][V];
#pragma unroll
  for (int k = 0; k < CR; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) dw[k][e] = db[k][e] = 0.0f;
  // The next row's kept chunks of dy and x and its statistics, loaded a row ahead (kAhead;
  // 1024-thread blocks keep nothing: they read everything again, the partials in the workspace).
  constexpr bool kAhead = C > 1;
  uint4 ndy[CR], nx[CR];
  float nM = 0.0f, nRS = 0.0f;
  auto fetch = [&](int64_t row) {
    L.kept([&](int k, int c, int cnt) {
      ndy[k] = row_chunk<X, F>(a.dy, row, c, cnt);
      nx[k] = row_chunk<X, F>(a.x, row, c, cnt);
    });
    nM = ld_any(a.mean.base, a.mean.dtype, row * a.mean.rs);
    nRS = ld_any(a.rstd.base, a.rstd.dtype, row * a.rstd.rs);
  };
  if (kAhead && r0 < r1) fetch(r0);
  // Every team of the block runs `per` iterations (the barriers of team_reduce are the block's).
  for (int64_t i = 0; i < per; ++i) {
    const int64_t row = r0 + i;
    const bool ok = row < r1;
    if (!kAhead && ok) fetch(row);
    uint4 rdy[CR], rx[CR];
#pragma unroll
    for (int k = 0; k < C; ++k) rdy[k] = ndy[k], rx[k] = nx[k];
    const float M = nM, RS = nRS;
    if (kAhead && row + 1 < r1) fetch(row + 1);
    float s[2] = {0.0f, 0.0f};  // sum xhat*wdy, sum wdy
    auto sums = [&](const uint4& rd, const uint4& r, int c, int cnt) {
      float w[V], dy[V], x[V];
      col_chunk<V, F>(a.w, c, cnt, w);
      unpack_all<X>(rd, dy);
      unpack_all<X>(r, x);
      for_elems<V>(cnt, [&](int e) {  // ascending: the sums' serial order
        const float xhat = (x[e] - M) * RS, wdy = w[e] * dy[e];
        s[0] += xhat * wdy;
        s[1] += wdy;
      });
    };
    if (ok) {
      L.kept([&](int k, int c, int cnt) { sums(rdy[k], rx[k], c, cnt); });
      L.far([&](int c, int cnt) { sums(row_chunk<X, F>(a.dy, row, c, cnt), row_chunk<X, F>(a.x, row, c, cnt), c, cnt); });
    }
    team_reduce<SumOp, 2>(s, t, red);
    if (!ok) continue;
    const float c1 = __fdiv_rn(s[0], N), c2 = __fdiv_rn(s[1], N);
    // dx of a chunk (stored) and its dW/dB terms passed to add(e, dy*xhat, dy) (each
    // column's run over the program's rows is serial, in row order).
    auto grads = [&](const uint4& rd, const uint4& r, int c, int cnt, auto&& add) {
      float w[V], dy[V], x[V];
      col_chunk<V, F>(a.w, c, cnt, w);
      unpack_all<X>(rd, dy);
      unpack_all<X>(r, x);
      for_elems<V>(cnt, [&](int e) {
        const float xhat = (x[e] - M) * RS, wdy = w[e] * dy[e];
        add(e, dy[e] * xhat, dy[e]);
        x[e] = (wdy - (xhat * c1 + c2)) * RS;
      });
      put_row_chunk<X, F>(a.dx, row, c, cnt, x);
    };
    L.kept([&](int k, int c, int cnt) {
      grads(rdy[k], rx[k], c, cnt, [&](int e, float gw, float gb) { dw[k][e] += gw, db[k][e] += gb; });
    });
    // dx may share dy's or x's storage: each lane reads its chunk of both before writing it.
    L.far([&](int c, int cnt) {
      const int64_t j0 = static_cast<int64_t>(c) * V;
      grads(row_chunk<X, F>(a.dy, row, c, cnt), row_chunk<X, F>(a.x, row, c, cnt), c, cnt,
            [&](int e, float gw, float gb) { pw[j0 + e] += gw, pb[j0 + e] += gb; });
    });
  }
  // Publish the program's partials: its workspace rows, or atomically.
  L.kept([&](int k, int c, int cnt) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      if (e >= cnt) continue;
      const int64_t j = static_cast<int64_t>(c) * V + e;
      if (a.strategy == atomics) {
        atomicAdd(a.dw_acc + j, dw[k][e]);
        atomicAdd(a.db_acc + j, db[k][e]);
      } else {
        pw[j] = dw[k][e], pb[j] = db[k][e];
      }
    }
  });
  if (a.strategy == atomics)
    L.far([&](int c, int cnt) {
      for (int e = 0; e < cnt; ++e) {
        const int64_t j = static_cast<int64_t>(c) * V + e;
        atomicAdd(a.dw_acc + j, pw[j]);
        atomicAdd(a.db_acc + j, pb[j]);
      }
    });
}

/// The forward kernel for a block size (2 chunks per lane kept with more than 256 threads,
/// else 8 for 2-byte x, 4 for fp32); f(kernel) launches or names it.
template <typename X, bool Fast, class Fn>
auto with_fwd(int threads, Fn&& f) {
  if (threads > 256) return f(&fwd_kernel_t<X, 2, Fast>);
  return f(&fwd_kernel_t<X, kV<X> == 8 ? 8 : 4, Fast>);
}
template <typename X, bool Fast, class Fn>
auto with_bwd(int threads, Fn&& f) {
  switch (bwd_chunks(threads)) {
    case 4: return f(&bwd_kernel_t<X, 4, Fast>);
    case 2: return f(&bwd_kernel_t<X, 2, Fast>);
    default: return f(&bwd_kernel_t<X, 0, Fast>);
  }
}
template <typename X, class Fn>
auto with_fwd(int threads, bool fast, Fn&& f) {
  return fast ? with_fwd<X, true>(threads, f) : with_fwd<X, false>(threads, f);
}
template <typename X, class Fn>
auto with_bwd(int threads, bool fast, Fn&& f) {
  return fast ? with_bwd<X, true>(threads, f) : with_bwd<X, false>(threads, f);
}

template <typename X>
void fwd_t(const FwdArgs& a, cudaStream_t s) {
  if (a.rows == 0) return;
  const int64_t teams = a.threads / (32 * a.wpr);
  with_fwd<X>(a.threads, a.fast != 0, [&](auto* k) {
    k<<<grid_rows((a.rows + teams - 1) / teams), a.threads, 0, s>>>(a);
    KV_CUDA_LAUNCHED();
    return 0;
  });
}

template <typename X>
void bwd_t(const BwdArgs& a, cudaStream_t s) {
  if (a.strategy == atomics) {
    KV_CUDA(cudaMemsetAsync(a.dw_acc, 0, sizeof(float) * a.n, s));
    KV_CUDA(cudaMemsetAsync(a.db_acc, 0, sizeof(float) * a.n, s));
  }
  const auto blocks = static_cast<unsigned>(a.programs / (a.threads / (32 * a.wpr)));
  with_bwd<X>(a.threads, a.fast != 0, [&](auto* k) {
    k<<<blocks, a.threads, 0, s>>>(a);
    KV_CUDA_LAUNCHED();
    return 0;
  });
  // Second stage (cuda_rows.cu): the partials of each column summed serially in program order.
  const ColSum sums[2] = {{a.dw_partials, a.dw_acc, a.dw.base, a.dw.dtype, a.dw.cs},
                          {a.db_partials, a.db_acc, a.db.base, a.db.dtype, a.db.cs}};
  launch_col_sums(sums, 2, a.n, a.programs, a.strategy, s);
}

template <typename X>
const void* kernel_t(bool bwd, int threads) {
  return bwd ? with_bwd<X>(threads, false, KernelAddr{}) : with_fwd<X>(threads, false, KernelAddr{});
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

const void* fwd_kernel(DType x, int threads) {
  if (x == DType::f32) return kernel_t<float>(false, threads);
  if (x == DType::f16) return kernel_t<__half>(false, threads);
  return kernel_t<__nv_bfloat16>(false, threads);
}

const void* bwd_kernel(DType x, int threads) {
  if (x == DType::f32) return kernel_t<float>(true, threads);
  if (x == DType::f16) return kernel_t<__half>(true, threads);
  return kernel_t<__nv_bfloat16>(true, threads);
}

}  // namespace kv::lncuda
