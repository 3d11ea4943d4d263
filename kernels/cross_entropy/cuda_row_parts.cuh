// The building blocks of the cross-entropy row kernels (cuda_kernels.cu, their only
// includer; its header explains the design): the cluster's rank-ordered fold, vector
// stores, a block's segment of a row, the per-element transform, the divider, cp.async
// helpers, the two row sources (staged from global memory, piped through shared memory)
// and the block's shared scalars.
#pragma once
#include <cooperative_groups.h>

#include "kernels/cross_entropy/cuda_launch.hpp"
#include "kernels/cuda_rows.cuh"

namespace kv::cecuda {

using namespace kv::rowcuda;

namespace {

namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned cta_rank(int ctas) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (ctas > 1) return cg::this_cluster().block_rank();
#endif
  return 0;
}

__device__ __forceinline__ void cluster_sync(int ctas) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (ctas > 1) cg::this_cluster().sync();
#endif
}

/// A block-reduced value folded over the cluster's blocks in rank order (the host launches
/// ctas > 1 only where clusters exist): thread 0 writes this block's `slot`; after the
/// cluster barrier lanes k < ctas of warp 0 read block k's slot, lane 0 adds them in rank
/// order and `bcast` hands the result to the block.
template <class Op>
__device__ __forceinline__ float cluster_fold(float v, float* slot, float* bcast, int ctas) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (ctas > 1) {
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x == 0) *slot = v;
    cl.sync();
    if (threadIdx.x < 32) {
      const float mine = static_cast<int>(threadIdx.x) < ctas ? *cl.map_shared_rank(slot, threadIdx.x) : 0.0f;
      float r = __shfl_sync(0xffffffffu, mine, 0);
      for (int k = 1; k < ctas; ++k) r = Op()(r, __shfl_sync(0xffffffffu, mine, k));
      if (threadIdx.x == 0) *bcast = r;
    }
    __syncthreads();
    return *bcast;
  }
#endif
  return v;
}

