// CUDA SwiGLU and GeGLU (tanh approximation), forward and backward, elementwise: every
// operation in fp32 in the order reference/swiglu.hpp and reference/geglu.hpp define (nvcc
// may fuse a multiply and an add: the contract says so), expf/tanhf from CUDA's math
// library, IEEE division. The element's value never depends on which thread computes it or
// how it is loaded.
//
// The [rows, n] views are cut into tiles of (threads * VX) elements of one row, VX = 16 /
// sizeof(X); block b takes tiles b, b + grid, ... (64-bit indices; one division per tile,
// none per element). Rows that follow each other in every tensor are taken as one row.
// Where every tensor's rows are contiguous and 16-byte aligned (`vec`), thread t moves
// elements t*VX .. t*VX+VX-1 of its tile with 16-byte accesses (element accesses for a
// row's last partial chunk); otherwise element accesses, thread t taking elements t,
// t + threads, ... of its tile (coalesced for contiguous rows at any alignment).
#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/glu/cuda_launch.hpp"

namespace kv::glucuda {

using namespace kv::cuda;

namespace {

__device__ __forceinline__ float sigmoid(float a) {
  if (a < -88.0f) {  // exp(-a) would overflow: the reference's exp(a) / (1 + exp(a))
    const float e = expf(a);
    return e / (1.0f + e);
  }
  return 1.0f / (1.0f + expf(-a));
}

__device__ __forceinline__ float gelu_tanh_u(float a) {
  const float a3 = (a * a) * a;
  return tanhf(0.7978845608028654f * (a + 0.044715f * a3));
}

/// c = f(a) b.
template <bool Geglu>
__device__ __forceinline__ float fwd(float a, float b) {
  float f;
  if constexpr (Geglu) f = (0.5f * a) * (1.0f + gelu_tanh_u(a));
  else f = a * sigmoid(a);
  return f * b;
}

/// da and db from a, b and dc.
template <bool Geglu>
__device__ __forceinline__ void bwd(float a, float b, float dc, float& da, float& db) {
  if constexpr (Geglu) {
    const float th = gelu_tanh_u(a);
    db = dc * ((0.5f * a) * (1.0f + th));
    const float t1 = 0.5f * (1.0f + th);
    const float dth = 1.0f - th * th;
    const float poly = 0.7978845608028654f * (1.0f + 0.134145f * (a * a));
    const float t2 = ((0.5f * a) * dth) * poly;
    da = (dc * b) * (t1 + t2);
  } else {
    const float sig = sigmoid(a);
    db = dc * (a * sig);
    const float inner = 1.0f + a * (1.0f - sig);
    da = (dc * b) * (sig * inner);
  }
}

template <typename X>
__device__ __forceinline__ X* at(const Mat& m, int64_t r, int64_t j) {
  return static_cast<X*>(m.base) + r * m.rs + j * m.cs;
}

/// One element (r, j), element accesses; every input read before any output is written
/// (outputs may alias inputs).
template <typename X, bool Geglu, bool Bwd>
__device__ __forceinline__ void one(const Args& g, int64_t r, int64_t j) {
  const float a = ld<X>(at<X>(g.a, r, j)), b = ld<X>(at<X>(g.b, r, j));
  if constexpr (!Bwd) {
    *at<X>(g.c, r, j) = cvt<X>(fwd<Geglu>(a, b));
  } else {
    const float dc = ld<X>(at<X>(g.dc, r, j));
    float da, db;
    bwd<Geglu>(a, b, dc, da, db);
    *at<X>(g.db, r, j) = cvt<X>(db);
    *at<X>(g.da, r, j) = cvt<X>(da);
  }
}

template <typename X>
__device__ __forceinline__ uint4 ld16(const Mat& m, int64_t r, int64_t j) {
  return *reinterpret_cast<const uint4*>(at<X>(m, r, j));
}

template <typename X>
__device__ __forceinline__ void st16(const Mat& m, int64_t r, int64_t j, const float (&v)[rowcuda::kV<X>]) {
  uint4 u;
  if constexpr (sizeof(X) == 4) {
    u = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
  } else {
    u = make_uint4(rowcuda::pack2<X>(v[0], v[1]), rowcuda::pack2<X>(v[2], v[3]), rowcuda::pack2<X>(v[4], v[5]),
                   rowcuda::pack2<X>(v[6], v[7]));
  }
  *reinterpret_cast<uint4*>(at<X>(m, r, j)) = u;
}

/// A whole aligned chunk of VX elements from (r, j): 16-byte loads of every input first,
/// then the outputs.
template <typename X, bool Geglu, bool Bwd>
__device__ __forceinline__ void chunk16(const Args& g, int64_t r, int64_t j) {
  constexpr int VX = rowcuda::kV<X>;
  const uint4 ua = ld16<X>(g.a, r, j), ub = ld16<X>(g.b, r, j);
  if constexpr (!Bwd) {
    float c[VX];
#pragma unroll
    for (int i = 0; i < VX; ++i) c[i] = fwd<Geglu>(rowcuda::unpack<X>(ua, i), rowcuda::unpack<X>(ub, i));
    st16<X>(g.c, r, j, c);
  } else {
    const uint4 udc = ld16<X>(g.dc, r, j);
    float da[VX], db[VX];
#pragma unroll
    for (int i = 0; i < VX; ++i)
      bwd<Geglu>(rowcuda::unpack<X>(ua, i), rowcuda::unpack<X>(ub, i), rowcuda::unpack<X>(udc, i), da[i], db[i]);
    st16<X>(g.db, r, j, db);
    st16<X>(g.da, r, j, da);
  }
}

template <typename X, bool Geglu, bool Bwd>
__global__ void glu_kernel(Args g) {
  constexpr int VX = rowcuda::kV<X>;
  const int64_t T = blockDim.x, tile = T * VX;
  const int64_t tpr = (g.n + tile - 1) / tile;  // tiles per row
  const int64_t tiles = g.rows * tpr;
  for (int64_t k = blockIdx.x; k < tiles; k += gridDim.x) {
    const int64_t r = k / tpr, j0 = (k - r * tpr) * tile;
    if (g.vec) {
      const int64_t j = j0 + threadIdx.x * static_cast<int64_t>(VX);
      if (j + VX <= g.n) {
        chunk16<X, Geglu, Bwd>(g, r, j);
      } else {
        for (int64_t e = j; e < g.n; ++e) one<X, Geglu, Bwd>(g, r, e);
      }
    } else {
#pragma unroll
      for (int i = 0; i < VX; ++i) {
        const int64_t j = j0 + i * T + threadIdx.x;
        if (j < g.n) one<X, Geglu, Bwd>(g, r, j);
      }
    }
  }
}

template <typename X>
const void* kernel_t(bool geglu, bool bwd) {
  if (geglu) return bwd ? reinterpret_cast<const void*>(&glu_kernel<X, true, true>)
                        : reinterpret_cast<const void*>(&glu_kernel<X, true, false>);
  return bwd ? reinterpret_cast<const void*>(&glu_kernel<X, false, true>)
             : reinterpret_cast<const void*>(&glu_kernel<X, false, false>);
}

/// The tensors a launch touches.
template <class F>
bool all_of(const Args& a, bool bwd, F&& f) {
  if (!f(a.a) || !f(a.b)) return false;
  return bwd ? f(a.dc) && f(a.da) && f(a.db) : f(a.c);
}

template <typename X>
void launch_t(bool geglu, bool bwd, Args a, cudaStream_t s) {
  if (a.rows * a.n == 0) return;
  // Rows that follow each other in every tensor are one row of rows * n.
  if (a.rows > 1 && all_of(a, bwd, [&](const Mat& m) { return m.cs == 1 && m.rs == a.n; })) {
    a.n *= a.rows;
    a.rows = 1;
  }
  a.vec = all_of(a, bwd, [&](const Mat& m) {
    const auto addr = reinterpret_cast<uintptr_t>(m.base);
    return m.cs == 1 && addr % 16 == 0 && (a.rows == 1 || (m.rs * static_cast<int64_t>(sizeof(X))) % 16 == 0);
  });
  const int64_t tile = static_cast<int64_t>(a.threads) * (16 / static_cast<int64_t>(sizeof(X)));
  const int64_t tiles = a.rows * ((a.n + tile - 1) / tile);
  const unsigned grid = static_cast<unsigned>(tiles < 2147483647LL ? tiles : 2147483647LL);  // the loop covers the rest
  if (geglu && bwd) glu_kernel<X, true, true><<<grid, a.threads, 0, s>>>(a);
  else if (geglu) glu_kernel<X, true, false><<<grid, a.threads, 0, s>>>(a);
  else if (bwd) glu_kernel<X, false, true><<<grid, a.threads, 0, s>>>(a);
  else glu_kernel<X, false, false><<<grid, a.threads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

}  // namespace

void launch(DType x, bool geglu, bool bwd, const Args& a, cudaStream_t s) {
  if (x == DType::f32) launch_t<float>(geglu, bwd, a, s);
  else if (x == DType::f16) launch_t<__half>(geglu, bwd, a, s);
  else launch_t<__nv_bfloat16>(geglu, bwd, a, s);
}

const void* kernel(DType x, bool geglu, bool bwd) {
  if (x == DType::f32) return kernel_t<float>(geglu, bwd);
  if (x == DType::f16) return kernel_t<__half>(geglu, bwd);
  return kernel_t<__nv_bfloat16>(geglu, bwd);
}

}  // namespace kv::glucuda
