// CUDA rope (fwd, bwd), as reference/rope.hpp defines it.
//
// rope: each warp rotates one token at a time (grid-stride over the B*S tokens, 64-bit).
// It stages the token's cos and sin in shared memory as one float4 per pair of a head (fp32,
// read from the tables once per token and reused by every head of q and k); 3d computes the
// token's frame/height/width positions from its sample's grid once, and a token at or past
// min(seq_len, F*H*W) is padding, passed through unchanged. Then its lanes take the token's
// pairs of every head of q and k:
// - 16-byte path (every tensor aligned, whole chunks): a unit is one 16-byte chunk of x from
//   each half (rotate_half: elements j..j+V-1 and their partners j+D/2..) or one 16-byte
//   chunk of whole pairs (interleaved); a lane keeps 4 chunk loads in flight (the first
//   batch issued before the staging) and writes the units it read;
// - element path (any strides or offsets): a lane per pair, neighbouring lanes on
//   neighbouring pairs.
// Each unit or pair is read, then written, by one lane, so outputs may share their input's
// storage (in place). Arithmetic: y_f = RN(RN(x_f c_f) -+ RN(x_g s)), the definition's fp32
// operations with __fmul_rn/__fadd_rn/__fsub_rn (no contraction: the same bits on both
// paths, for every config and GPU), then one rounding to x's dtype.

#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/rope/cuda_launch.hpp"

