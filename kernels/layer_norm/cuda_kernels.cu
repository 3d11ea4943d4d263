// CUDA LayerNorm, forward and backward, as reference/layer_norm.hpp defines it, in fp32
// with x's dtype a template parameter (w, b, dw, db and the statistics in any dtype).
// fwd: one block per row, two passes for the statistics (mean = sum x / N, then
// var = sum (x - mean)^2 / N, rstd = rsqrtf(var + eps)), then y = ((x - mean)*rstd)*w + b;
// shared memory keeps the row (x, then x - mean) so x is read from global memory once.
// bwd: G programs (blocks), each over a contiguous chunk of rows, R rows at a time, the next
// R rows' first loads in flight meanwhile (the sums' order is the same for any R): per row
// c1 = sum(xhat*wdy)/N and c2 = sum(wdy)/N by the block's sum shape, dx from them; dW and
// dB partials in fp32 per program (shared memory where they fit), then the second stage
// (cuda_rows.cu) sums the G partials in program order, or reads the atomic sums.
#include "core/cuda/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/layer_norm/cuda_launch.hpp"

namespace kv::lncuda {

using namespace kv::rowcuda;

namespace {

template <typename X, int R>
__global__ void __launch_bounds__(1024 / R, R == 1 ? 1 : 2) fwd_kernel_t(FwdArgs a) {
  constexpr int V = kV<X>;
  __shared__ float red[R * 32];
  float4* cache = dyn_smem();  // the group's rows: cache tensors 0 .. R-1; w: R, b: R+1 (if wb)
  const bool cached = a.cache_bytes > 0, wb = a.cache_wb != 0;
  const int nch = chunks<V>(a.n);
  const float N = static_cast<float>(a.n);  // exact: the host takes n <= 2^24
  if (wb)  // w and b once per block (the grid is about as large as the GPU holds)
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float w[V], b[V];
      load_any<V>(a.w, 0, static_cast<int64_t>(c) * V, cnt, w);
      load_any<V>(a.b, 0, static_cast<int64_t>(c) * V, cnt, b);
      cache_put<V>(cache, nch, R, c, w);
      cache_put<V>(cache, nch, R + 1, c, b);
    }
  const int64_t step = static_cast<int64_t>(gridDim.x) * R;
  Ahead<X, R, 1> ahead(nch, a.n);  // the next group's first chunks, loaded during this one
  int64_t g = static_cast<int64_t>(blockIdx.x) * R;
  if (g < a.rows) ahead.load(&a.x, RowGroup<R>(g, a.rows, a.n));
  for (; g < a.rows; g += step) {
    const RowGroup<R> rg(g, a.rows, a.n);
    float s[R];
#pragma unroll
    for (int k = 0; k < R; ++k) s[k] = 0.0f;
    auto first = [&](int c, int cnt, const uint4 (&raw)[1][R]) {
#pragma unroll
      for (int k = 0; k < R; ++k) {
        float v[V];
        unpack_all<X>(raw[0][k], v);
        for_elems<V>(cnt, [&](int i) { s[k] += v[i]; });
        if (cached) cache_put<V>(cache, nch, k, c, v);
      }
    };
    ahead.each_chunk(&a.x, rg, first);
    if (g + step < a.rows) ahead.load(&a.x, RowGroup<R>(g + step, a.rows, a.n));
    block_sum<R>(s, red);
    float mean[R], q[R];
#pragma unroll
    for (int k = 0; k < R; ++k) mean[k] = __fdiv_rn(s[k], N), q[k] = 0.0f;
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
#pragma unroll
      for (int k = 0; k < R; ++k) {
        float v[V];
        if (cached) cache_get<V>(cache, nch, k, c, v);
        else load_chunk<X>(a.x, rg.row[k], static_cast<int64_t>(c) * V, cnt, v);
        for_elems<V>(cnt, [&](int i) {
          v[i] = v[i] - mean[k];
          q[k] += v[i] * v[i];
        });
        if (cached) cache_put<V>(cache, nch, k, c, v);
      }
    }
    block_sum<R>(q, red);
    float rstd[R];
#pragma unroll
    for (int k = 0; k < R; ++k) rstd[k] = rsqrtf(__fdiv_rn(q[k], N) + a.eps);
    if (threadIdx.x == 0)
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (rg.ok[k]) {
          st_any(a.mean.base, a.mean.dtype, rg.row[k] * a.mean.rs, mean[k]);
          st_any(a.rstd.base, a.rstd.dtype, rg.row[k] * a.rstd.rs, rstd[k]);
        }
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float w[V], b[V];
      if (wb) {
        cache_get<V>(cache, nch, R, c, w);
        cache_get<V>(cache, nch, R + 1, c, b);
      } else {
        load_any<V>(a.w, 0, static_cast<int64_t>(c) * V, cnt, w);
        load_any<V>(a.b, 0, static_cast<int64_t>(c) * V, cnt, b);
      }
#pragma unroll
      for (int k = 0; k < R; ++k) {
        if (!rg.ok[k]) continue;
        float d[V];
        if (cached) {
          cache_get<V>(cache, nch, k, c, d);
        } else {
          load_chunk<X>(a.x, rg.row[k], static_cast<int64_t>(c) * V, cnt, d);  // y may share x's storage: read before written
#pragma unroll
          for (int i = 0; i < V; ++i) d[i] = d[i] - mean[k];
        }
#pragma unroll
        for (int i = 0; i < V; ++i) d[i] = (d[i] * rstd[k]) * w[i] + b[i];
        store_chunk<X>(a.y, rg.row[k], static_cast<int64_t>(c) * V, cnt, d);
      }
    }
  }
}