/// n values rounded to Y at element j0 of row `row` (vector stores where m.vec and the
/// chunk is whole: 16 or 8 bytes).
template <typename Y, int N>
__device__ __forceinline__ void store_n(const Mat& m, int64_t row, int64_t j0, int cnt, const float (&v)[N]) {
  Y* p = static_cast<Y*>(m.base) + row * m.rs + j0 * m.cs;
  if (m.vec && cnt == N) {
    if constexpr (sizeof(Y) == 4) {
      static_assert(N == 4, "fp32 chunks are 4 values");
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
      return;
    } else if constexpr (N == 8) {
      *reinterpret_cast<uint4*>(p) = make_uint4(pack2<Y>(v[0], v[1]), pack2<Y>(v[2], v[3]), pack2<Y>(v[4], v[5]),
                                                pack2<Y>(v[6], v[7]));
      return;
    } else {
      static_assert(N == 4, "16-bit values go in chunks of 8, or of 4 after fp32 logits");
      *reinterpret_cast<uint2*>(p) = make_uint2(pack2<Y>(v[0], v[1]), pack2<Y>(v[2], v[3]));
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (i < cnt) p[i * m.cs] = cvt<Y>(v[i]);
}

/// One block's segment of a row: chunks of VX elements from element s0.
template <int VX>
struct Segment {
  int64_t s0;
  int64_t len;
  int nch;
  __device__ __forceinline__ Segment(unsigned rank, int64_t block_v, int64_t v) {
    s0 = static_cast<int64_t>(rank) * block_v;
    len = v - s0 < block_v ? v - s0 : block_v;
    nch = static_cast<int>((len + VX - 1) / VX);
  }
  __device__ __forceinline__ int64_t j0(int lc) const { return s0 + static_cast<int64_t>(lc) * VX; }
  __device__ __forceinline__ int cnt(int lc) const {
    const int64_t left = len - static_cast<int64_t>(lc) * VX;
    return left < VX ? static_cast<int>(left) : VX;
  }
};

/// The per-element transform of the definition: b added, softcap's tanh. `c` is what the
/// sources hand out (z, or tanh(x/s) under softcap); z follows from it. P (plain: no bias,
/// no softcap) makes both the identity at compile time.
struct Transform {
  Mat bias;
  float S;
  bool cap;
  template <bool P>
  __device__ __forceinline__ float cached(float x, int64_t j) const {
    if constexpr (P) return x;
    if (bias.base) x = __fadd_rn(x, ld_any(bias.base, bias.dtype, j * bias.cs));
    return cap ? tanhf(__fdiv_rn(x, S)) : x;
  }
  template <bool P>
  __device__ __forceinline__ float z(float c) const {
    if constexpr (P) return c;
    return cap ? __fmul_rn(S, c) : c;
  }
  template <bool P, int VX>
  __device__ __forceinline__ void all(float (&c)[VX], int cnt, int64_t j0) const {
    if constexpr (!P) for_elems<VX>(cnt, [&](int i) { c[i] = cached<P>(c[i], j0 + i); });
  }
};

/// e / den as IEEE division rounds it (__fdiv_rn's bits), with den fixed for a row: where
/// 2^-100 <= e <= 1 <= den <= 2^24 (quotient and residuals normal), q = e * RN(1/den)
/// corrected twice by its exact residual e - q den (Markstein: from a quotient within an
/// ulp, one correction with the correctly rounded reciprocal gives the correctly rounded
/// quotient); __fdiv_rn elsewhere (NaN, infinities, tiny e).
struct Divider {
  float den, y;
  bool fast;
  __device__ __forceinline__ static Divider of(float d) { return {d, __fdiv_rn(1.0f, d), d >= 1.0f && d <= 16777216.0f}; }
  __device__ __forceinline__ float operator()(float e) const {
    if (fast && e >= 0x1p-100f && e <= 1.0f) {
      float q = __fmul_rn(e, y);
      q = __fmaf_rn(__fmaf_rn(-q, den, e), y, q);
      return __fmaf_rn(__fmaf_rn(-q, den, e), y, q);
    }
    return __fdiv_rn(e, den);
  }
};

/// 16 bytes copied from global to shared memory asynchronously (cp.async, sm_80+), of which
/// `bytes` are read and the rest zero-filled; both addresses 16-byte aligned.
__device__ __forceinline__ void copy_async16(void* dst, const void* src, int bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
/// copy_async16 issued only once `dep` (a value this thread read from dst) has arrived: the
/// read of the slot is complete before the copy may overwrite it.
__device__ __forceinline__ void copy_async16_after(void* dst, const void* src, int bytes, uint32_t dep) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes), "r"(dep) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits for every committed group of this thread but the latest.
__device__ __forceinline__ void copy_async_wait_all_but_one() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
/// Waits for every committed group of this thread.
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
/// Asks for the 16 bytes at p to be brought into L2.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

/// A row's segment read from global memory: the first pass reads it and keeps its first
/// `ncache` chunks raw in shared memory (as much of the segment as the plan gave room for);
/// later passes take those from there and read the others again (from L2 where they are
/// still there). Aligned rows (x.vec) copy the kept chunks with cp.async, every one in
/// flight at once, and ask L2 for the others meanwhile; other layouts load chunk by chunk.
/// Either way a thread visits its chunks in order (the same maxima).
/// Aligned rows also start the block's next row during the current row's last pass: each
/// thread, done with one of its chunks, copies the next row's chunk into the same slot (or
/// asks L2 for it), so the next row's first pass finds it there or on its way.
template <typename X>
struct StagedSource {
  static constexpr int VX = kV<X>;
  const RowArgs& a;
  const Transform& tf;
  const Segment<VX>& sg;
  int64_t r;
  uint4* cache;
  int ncache;   // chunks kept in shared memory
  int* filled;  // whether this thread's slots are being filled with row r already
  /// The block's next row (a.rows: none).
  __device__ __forceinline__ int64_t next() const {
    const int64_t n = r + gridDim.x / a.ctas;
    return n < a.rows ? n : a.rows;
  }
  template <bool P>
  __device__ __forceinline__ void max_of(const uint4& raw, int lc, float& m) const {
    const int cnt = sg.cnt(lc);
    float c[VX];
    unpack_all<X>(raw, c);
    tf.all<P, VX>(c, cnt, sg.j0(lc));
    for_elems<VX>(cnt, [&](int i) { m = fmaxf(m, tf.z<P>(c[i])); });
  }
  template <bool P>
  __device__ __forceinline__ float max_pass() const {
    float m = -INFINITY;
    const int T = blockDim.x;
    int lc0 = threadIdx.x;
    __syncthreads();  // the previous row's passes are done with the cache
    if (a.x.vec) {
      const int nc = ncache < sg.nch ? ncache : sg.nch;
      const X* row = static_cast<const X*>(a.x.base) + r * a.x.rs;
      if (!*filled) {
        copy_async_wait_all();  // a fill for a row that turned out ignored lands before the slots are refilled
        for (int lc = threadIdx.x; lc < nc; lc += T)
          copy_async16(cache + lc, row + sg.j0(lc), sg.cnt(lc) * static_cast<int>(sizeof(X)));
        copy_async_commit();
        for (int lc = nc + (threadIdx.x - nc % T + T) % T; lc < sg.nch; lc += T) prefetch_l2(row + sg.j0(lc));
      }
      copy_async_wait_all();
      *filled = 0;
      for (; lc0 < nc; lc0 += T) max_of<P>(cache[lc0], lc0, m);
    }
#pragma unroll 1
    for (; lc0 < sg.nch; lc0 += T) {
      const uint4 raw = load_raw<X>(a.x, r, sg.j0(lc0), sg.cnt(lc0));
      if (lc0 < ncache) cache[lc0] = raw;
      max_of<P>(raw, lc0, m);
    }
    return m;
  }
  /// Chunk lc of the row; in the row's last pass (`last`) the next row's chunk lc is then
  /// started into its slot.
  template <bool P>
  __device__ __forceinline__ void chunk(int lc, float (&c)[VX], bool last = false) const {
    const uint4 raw = lc < ncache ? cache[lc] : load_raw<X>(a.x, r, sg.j0(lc), sg.cnt(lc));
    if (last && a.x.vec && next() < a.rows) {
      const X* p = static_cast<const X*>(a.x.base) + next() * a.x.rs + sg.j0(lc);
      if (lc < ncache) copy_async16_after(cache + lc, p, sg.cnt(lc) * static_cast<int>(sizeof(X)), raw.x);
      else prefetch_l2(p);
    }
    unpack_all<X>(raw, c);
    tf.all<P, VX>(c, sg.cnt(lc), sg.j0(lc));
  }
  /// After the last pass: the next row's copies are committed (its first pass waits for them).
  __device__ __forceinline__ void last_pass_done() const {
    if (!a.x.vec || next() >= a.rows) return;
    copy_async_commit();
    *filled = 1;
  }
};

/// A row's segment already in shared memory as raw X (copied there asynchronously while
/// the block worked on the previous row).
template <typename X>
struct PipedSource {
  static constexpr int VX = kV<X>;
  const Transform& tf;
  const Segment<VX>& sg;
  const uint4* buf;
  template <bool P>
  __device__ __forceinline__ float max_pass() const {
    float m = -INFINITY;
    for (int lc = threadIdx.x; lc < sg.nch; lc += blockDim.x) {
      float c[VX];
      chunk<P>(lc, c);
      for_elems<VX>(sg.cnt(lc), [&](int i) { m = fmaxf(m, tf.z<P>(c[i])); });
    }
    return m;
  }
  template <bool P>
  __device__ __forceinline__ void chunk(int lc, float (&c)[VX], bool = false) const {
    unpack_all<X>(buf[lc], c);
    tf.all<P, VX>(c, sg.cnt(lc), sg.j0(lc));
  }
  __device__ __forceinline__ void last_pass_done() const {}
};

/// The block's shared scalars: the block reduction's buffer and the cluster's slots
/// (max, sum, smoothing sum: two sets by row parity) with their broadcasts.
struct Shared {
  float red[32];
  float slots[2][3];
  float bcast[3];
};

}  // namespace

}  // namespace kv::cecuda