namespace kv::ropecuda {

using namespace kv::rowcuda;

namespace {

/// Units per lane in flight (R: 4 chunk loads).
template <typename X, bool IL>
struct Geo {
  static constexpr int R = IL ? 4 : 2;
};

/// Token (b, s)'s positions on the 3d axes, or false for a padding token. 32-bit: the host
/// keeps S below 2^31, and s < S.
__device__ __forceinline__ bool positions(const Args& a, int64_t b, int64_t s64, int64_t (&pos)[3]) {
  pos[0] = pos[1] = pos[2] = 0;
  if (!a.mode3d) return true;
  const int32_t* g = a.grid + b * a.grid_sb;
  const int32_t F = g[0], H = g[a.grid_sa], W = g[2 * a.grid_sa], len = a.seq_len[b * a.len_sb];
  if (F < 1 || H < 1 || W < 1) return false;
  const uint32_t s = static_cast<uint32_t>(s64), S = static_cast<uint32_t>(a.s);
  // F*H*W and H*W capped at S (only s < S is compared with them).
  const uint32_t hw = static_cast<uint64_t>(H) * static_cast<uint64_t>(W) >= S ? S : static_cast<uint32_t>(H * W);
  const uint32_t fhw = static_cast<uint64_t>(F) * hw >= S ? S : static_cast<uint32_t>(F) * hw;
  if (len <= 0 || s >= min(static_cast<uint32_t>(len), fhw)) return false;
  const uint32_t f = s / hw, rem = s - f * hw;  // hw capped at S: s < hw gives f = 0, as s / (H*W) does
  const uint32_t h = rem / static_cast<uint32_t>(W);
  pos[0] = f, pos[1] = h, pos[2] = rem - h * static_cast<uint32_t>(W);  // (s / W) % H == (s % (H*W)) / W
  return true;
}

/// Where pair p of a head is staged: pair t of unit c at t*units + c, so the lanes of a
/// quarter warp, which hold neighbouring units, read neighbouring float4s (no bank
/// conflict); ppu pairs per unit.
__device__ __forceinline__ int slot(int p, int ppu, int units) { return (p % ppu) * units + p / ppu; }

/// Stages token (b, s)'s cos and sin in shared memory, one float4 per pair p of a head:
/// {c_f, c_g, s_f, s_g} of its first element f and partner g (rotate_half: p and p + D/2;
/// interleaved: 2p and 2p + 1), read from the tables once per token, at slot(p). Section by
/// section (constant indices into the tables), a lane per pair. False for a padding token.
template <bool IL>
__device__ __forceinline__ bool stage(const Args& a, int64_t b, int64_t s, float4* st, int lane, int ppu, int units) {
  int64_t pos[3];
  if (!positions(a, b, s, pos)) return false;
  const int half = static_cast<int>(a.d / 2);  // the host keeps D below 2^31
  int first = 0;
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    const Table &tc = a.cos[k], &ts = a.sin[k];
    const int64_t oc = b * tc.sb + s * tc.ss + pos[k] * tc.sp, os = b * ts.sb + s * ts.ss + pos[k] * ts.sp;
    for (int p = first + lane; p < first + a.sec[k]; p += 32) {
      // Columns: 3d tables hold one value per pair of the axis; the others one per element.
      const int64_t f = a.mode3d ? p - first : IL ? 2 * p : p, g = a.mode3d ? f : IL ? 2 * p + 1 : p + half;
      st[slot(p, ppu, units)] = make_float4(ld_any(tc.base, tc.dtype, oc + f * tc.sc), ld_any(tc.base, tc.dtype, oc + g * tc.sc),
                          ld_any(ts.base, ts.dtype, os + f * ts.sc), ld_any(ts.base, ts.dtype, os + g * ts.sc));
    }
    first += a.sec[k];
  }
  return true;
}

/// One rotation pair (f the first element, g its partner; t = {c_f, c_g, s_f, s_g}), the
/// definition's operations.
template <bool Bwd>
__device__ __forceinline__ void rot(float xf, float xg, const float4& t, float& yf, float& yg) {
  if constexpr (!Bwd) {
    yf = __fsub_rn(__fmul_rn(xf, t.x), __fmul_rn(xg, t.z));
    yg = __fadd_rn(__fmul_rn(xg, t.y), __fmul_rn(xf, t.w));
  } else {
    yf = __fadd_rn(__fmul_rn(xf, t.x), __fmul_rn(xg, t.w));
    yg = __fsub_rn(__fmul_rn(xg, t.y), __fmul_rn(xf, t.z));
  }
}

/// A lane's unit u of the current token (16-byte accesses): the chunk at element j0 (and
/// its partner chunk at j0 + D/2 for rotate_half) of head `head` of q (k = 0) or k (k = 1);
/// the first nq units are q's, `units` per head. Kept as u and decoded where used (the
/// decoded form of R units would not fit the registers).
struct Unit {
  int k, head, j0;
};

template <int V>
__device__ __forceinline__ Unit decode(int u, int nq, int units) {
  Unit w;
  w.k = u >= nq;
  const int uu = w.k ? u - nq : u;
  w.head = uu / units;
  w.j0 = (uu - w.head * units) * V;
  return w;
}

/// Head `head` of q (k = 0) or k (k = 1) in t (a.in or a.out) for token (b, s); fields picked
/// by value (an index into the parameters would copy them to local memory).
template <typename X>
__device__ __forceinline__ X* head_ptr(const Heads (&t)[2], int64_t b, int64_t s, bool k, int head) {
  return static_cast<X*>(k ? t[1].base : t[0].base) + b * (k ? t[1].sb : t[0].sb) + s * (k ? t[1].ss : t[0].ss) +
         head * (k ? t[1].sh : t[0].sh);
}

/// Token (b, s) with 16-byte accesses (every chunk whole and aligned): R units per lane in
/// flight, the first batch loaded before the tables are staged.
template <typename X, bool IL, bool Bwd, int R>
__device__ __forceinline__ void rotate_vec(const Args& a, int64_t b, int64_t s, float4* st, int lane, int units) {
  constexpr int V = kV<X>;
  const int half = static_cast<int>(a.d / 2);  // the host keeps a token's q and k under 2^31 elements
  const int nq = static_cast<int>(a.heads[0]) * units, nu = nq + static_cast<int>(a.heads[1]) * units;
  uint4 raw[R][IL ? 1 : 2];  // the lane's units u0 + r*32 + lane in flight
  auto load = [&](int u0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int u = u0 + r * 32 + lane;
      if (u >= nu) continue;
      const Unit w = decode<V>(u, nq, units);
      const X* p = head_ptr<X>(a.in, b, s, w.k, w.head) + w.j0;
      raw[r][0] = *reinterpret_cast<const uint4*>(p);
      if constexpr (!IL) raw[r][IL ? 0 : 1] = *reinterpret_cast<const uint4*>(p + half);
    }
  };
  load(0);  // in flight while the token's tables are staged
  const bool real = stage<IL>(a, b, s, st, lane, pairs_per_unit(V, IL), units);
  __syncwarp();
  for (int u0 = 0; u0 < nu; u0 += 32 * R) {
    if (u0 > 0) load(u0);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int u = u0 + r * 32 + lane;
      if (u >= nu) continue;
      const Unit w = decode<V>(u, nq, units);
      X* p = head_ptr<X>(a.out, b, s, w.k, w.head) + w.j0;
      const float4* t4 = st + w.j0 / V;  // the unit's pair t at t4[t * units]
      float xa[V], ya[V];
      unpack_all<X>(raw[r][0], xa);
      // Stores: vec = 1 and a whole chunk, one 16-byte access each. Padding passes x
      // through (copied in registers: no array is picked at run time, which would put both
      // in local memory).
      if constexpr (IL) {
#pragma unroll
        for (int q = 0; q < V / 2; ++q) {
          if (real) rot<Bwd>(xa[2 * q], xa[2 * q + 1], t4[q * units], ya[2 * q], ya[2 * q + 1]);
          else ya[2 * q] = xa[2 * q], ya[2 * q + 1] = xa[2 * q + 1];
        }
        store_chunk<X>(Mat{p, 0, 1, 0, 1}, 0, 0, V, ya);
      } else {
        float xb[V], yb[V];
        unpack_all<X>(raw[r][IL ? 0 : 1], xb);
#pragma unroll
        for (int t = 0; t < V; ++t) {
          if (real) rot<Bwd>(xa[t], xb[t], t4[t * units], ya[t], yb[t]);
          else ya[t] = xa[t], yb[t] = xb[t];
        }
        store_chunk<X>(Mat{p, 0, 1, 0, 1}, 0, 0, V, ya);
        store_chunk<X>(Mat{p + half, 0, 1, 0, 1}, 0, 0, V, yb);
      }
    }
  }
}