/// Program blockIdx.x's dW/dB partials, plane h (elements 4h .. 4h+3) of chunk c at a
/// time: shared memory (tensor 0: dW, 1: dB, as cache_put lays rows out) or its rows of
/// the workspaces.
template <int V>
struct Partials {
  float4* smem;
  int nch;
  float *pw, *pb;
  __device__ __forceinline__ void get(int c, int h, int cnt, float (&dw)[4], float (&db)[4]) const {
    if (smem) {
      const float4 w = smem[h * nch + c], b = smem[(V / 4 + h) * nch + c];
      dw[0] = w.x, dw[1] = w.y, dw[2] = w.z, dw[3] = w.w;
      db[0] = b.x, db[1] = b.y, db[2] = b.z, db[3] = b.w;
      return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 4 * h + e;
      dw[e] = i < cnt ? pw[static_cast<int64_t>(c) * V + i] : 0.0f;
      db[e] = i < cnt ? pb[static_cast<int64_t>(c) * V + i] : 0.0f;
    }
  }
  __device__ __forceinline__ void put(int c, int h, int cnt, const float (&dw)[4], const float (&db)[4]) const {
    if (smem) {
      smem[h * nch + c] = make_float4(dw[0], dw[1], dw[2], dw[3]);
      smem[(V / 4 + h) * nch + c] = make_float4(db[0], db[1], db[2], db[3]);
      return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (4 * h + e < cnt) {
        const int64_t j = static_cast<int64_t>(c) * V + 4 * h + e;
        pw[j] = dw[e], pb[j] = db[e];
      }
  }
};

template <typename X, int R>
__global__ void __launch_bounds__(1024 / R, 1) bwd_kernel_t(BwdArgs a) {
  constexpr int V = kV<X>;
  __shared__ float red[2 * R * 32];
  const int nch = chunks<V>(a.n);
  const float N = static_cast<float>(a.n);  // exact: the host takes n <= 2^24
  const int64_t per = (a.rows + a.partials - 1) / a.partials;
  const int64_t r0 = blockIdx.x * per, r1 = a.rows < r0 + per ? a.rows : r0 + per;
  const Partials<V> part{a.acc_bytes > 0 ? dyn_smem() : nullptr, nch, a.dw_partials + blockIdx.x * a.n,
                         a.db_partials + blockIdx.x * a.n};
  for (int c = threadIdx.x; c < nch; c += blockDim.x) {
    const float z[4] = {};
#pragma unroll
    for (int h = 0; h < V / 4; ++h) part.put(c, h, chunk_count<V>(a.n, c), z, z);
  }
  // The next group's first chunks of dy and x and its statistics are loaded while this
  // group is reduced and dx written: with one block per SM, loads must stay in flight.
  const Mat in[2] = {a.dy, a.x};
  Ahead<X, R, 2> ahead(nch, a.n);
  float nM[R], nRS[R];
  auto stats = [&](const RowGroup<R>& rg) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      nM[r] = ld_any(a.mean.base, a.mean.dtype, rg.row[r] * a.mean.rs);
      nRS[r] = ld_any(a.rstd.base, a.rstd.dtype, rg.row[r] * a.rstd.rs);
    }
  };
  if (r0 < r1) {
    const RowGroup<R> rg0(r0, r1, a.n);
    ahead.load(in, rg0);
    stats(rg0);
  }
  for (int64_t g = r0; g < r1; g += R) {
    const RowGroup<R> rg(g, r1, a.n);  // rows past r1 stand in as row g: loaded, unused
    const int64_t* rr = rg.row;
    const bool* ok = rg.ok;
    float M[R], RS[R];
#pragma unroll
    for (int r = 0; r < R; ++r) M[r] = nM[r], RS[r] = nRS[r];
    float s[2 * R];  // per row: sum xhat*wdy, sum wdy
#pragma unroll
    for (int k = 0; k < 2 * R; ++k) s[k] = 0.0f;
    auto first = [&](int c, int cnt, const uint4 (&raw)[2][R]) {
      float w[V];
      load_any<V>(a.w, 0, static_cast<int64_t>(c) * V, cnt, w);
#pragma unroll
      for (int h = 0; h < V / 4; ++h) {  // a plane of partials at a time (registers)
        float dw[4], db[4];
        part.get(c, h, cnt, dw, db);
#pragma unroll
        for (int r = 0; r < R; ++r)  // rows in order: each column's dW/dB run is serial over rows
          if (ok[r])
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int i = 4 * h + e;  // ascending within each row: its sums' serial order
              if (i < cnt) {
                const float dy = unpack<X>(raw[0][r], i), x = unpack<X>(raw[1][r], i);
                const float xhat = (x - M[r]) * RS[r], wdy = w[i] * dy;
                s[2 * r] += xhat * wdy;
                s[2 * r + 1] += wdy;
                dw[e] += dy * xhat;
                db[e] += dy;
              }
            }
        part.put(c, h, cnt, dw, db);
      }
    };
    ahead.each_chunk(in, rg, first);
    // The first chunk stays in registers for dx, except in 1024-thread blocks (64 registers).
    constexpr bool keep = R > 1;
    uint4 cur[2][R];
    if constexpr (keep)
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int r = 0; r < R; ++r) cur[t][r] = ahead.raw[t][r];
    if (g + R < r1) {
      const RowGroup<R> nx(g + R, r1, a.n);
      ahead.load(in, nx);
      stats(nx);
    }
    block_sum<2 * R>(s, red);
    float c1[R], c2[R];
