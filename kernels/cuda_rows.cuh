// Device-side pieces of the CUDA row kernels (softmax, layer_norm, rms_norm). A row of n
// elements is split into chunks of V = 16 / sizeof(X) elements (one 16-byte access);
// lane t of a team of T threads owning a row (softmax, layer_norm, rms_norm: a team of
// warps; cross_entropy: the block) owns chunks t, t+T, t+2T, ... whatever the layout, so
// the order of every sum is the same for aligned rows (vector accesses) and misaligned or
// strided ones (element accesses): bits never depend on a row's address. A lane sums its
// elements serially, then team_reduce combines the lanes: a shuffle tree in each warp, a
// tree across the team's warps. kernels/cuda_row_impl.cpp (row_reduction) declares
// exactly that shape.
#pragma once
#include <type_traits>

#include "kernels/cuda_dtype.cuh"
#include "kernels/cuda_rows.hpp"

namespace kv::rowcuda {

using namespace kv::cuda;

template <typename X>
constexpr int kV = 16 / static_cast<int>(sizeof(X));

/// q = a / b, r = a % b for a >= 0, b > 0 (32-bit division where both fit).
__device__ __forceinline__ void divmod(int64_t a, int64_t b, int64_t& q, int64_t& r) {
  if (((a | b) >> 31) == 0) {
    const uint32_t q32 = static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
    q = q32, r = a - static_cast<int64_t>(q32) * b;
    return;
  }
  q = a / b, r = a - q * b;
}

/// Chunks in a row of n (the host takes n < 2^31).
template <int V>
__device__ __forceinline__ int chunks(int64_t n) {
  return static_cast<int>((n + V - 1) / V);
}
/// Elements of chunk c in a row of n: V, or fewer for the last chunk.
template <int V>
__device__ __forceinline__ int chunk_count(int64_t n, int c) {
  const int64_t left = n - static_cast<int64_t>(c) * V;
  return left < V ? static_cast<int>(left) : V;
}

__device__ __forceinline__ uint32_t word(const uint4& u, int k) { return k == 0 ? u.x : k == 1 ? u.y : k == 2 ? u.z : u.w; }
__device__ __forceinline__ void set_word(uint4& u, int k, uint32_t w) {
  if (k == 0) u.x = w;
  else if (k == 1) u.y = w;
  else if (k == 2) u.z = w;
  else u.w = w;
}

/// Element i of 16 bytes holding X values, as float.
template <typename X>
__device__ __forceinline__ float unpack(const uint4& u, int i);
template <>
__device__ __forceinline__ float unpack<float>(const uint4& u, int i) { return __uint_as_float(word(u, i)); }
template <>
__device__ __forceinline__ float unpack<__nv_bfloat16>(const uint4& u, int i) {
  const uint32_t w = word(u, i >> 1);
  return __uint_as_float((i & 1) ? (w & 0xffff0000u) : (w << 16));
}
template <>
__device__ __forceinline__ float unpack<__half>(const uint4& u, int i) {
  const uint32_t w = word(u, i >> 1);
  return __half2float(__ushort_as_half(static_cast<unsigned short>((i & 1) ? (w >> 16) : (w & 0xffffu))));
}

/// Storage bits of one X value.
template <typename X>
__device__ __forceinline__ uint32_t bits_of(X v);
template <>
__device__ __forceinline__ uint32_t bits_of<float>(float v) { return __float_as_uint(v); }
template <>
__device__ __forceinline__ uint32_t bits_of<__half>(__half v) { return __half_as_ushort(v); }
template <>
__device__ __forceinline__ uint32_t bits_of<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

/// Puts the bits of element i (initially zero) into 16 bytes of X values.
template <typename X>
__device__ __forceinline__ void put_bits(uint4& u, int i, uint32_t b) {
  if constexpr (sizeof(X) == 4) set_word(u, i, b);
  else set_word(u, i >> 1, word(u, i >> 1) | (b << (16 * (i & 1))));
}

/// Chunk j0 .. j0+cnt-1 of row `row` of m (X values), raw; elements past cnt are +0.
template <typename X>
__device__ __forceinline__ uint4 load_raw(const Mat& m, int64_t row, int64_t j0, int cnt) {
  const X* p = static_cast<const X*>(m.base) + row * m.rs + j0 * m.cs;
  if (m.vec && cnt == kV<X>) return *reinterpret_cast<const uint4*>(p);
  uint4 u = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int i = 0; i < kV<X>; ++i)
    if (i < cnt) put_bits<X>(u, i, bits_of<X>(p[i * m.cs]));
  return u;
}

