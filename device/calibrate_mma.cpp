// Tensor-core accumulation probe: what a cuBLAS bf16 x bf16 -> fp32 product (compute type
// fp32, tensor cores allowed) actually does when it sums K exact products, measured with
// adversarial inputs, and a check of the contract FLCE's GPU products will declare.
//
// Probes (after Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor
// cores", PeerJ CS 2021):
//  - rounding: 1 + 1.5*2^-24 (a sum that fp32 round-to-nearest takes up to 1 + 2^-23 and
//    truncation leaves at 1);
//  - block: 1 + k terms of 2^-24 for k = 1..64: sequential fp32 RN adds each as a tie to
//    even (stays 1); a unit that sums a block of products exactly before rounding gives
//    1 + k*2^-24 up to the block size;
//  - alignment: 1 + k terms of 2^-30 (each far below half an fp32 ulp of 1).
// Contract checked: every output within gamma_{K+B}(2^-23) * sum|a_i b_i| of the exact sum,
// with B = 64 (any order of additions, each rounding by truncation or nearest, and a
// block's alignment losses), on random inputs with exponents spread over 2^+-20 and on
// cancelling inputs. The report gives the worst observed error in units of 2^-24 sum|p|.
#include "device/calibrate_mma.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "device/cuda_check.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

namespace kv {

namespace {

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string("cuBLAS ") + what + " failed: status " + std::to_string(static_cast<int>(s)), false);
}

uint16_t bf16_bits(double v) { return static_cast<uint16_t>(encode(DType::bf16, round_to(DType::bf16, v))); }