#pragma unroll
    for (int r = 0; r < R; ++r) c1[r] = __fdiv_rn(s[2 * r], N), c2[r] = __fdiv_rn(s[2 * r + 1], N);
    auto dx_chunk = [&](int c, int cnt, const uint4 (&raw)[2][R]) {
      float w[V];
      load_any<V>(a.w, 0, static_cast<int64_t>(c) * V, cnt, w);
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (ok[r]) {
          float dx[V];
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float dy = unpack<X>(raw[0][r], i), x = unpack<X>(raw[1][r], i);
            const float xhat = (x - M[r]) * RS[r], wdy = w[i] * dy;
            dx[i] = (wdy - (xhat * c1[r] + c2[r])) * RS[r];
          }
          store_chunk<X>(a.dx, rr[r], static_cast<int64_t>(c) * V, cnt, dx);
        }
    };
    if (keep && ahead.cnt0 > 0) dx_chunk(threadIdx.x, ahead.cnt0, cur);
    for (int c = threadIdx.x + (keep ? blockDim.x : 0); c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      uint4 raw[2][R];  // read again (L1/L2): dx may share dy's or x's storage
#pragma unroll
      for (int r = 0; r < R; ++r) {
        raw[0][r] = load_raw<X>(a.dy, rr[r], static_cast<int64_t>(c) * V, cnt);
        raw[1][r] = load_raw<X>(a.x, rr[r], static_cast<int64_t>(c) * V, cnt);
      }
      dx_chunk(c, cnt, raw);
    }
  }
  // Publish the partials: to the workspace row (from shared memory) or atomically.
  if (a.acc_bytes == 0 && a.strategy != atomics) return;
  for (int c = threadIdx.x; c < nch; c += blockDim.x) {
    const int cnt = chunk_count<V>(a.n, c);
#pragma unroll
    for (int h = 0; h < V / 4; ++h) {
      float dw[4], db[4];
      part.get(c, h, cnt, dw, db);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = static_cast<int64_t>(c) * V + 4 * h + e;
        if (4 * h + e >= cnt) continue;
        if (a.strategy == atomics) {
          atomicAdd(a.dw_acc + j, dw[e]);
          atomicAdd(a.db_acc + j, db[e]);
        } else {
          part.pw[j] = dw[e];
          part.pb[j] = db[e];
        }
      }
    }
  }
}