template <typename X>
__device__ __forceinline__ void unpack_all(const uint4& u, float (&v)[kV<X>]) {
#pragma unroll
  for (int i = 0; i < kV<X>; ++i) v[i] = unpack<X>(u, i);
}

template <typename X>
__device__ __forceinline__ void load_chunk(const Mat& m, int64_t row, int64_t j0, int cnt, float (&v)[kV<X>]) {
  unpack_all<X>(load_raw<X>(m, row, j0, cnt), v);
}

/// Two values rounded to X (round to nearest even) in one word; one instruction for
/// fp16 and bf16.
template <typename X>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

/// Stores a whole chunk rounded to X (round to nearest even) at p, 16-byte aligned.
template <typename X>
__device__ __forceinline__ void store_vec(X* p, const float (&v)[kV<X>]) {
  uint4 u;
  if constexpr (sizeof(X) == 4) {
    u = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
  } else {
    u = make_uint4(pack2<X>(v[0], v[1]), pack2<X>(v[2], v[3]), pack2<X>(v[4], v[5]), pack2<X>(v[6], v[7]));
  }
  *reinterpret_cast<uint4*>(p) = u;
}

/// Stores cnt values rounded to X (round to nearest even) at chunk j0 of row `row`.
template <typename X>
__device__ __forceinline__ void store_chunk(const Mat& m, int64_t row, int64_t j0, int cnt, const float (&v)[kV<X>]) {
  X* p = static_cast<X*>(m.base) + row * m.rs + j0 * m.cs;
  if (m.vec && cnt == kV<X>) return store_vec<X>(p, v);
#pragma unroll
  for (int i = 0; i < kV<X>; ++i)
    if (i < cnt) p[i * m.cs] = cvt<X>(v[i]);
}

/// V elements at element offset off of a tensor whose dtype is known only at run time, as
/// float, with vector accesses (the host aligned them to min(16, V * element size) bytes).
template <int V>
__device__ __forceinline__ void load_vec(const Mat& m, int64_t off, float (&v)[V]) {
  if (m.dtype == F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(m.base) + off);
#pragma unroll
    for (int h = 0; h < V / 4; ++h) {
      const float4 f = p[h];
      v[4 * h] = f.x, v[4 * h + 1] = f.y, v[4 * h + 2] = f.z, v[4 * h + 3] = f.w;
    }
    return;
  }
  const uint16_t* p = static_cast<const uint16_t*>(m.base) + off;
  uint4 u;
  if constexpr (V == 8) {
    u = *reinterpret_cast<const uint4*>(p);
  } else {
    const uint2 h = *reinterpret_cast<const uint2*>(p);
    u = make_uint4(h.x, h.y, 0u, 0u);
  }
#pragma unroll
  for (int i = 0; i < V; ++i) v[i] = m.dtype == BF16 ? unpack<__nv_bfloat16>(u, i) : unpack<__half>(u, i);
}

/// V elements of a tensor whose dtype is known only at run time (w, b: a vector over the
/// columns, rs = 0), as float; elements past cnt are 0. Vector accesses when m.vec.
template <int V>
__device__ __forceinline__ void load_any(const Mat& m, int64_t row, int64_t j0, int cnt, float (&v)[V]) {
  const int64_t off = row * m.rs + j0 * m.cs;
  if (m.vec && cnt == V) return load_vec<V>(m, off, v);
#pragma unroll
  for (int i = 0; i < V; ++i) v[i] = i < cnt ? ld_any(m.base, m.dtype, off + i * m.cs) : 0.0f;
}