/// C (m x n, fp32) = A (m x k) * B (k x n), bf16 inputs, column-major, on the GPU.
std::vector<float> gemm(cublasHandle_t h, int m, int n, int k, const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<uint16_t> ha(a.size()), hb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ha[i] = bf16_bits(a[i]);
  for (size_t i = 0; i < b.size(); ++i) hb[i] = bf16_bits(b[i]);
  void *da = nullptr, *db = nullptr, *dc = nullptr;
  KV_CUDA(cudaMalloc(&da, ha.size() * 2));
  KV_CUDA(cudaMalloc(&db, hb.size() * 2));
  KV_CUDA(cudaMalloc(&dc, static_cast<size_t>(m) * n * 4));
  std::vector<float> c(static_cast<size_t>(m) * n);
  try {
    KV_CUDA(cudaMemcpy(da, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
    KV_CUDA(cudaMemcpy(db, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    const float alpha = 1.0f, beta = 0.0f;
    cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, CUDA_R_16BF, m, db, CUDA_R_16BF, k,
                              &beta, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "GemmEx");
    KV_CUDA(cudaDeviceSynchronize());
    KV_CUDA(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(da), cudaFree(db), cudaFree(dc);
    throw;
  }
  KV_CUDA(cudaFree(da));
  KV_CUDA(cudaFree(db));
  KV_CUDA(cudaFree(dc));
  return c;
}

/// Rows of A as probes against B = ones: C[i, 0] = sum of row i (n = 16 columns).
std::vector<float> row_sums(cublasHandle_t h, const std::vector<std::vector<double>>& rows, int k) {
  const int m = static_cast<int>(rows.size()), n = 16;
  std::vector<double> a(static_cast<size_t>(m) * k, 0.0), b(static_cast<size_t>(k) * n, 1.0);
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < k; ++l) a[static_cast<size_t>(l) * m + i] = rows[i][l];
  auto c = gemm(h, m, n, k, a, b);
  return std::vector<float>(c.begin(), c.begin() + m);
}

/// The rounding, block and alignment probes (the file's header) into j.
void probe_accumulation(cublasHandle_t h, nlohmann::json& j) {
  const int k = 128;
  std::vector<std::vector<double>> rows;
  std::vector<double> r(k, 0.0);
  r[0] = 1, r[1] = 1.5 * 0x1p-24;
  rows.push_back(r);
  for (int t = 1; t <= 64; ++t) {
    std::vector<double> p(k, 0.0);
    p[0] = 1;
    for (int l = 1; l <= t; ++l) p[l] = 0x1p-24;
    rows.push_back(p);
  }
  for (int t : {1, 2, 4, 8, 16, 32, 64, 127}) {
    std::vector<double> p(k, 0.0);
    p[0] = 1;
    for (int l = 1; l <= t; ++l) p[l] = 0x1p-30;
    rows.push_back(p);
  }
  auto c = row_sums(h, rows, k);
  const double rnd = c[0];
  j["rounding_probe"] = {{"exact", "1 + 1.5*2^-24"},
                         {"got_minus_1_in_2^-24", (rnd - 1.0) / 0x1p-24},
                         {"behaves_like", rnd == 1.0 ? "truncation" : (rnd == 1.0 + 0x1p-23 ? "round-to-nearest" : "other")}};
  nlohmann::json blk = nlohmann::json::array();
  int exact_up_to = 0;
  for (int t = 1; t <= 64; ++t) {
    const double got = (c[t] - 1.0) / 0x1p-24;
    blk.push_back(got);
    if (got == t && exact_up_to == t - 1) exact_up_to = t;
  }
  j["block_probe"] = {{"exact", "1 + t*2^-24, t = 1..64"}, {"got_minus_1_in_2^-24", blk}, {"exact_for_t_up_to", exact_up_to}};
  nlohmann::json al = nlohmann::json::array();
  int idx = 65;
  for (int t : {1, 2, 4, 8, 16, 32, 64, 127}) al.push_back({{"t", t}, {"got_minus_1_in_2^-30", (c[idx++] - 1.0) / 0x1p-30}});
  j["alignment_probe"] = {{"exact", "1 + t*2^-30"}, {"results", al}};
}

/// The random draws of the contract check, carried from one check to the next.
struct Draws {
  std::mt19937_64 rng{20261122};
  std::normal_distribution<double> nd{0.0, 1.0};
  std::uniform_int_distribution<int> ex{-20, 20};
};

/// One contract check: 64 x 64 outputs of kk products each, inputs spread over 2^+-20 or
/// cancelling in pairs; the worst error in units of 2^-24 sum|p| and the outputs outside.
nlohmann::json check_contract(cublasHandle_t h, int kk, const char* kind, Draws& d) {
  using mpfr = boost::multiprecision::mpfr_float_1000;
  const double B = 64;
  std::mt19937_64& rng = d.rng;
  std::normal_distribution<double>& nd = d.nd;
  std::uniform_int_distribution<int>& ex = d.ex;
  const int m = 64, n = 64;
  std::vector<double> a(static_cast<size_t>(m) * kk), b(static_cast<size_t>(kk) * n);
  for (auto& v : a) v = round_to(DType::bf16, std::ldexp(nd(rng), ex(rng)));
  const bool cancel = std::string(kind) == "cancel";
  for (auto& v : b) v = round_to(DType::bf16, std::ldexp(nd(rng), cancel ? 0 : ex(rng)));
  if (cancel) {  // products in pairs p, -p (every fourth pair -p/2: a small remainder)
    for (int i = 0; i < m; ++i)
      for (int l = 0; l + 1 < kk; l += 2) a[static_cast<size_t>(l + 1) * m + i] = -a[static_cast<size_t>(l) * m + i] * (l % 8 ? 1.0 : 0.5);
    for (int l = 0; l + 1 < kk; l += 2)
      for (int jj = 0; jj < n; ++jj) b[static_cast<size_t>(jj) * kk + l + 1] = b[static_cast<size_t>(jj) * kk + l];
  }
  auto got = gemm(h, m, n, kk, a, b);
  const double g = (kk + B) * 0x1p-23 / (1 - (kk + B) * 0x1p-23);
  double worst = 0;
  int outside = 0;
  for (int i = 0; i < m; ++i)
    for (int jj = 0; jj < n; ++jj) {
      mpfr s = 0, sa = 0;
      for (int l = 0; l < kk; ++l) {
        mpfr p = mpfr(a[static_cast<size_t>(l) * m + i]) * b[static_cast<size_t>(jj) * kk + l];
        s += p;
        sa += abs(p);
      }
      const double err = abs(mpfr(got[static_cast<size_t>(jj) * m + i]) - s).convert_to<double>();
      const double abs_sum = sa.convert_to<double>();
      if (abs_sum > 0) worst = std::max(worst, err / (0x1p-24 * abs_sum));
      if (!(err <= g * abs_sum * (1 + 0x1p-40))) ++outside;
    }
  return {{"K", kk}, {"inputs", kind}, {"outputs", m * n}, {"outside_contract", outside},
          {"worst_err_in_2^-24_sum_abs", worst}, {"contract_bound_in_2^-24_sum_abs", g / 0x1p-24}};
}

/// The contract check on adversarial random products, for K = 64, 1000 and 4096.
nlohmann::json check_contract_all(cublasHandle_t h) {
  Draws d;
  nlohmann::json checks = nlohmann::json::array();
  double worst_all = 0;
  bool all_inside = true;
  for (int kk : {64, 1000, 4096}) {
    for (const char* kind : {"spread", "cancel"}) {
      nlohmann::json one = check_contract(h, kk, kind, d);
      worst_all = std::max(worst_all, one["worst_err_in_2^-24_sum_abs"].get<double>());
      all_inside = all_inside && one["outside_contract"].get<int>() == 0;
      checks.push_back(std::move(one));
    }
  }
  return {{"products", "bf16 x bf16, exact in fp32"},
          {"sum", "gamma_{K+64}(2^-23) * sum|a_i b_i|: any order, truncation or nearest, block alignment"},
          {"checks", checks},
          {"worst_err_in_2^-24_sum_abs", worst_all},
          {"holds", all_inside}};
}

}  // namespace

nlohmann::json calibrate_mma() {
  cublasHandle_t h = nullptr;
  cublas_check(cublasCreate(&h), "Create");
  nlohmann::json j;
  try {
    probe_accumulation(h, j);
    j["contract"] = check_contract_all(h);
  } catch (...) {
    cublasDestroy(h);
    throw;
  }
  cublas_check(cublasDestroy(h), "Destroy");
  return j;
}

}  // namespace kv
