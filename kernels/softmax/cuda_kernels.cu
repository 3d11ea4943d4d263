// CUDA row softmax, forward and backward, as reference/softmax.hpp defines it, in fp32 with
// x's dtype a template parameter. A team of wpr warps owns a row (cuda_launch.hpp): each
// lane takes its chunks serially (16-byte accesses where aligned, element accesses
// otherwise, the same order either way), then a shuffle tree in each warp and a tree across
// the team's warps: the reduction shape the contract declares (row_reduction with
// P = 32*wpr threads). A lane keeps its first C chunks in registers between the passes, so
// rows are read from global memory once; chunks past them are read again.
// fwd: m = max x (exact), e_j = expf(x_j - m), d = sum e_j, y_j = e_j / d (IEEE division).
// bwd: t = sum dy_j*y_j, dx_j = y_j*(dy_j - t).
#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/softmax/cuda_launch.hpp"

namespace kv::smcuda {

using namespace kv::rowcuda;

namespace {

/// F: every chunk whole and x, y aligned (no element paths: fewer registers).
template <typename X, int C, bool F>
__global__ void __launch_bounds__(C <= 2 ? 1024 : 256, C <= 2 ? 1 : 2) fwd_kernel(Args a) {
  constexpr int V = kV<X>;
  __shared__ float red[32];
  const Team t(a.wpr);
  const Lanes<V, C, F> L(t, a.n);
  team_rows(a.rows, t, [&](int64_t row, bool ok) {
    uint4 raw[C];
    L.kept([&](int k, int c, int cnt) { raw[k] = row_chunk<X, F>(a.x, row, c, cnt); });
    float m = -INFINITY;
    auto max_of = [&](const uint4& r, int cnt) {
      float v[V];
      unpack_all<X>(r, v);
      for_elems<V>(cnt, [&](int i) { m = fmaxf(m, v[i]); });
    };
    L.kept([&](int k, int, int cnt) { max_of(raw[k], cnt); });
    L.far([&](int c, int cnt) { max_of(row_chunk<X, F>(a.x, row, c, cnt), cnt); });
    m = team_reduce1<MaxOp>(m, t, red);
    float e[C][V], d = 0.0f;
    auto exps = [&](const uint4& r, float(&v)[V]) {
      unpack_all<X>(r, v);
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = expf(v[i] - m);
    };
    L.kept([&](int k, int, int cnt) {
      exps(raw[k], e[k]);
      for_elems<V>(cnt, [&](int i) { d += e[k][i]; });
    });
    L.far([&](int c, int cnt) {
      float v[V];
      exps(row_chunk<X, F>(a.x, row, c, cnt), v);
      for_elems<V>(cnt, [&](int i) { d += v[i]; });
    });
    d = team_reduce1<SumOp>(d, t, red);
    if (!ok) return;
    auto out = [&](int c, int cnt, float(&v)[V]) {
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = __fdiv_rn(v[i], d);
      put_row_chunk<X, F>(a.y, row, c, cnt, v);
    };
    L.kept([&](int k, int c, int cnt) { out(c, cnt, e[k]); });
    L.far([&](int c, int cnt) {  // y may share x's storage: each lane reads its chunk before writing it
      float v[V];
      exps(row_chunk<X, F>(a.x, row, c, cnt), v);
      out(c, cnt, v);
    });
  });
}

/// F: every chunk whole and dy, y, dx aligned.
template <typename X, int C, bool F>
__global__ void __launch_bounds__(C == 2 ? 1024 : 256, C == 2 ? 1 : 2) bwd_kernel(Args a) {
  constexpr int V = kV<X>;
  __shared__ float red[32];
  const Team t(a.wpr);
  const Lanes<V, C, F> L(t, a.n);
  team_rows(a.rows, t, [&](int64_t row, bool ok) {
    uint4 rdy[C], ry[C];
    L.kept([&](int k, int c, int cnt) {
      rdy[k] = row_chunk<X, F>(a.dy, row, c, cnt);
      ry[k] = row_chunk<X, F>(a.y, row, c, cnt);
    });
    float s = 0.0f;
    auto dot = [&](const uint4& rd, const uint4& r, int cnt) {
      float dy[V], y[V];
      unpack_all<X>(rd, dy);
      unpack_all<X>(r, y);
      for_elems<V>(cnt, [&](int i) { s += dy[i] * y[i]; });
    };
    L.kept([&](int k, int, int cnt) { dot(rdy[k], ry[k], cnt); });
    L.far([&](int c, int cnt) { dot(row_chunk<X, F>(a.dy, row, c, cnt), row_chunk<X, F>(a.y, row, c, cnt), cnt); });
    s = team_reduce1<SumOp>(s, t, red);
    if (!ok) return;
    auto out = [&](const uint4& rd, const uint4& r, int c, int cnt) {
      float dy[V], dx[V];
      unpack_all<X>(rd, dy);
      unpack_all<X>(r, dx);
#pragma unroll
      for (int i = 0; i < V; ++i) dx[i] = dx[i] * (dy[i] - s);
      put_row_chunk<X, F>(a.dx, row, c, cnt, dx);
    };
    L.kept([&](int k, int c, int cnt) { out(rdy[k], ry[k], c, cnt); });
    // dx may share dy's or y's storage: each lane reads its chunk of both before writing it.
    L.far([&](int c, int cnt) { out(row_chunk<X, F>(a.dy, row, c, cnt), row_chunk<X, F>(a.y, row, c, cnt), c, cnt); });
  });
}

/// The kernel for a block size and direction (C: cuda_launch.hpp's kept_chunks); f(kernel)
/// launches or names it.
template <typename X, bool Fast, class Fn>
auto with_kernel(bool bwd, int threads, Fn&& f) {
  constexpr DType x = sizeof(X) == 4 ? DType::f32 : DType::bf16;  // only the size matters
  if (bwd) {
    if (kept_chunks(x, true, threads) == 2) return f(&bwd_kernel<X, 2, Fast>);
    return f(&bwd_kernel<X, kV<X> == 8 ? 8 : 4, Fast>);
  }
  if (kept_chunks(x, false, threads) == 1) return f(&fwd_kernel<X, 1, Fast>);
  return f(&fwd_kernel<X, kV<X> == 8 ? 6 : 4, Fast>);
}
template <typename X, class Fn>
auto with_kernel(bool bwd, int threads, bool fast, Fn&& f) {
  return fast ? with_kernel<X, true>(bwd, threads, f) : with_kernel<X, false>(bwd, threads, f);
}

template <typename X>
void launch_t(bool bwd, const Args& a, cudaStream_t s) {
  if (a.rows == 0) return;
  const int64_t teams = a.threads / (32 * a.wpr);
  with_kernel<X>(bwd, a.threads, a.fast != 0, [&](auto* k) {
    k<<<grid_rows((a.rows + teams - 1) / teams), a.threads, 0, s>>>(a);
    KV_CUDA_LAUNCHED();
    return 0;
  });
}

}  // namespace

void launch(DType x, bool bwd, const Args& a, cudaStream_t s) {
  if (x == DType::f32) launch_t<float>(bwd, a, s);
  else if (x == DType::f16) launch_t<__half>(bwd, a, s);
  else launch_t<__nv_bfloat16>(bwd, a, s);
}

const void* kernel(DType x, bool bwd, int threads) {
  if (x == DType::f32) return with_kernel<float>(bwd, threads, false, KernelAddr{});
  if (x == DType::f16) return with_kernel<__half>(bwd, threads, false, KernelAddr{});
  return with_kernel<__nv_bfloat16>(bwd, threads, false, KernelAddr{});
}

}  // namespace kv::smcuda