/// Stores V values (elements past cnt skipped) in a tensor whose dtype is known only at
/// run time, rounded to nearest even; vector accesses when m.vec (as load_any).
template <int V>
__device__ __forceinline__ void store_any(const Mat& m, int64_t row, int64_t j0, int cnt, const float (&v)[V]) {
  const int64_t off = row * m.rs + j0 * m.cs;
  if (m.vec && cnt == V) {
    if (m.dtype == F32) {
      float4* p = reinterpret_cast<float4*>(static_cast<float*>(m.base) + off);
#pragma unroll
      for (int h = 0; h < V / 4; ++h) p[h] = make_float4(v[4 * h], v[4 * h + 1], v[4 * h + 2], v[4 * h + 3]);
      return;
    }
    uint32_t w[V / 2];
#pragma unroll
    for (int h = 0; h < V / 2; ++h)
      w[h] = m.dtype == BF16 ? pack2<__nv_bfloat16>(v[2 * h], v[2 * h + 1]) : pack2<__half>(v[2 * h], v[2 * h + 1]);
    uint16_t* p = static_cast<uint16_t*>(m.base) + off;
    if constexpr (V == 8) *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    else *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    return;
  }
#pragma unroll
  for (int i = 0; i < V; ++i)
    if (i < cnt) st_any(m.base, m.dtype, off + i * m.cs, v[i]);
}

/// The runtime dtype code (kv::cuda::DT) of X.
template <typename X>
constexpr int kDT = sizeof(X) == 4 ? F32 : std::is_same_v<X, __half> ? F16 : BF16;

/// The block's dynamic shared memory (one declaration for every row kernel).
__device__ __forceinline__ float4* dyn_smem() {
  extern __shared__ float4 kv_row_smem[];
  return kv_row_smem;
}

struct SumOp {
  static constexpr float kIdentity = 0.0f;
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  static constexpr float kIdentity = -INFINITY;
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// A block's teams of wpr warps: team `id` of `count` owns a row; `lane` is a thread's lane
/// in it (0 .. P-1, P = 32*wpr).
struct Team {
  int wpr, P, count, id, lane;
  __device__ __forceinline__ explicit Team(int wpr_)
      : wpr(wpr_), P(32 * wpr_), count(blockDim.x / (32 * wpr_)), id(threadIdx.x / (32 * wpr_)),
        lane(threadIdx.x % (32 * wpr_)) {}
};

/// Reductions of K values over a team of wpr warps starting at warp `first`: a shuffle tree
/// in each warp, then each warp combines the team's warp totals by the same tree, so every
/// lane returns the same bits (lanes and warps past the data contribute the identity: a sum
/// adds exact zeros). A team of one warp stops after its tree. Every warp of the block
/// calls it (the barriers are the block's). red: K*32 floats of shared memory.
template <class Op, int K>
__device__ __forceinline__ void team_reduce(float (&v)[K], int wpr, int first, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v[k] = Op()(v[k], __shfl_xor_sync(0xffffffffu, v[k], off));
  if (wpr == 1) return;
  __syncthreads();  // red may still be read by the previous reduction
  if (lane == 0)
#pragma unroll
    for (int k = 0; k < K; ++k) red[k * 32 + warp] = v[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) {
    v[k] = lane < wpr ? red[k * 32 + first + lane] : Op::kIdentity;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v[k] = Op()(v[k], __shfl_xor_sync(0xffffffffu, v[k], off));
  }
}
template <class Op, int K>
__device__ __forceinline__ void team_reduce(float (&v)[K], const Team& t, float* red) {
  team_reduce<Op, K>(v, t.wpr, t.id * t.wpr, red);
}
/// One value of a team's reduction.
template <class Op>
__device__ __forceinline__ float team_reduce1(float v, const Team& t, float* red) {
  float a[1] = {v};
  team_reduce<Op, 1>(a, t, red);
  return a[0];
}
/// The block as one team.
template <class Op, int K>
__device__ __forceinline__ void block_reduce(float (&v)[K], float* red) {
  team_reduce<Op, K>(v, static_cast<int>(blockDim.x >> 5), 0, red);
}
template <int K>
__device__ __forceinline__ void block_sum(float (&v)[K], float* red) {
  block_reduce<SumOp, K>(v, red);
}

/// f(i) for the elements of a chunk in order: all V without a test for a whole chunk (the
/// common case), else those below cnt.
template <int V, class F>
__device__ __forceinline__ void for_elems(int cnt, F&& f) {
  if (cnt == V) {
#pragma unroll
    for (int i = 0; i < V; ++i) f(i);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (i < cnt) f(i);
  }
}

/// f(row, ok) for the rows a block's teams take: groups of t.count rows, one per team,
/// grid-stride; a team past the last row gets its group's first row with ok = false (it
/// loads and reduces with the block's barriers, and stores nothing).
template <class Fn>
__device__ __forceinline__ void team_rows(int64_t rows, const Team& t, Fn&& f) {
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * t.count; g < rows; g += static_cast<int64_t>(gridDim.x) * t.count) {
    const bool ok = g + t.id < rows;
    f(ok ? g + t.id : g, ok);
  }
}