/// Token (b, s) element by element (any strides and alignment): a lane per pair,
/// neighbouring lanes on neighbouring pairs, 4 pairs per lane loaded before any is
/// written (the stores could alias the next loads, so nothing else overlaps them).
template <typename X, bool IL, bool Bwd>
__device__ __forceinline__ void rotate_elems(const Args& a, int64_t b, int64_t s, float4* st, int lane, int units) {
  constexpr int V = kV<X>, R = 4;
  const bool real = stage<IL>(a, b, s, st, lane, pairs_per_unit(V, IL), units);
  __syncwarp();
  const int half = static_cast<int>(a.d / 2);
  const int nq = static_cast<int>(a.heads[0]) * half, np = nq + static_cast<int>(a.heads[1]) * half;
  // Pair i of the token: pair p of head `head` of q (the first nq) or k; its elements at
  // f*sd and g*sd from the head's start in t (a.in or a.out).
  auto at = [&](const Heads (&t)[2], int i, int& p, int64_t& f, int64_t& g) {
    const bool k = i >= nq;
    const int ii = k ? i - nq : i, head = ii / half;
    p = ii - head * half;
    const int64_t sd = k ? t[1].sd : t[0].sd;
    f = (IL ? 2 * p : p) * sd, g = (IL ? 2 * p + 1 : p + half) * sd;
    return head_ptr<X>(t, b, s, k, head);
  };
  for (int i0 = 0; i0 < np; i0 += 32 * R) {
    float x[R][2];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (i0 + r * 32 + lane >= np) continue;
      int p;
      int64_t f, g;
      const X* xp = at(a.in, i0 + r * 32 + lane, p, f, g);
      x[r][0] = ld<X>(xp + f), x[r][1] = ld<X>(xp + g);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (i0 + r * 32 + lane >= np) continue;
      int p;
      int64_t f, g;
      X* y = at(a.out, i0 + r * 32 + lane, p, f, g);
      float yf = x[r][0], yg = x[r][1];
      if (real) rot<Bwd>(yf, yg, st[slot(p, pairs_per_unit(V, IL), units)], yf, yg);
      y[f] = cvt<X>(yf), y[g] = cvt<X>(yg);
    }
  }
}

template <typename X, bool IL, bool Bwd, bool Vec>
__global__ void __launch_bounds__(1024) rope_kernel(Args a) {
  constexpr int V = kV<X>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int units = static_cast<int>(((IL ? a.d : a.d / 2) + V - 1) / V);
  float4* st = dyn_smem() + warp * units * pairs_per_unit(V, IL);
  const int64_t ntok = a.b * a.s;
  for (int64_t tok = static_cast<int64_t>(blockIdx.x) * a.warps + warp; tok < ntok;
       tok += static_cast<int64_t>(gridDim.x) * a.warps) {
    int64_t b, s;
    divmod(tok, a.s, b, s);
    if constexpr (Vec) rotate_vec<X, IL, Bwd, Geo<X, IL>::R>(a, b, s, st, lane, units);
    else rotate_elems<X, IL, Bwd>(a, b, s, st, lane, units);
    __syncwarp();  // the next token's staging overwrites st
  }
}

template <typename X, bool IL, bool Vec>
const void* kernel_t(bool bwd) {
  return bwd ? reinterpret_cast<const void*>(&rope_kernel<X, IL, true, Vec>)
             : reinterpret_cast<const void*>(&rope_kernel<X, IL, false, Vec>);
}

template <typename X>
const void* kernel_x(bool il, bool bwd, bool vec) {
  if (vec) return il ? kernel_t<X, true, true>(bwd) : kernel_t<X, false, true>(bwd);
  return il ? kernel_t<X, true, false>(bwd) : kernel_t<X, false, false>(bwd);
}

}  // namespace

const void* kernel(DType x, bool interleaved, bool bwd, bool vec) {
  if (x == DType::f32) return kernel_x<float>(interleaved, bwd, vec);
  if (x == DType::f16) return kernel_x<__half>(interleaved, bwd, vec);
  return kernel_x<__nv_bfloat16>(interleaved, bwd, vec);
}

void launch(DType x, bool interleaved, bool bwd, const Args& a, cudaStream_t s) {
  const int64_t ntok = a.b * a.s;
  if (ntok == 0 || a.heads[0] + a.heads[1] == 0) return;
  const void* fn = kernel(x, interleaved, bwd, a.vec != 0);
  const int64_t smem = smem_bytes(a.d, x, interleaved, a.warps);
  if (smem > 48 * 1024) KV_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t blocks = (ntok + a.warps - 1) / a.warps;  // grid-stride beyond 2^31 - 1
  const dim3 grid(static_cast<unsigned>(blocks < 2147483647 ? blocks : 2147483647));
  Args args = a;
  void* params[] = {&args};
  KV_CUDA(cudaLaunchKernel(fn, grid, dim3(static_cast<unsigned>(32 * a.warps)), params, static_cast<size_t>(smem), s));
  KV_CUDA_LAUNCHED();
}

}  // namespace kv::ropecuda