/// Rows per group of a program (one block per SM at most; a group ahead is in flight too):
/// 4, 2, 1 for blocks of up to 256, 512, 1024 threads (the registers each leaves).
constexpr int rows_in_flight(int threads) { return threads <= 256 ? 4 : threads <= 512 ? 2 : 1; }

template <typename X>
const void* bwd_kernel_for(int threads) {
  switch (rows_in_flight(threads)) {
    case 4: return reinterpret_cast<const void*>(&bwd_kernel_t<X, 4>);
    case 2: return reinterpret_cast<const void*>(&bwd_kernel_t<X, 2>);
    default: return reinterpret_cast<const void*>(&bwd_kernel_t<X, 1>);
  }
}

template <typename X>
const void* fwd_kernel_for(int rows_per_block) {
  return rows_per_block == 2 ? reinterpret_cast<const void*>(&fwd_kernel_t<X, 2>)
                             : reinterpret_cast<const void*>(&fwd_kernel_t<X, 1>);
}

template <typename X, int R>
void fwd_r(const FwdArgs& a, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(a.cache_bytes);
  const unsigned grid = resident_grid(reinterpret_cast<const void*>(&fwd_kernel_t<X, R>), a.threads, smem, (a.rows + R - 1) / R);
  fwd_kernel_t<X, R><<<grid, a.threads, smem, s>>>(a);
  KV_CUDA_LAUNCHED();
}

template <typename X>
void fwd_t(const FwdArgs& a, cudaStream_t s) {
  if (a.rows == 0) return;
  if (a.rows_per_block == 2) fwd_r<X, 2>(a, s);
  else fwd_r<X, 1>(a, s);
}

template <typename X>
void bwd_t(const BwdArgs& a, cudaStream_t s) {
  if (a.strategy == atomics) {
    KV_CUDA(cudaMemsetAsync(a.dw_acc, 0, sizeof(float) * a.n, s));
    KV_CUDA(cudaMemsetAsync(a.db_acc, 0, sizeof(float) * a.n, s));
  }
  const auto grid = static_cast<unsigned>(a.partials);
  const auto smem = static_cast<size_t>(a.acc_bytes);
  switch (rows_in_flight(a.threads)) {
    case 4: bwd_kernel_t<X, 4><<<grid, a.threads, smem, s>>>(a); break;
    case 2: bwd_kernel_t<X, 2><<<grid, a.threads, smem, s>>>(a); break;
    default: bwd_kernel_t<X, 1><<<grid, a.threads, smem, s>>>(a);
  }
  KV_CUDA_LAUNCHED();
  const ColSum sums[2] = {{a.dw_partials, a.dw_acc, a.dw.base, a.dw.dtype, a.dw.cs},
                          {a.db_partials, a.db_acc, a.db.base, a.db.dtype, a.db.cs}};
  launch_col_sums(sums, 2, a.n, a.partials, a.strategy, s);
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

const void* fwd_kernel(DType x, int rows_per_block) {
  if (x == DType::f32) return fwd_kernel_for<float>(rows_per_block);
  if (x == DType::f16) return fwd_kernel_for<__half>(rows_per_block);
  return fwd_kernel_for<__nv_bfloat16>(rows_per_block);
}

const void* bwd_kernel(DType x, int threads) {
  if (x == DType::f32) return bwd_kernel_for<float>(threads);
  if (x == DType::f16) return bwd_kernel_for<__half>(threads);
  return bwd_kernel_for<__nv_bfloat16>(threads);
}

}  // namespace kv::lncuda