/// The chunks lane `lane` of a team of P lanes owns in a row of n (nch chunks): c = lane,
/// lane+P, lane+2P, ...; the first C of them (kept in registers by the caller, k = 0..C-1)
/// and those past them (far: read again). F: every chunk whole (n a multiple of V).
template <int V, int C, bool F>
struct Lanes {
  int lane, P, nch;
  int64_t n;
  __device__ __forceinline__ Lanes(const Team& t, int64_t n_) : lane(t.lane), P(t.P), nch(chunks<V>(n_)), n(n_) {}
  __device__ __forceinline__ int count(int c) const { return F ? V : chunk_count<V>(n, c); }
  /// f(k, c, cnt) for the kept chunks, in order.
  template <class Fn>
  __device__ __forceinline__ void kept(Fn&& f) const {
#pragma unroll
    for (int k = 0; k < C; ++k) {
      const int c = lane + k * P;
      if (c < nch) f(k, c, count(c));
    }
  }
  /// f(c, cnt) for the chunks past the registers, in order.
  template <class Fn>
  __device__ __forceinline__ void far(Fn&& f) const {
    for (int c = lane + C * P; c < nch; c += P) f(c, count(c));
  }
};

/// Chunk c (cnt elements) of row `row` of m (X values), raw: one 16-byte load where F (the
/// chunk whole and m aligned for vector accesses), else load_raw.
template <typename X, bool F>
__device__ __forceinline__ uint4 row_chunk(const Mat& m, int64_t row, int c, int cnt) {
  if constexpr (F) return *reinterpret_cast<const uint4*>(static_cast<const X*>(m.base) + row * m.rs + static_cast<int64_t>(c) * kV<X>);
  else return load_raw<X>(m, row, static_cast<int64_t>(c) * kV<X>, cnt);
}
/// Stores chunk c of row `row` of m (X values) rounded to X: as row_chunk loads it.
template <typename X, bool F>
__device__ __forceinline__ void put_row_chunk(const Mat& m, int64_t row, int c, int cnt, const float (&v)[kV<X>]) {
  if constexpr (F) store_vec<X>(static_cast<X*>(m.base) + row * m.rs + static_cast<int64_t>(c) * kV<X>, v);
  else store_chunk<X>(m, row, static_cast<int64_t>(c) * kV<X>, cnt, v);
}
/// Chunk c of a vector over the columns (w, b; runtime dtype) as float: vector accesses
/// where F (m aligned), else load_any.
template <int V, bool F>
__device__ __forceinline__ void col_chunk(const Mat& m, int c, int cnt, float (&v)[V]) {
  if constexpr (F) load_vec<V>(m, static_cast<int64_t>(c) * V, v);
  else load_any<V>(m, 0, static_cast<int64_t>(c) * V, cnt, v);
}

/// A kernel's address as launch validation takes it (f(kernel) of the with_* dispatchers).
struct KernelAddr {
  template <class K>
  const void* operator()(K* k) const {
    return reinterpret_cast<const void*>(k);
  }
};

/// Blocks for one block per row (grid-stride beyond the grid limit).
inline unsigned grid_rows(int64_t rows) { return static_cast<unsigned>(rows < 2147483647 ? rows : 2147483647); }

}  // namespace kv::rowcuda
