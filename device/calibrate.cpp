// Math calibration: measures rsqrtf's ulp error on the current device exhaustively (see
// calibrate_kernels.cu) and spot-checks the GPU's double-based errors against MPFR.
#include "device/calibrate.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "device/calibrate_kernels.hpp"
#include "device/cuda_check.hpp"
#include "core/error.hpp"
#include "reference/policy.hpp"

namespace kv {

namespace {

constexpr uint32_t kFirst = 0x00000001u;  // smallest positive subnormal
constexpr uint32_t kLast = 0x7f7fffffu;   // largest finite
constexpr uint32_t kChunk = 1u << 29;     // inputs per sweep launch
constexpr int kSample = 100000;           // MPFR spot check: evenly spaced inputs + the worst
constexpr double kAgree = 1e-6;           // ulps the GPU and MPFR errors must agree to

/// A device allocation freed on every path out (the calibration throws on errors).
template <typename T>
struct DevBuf {
  T* p = nullptr;
  explicit DevBuf(size_t n) { KV_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

std::string hex(uint32_t bits) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08x", bits);
  return s;
}

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Evaluates rsqrtf on the device for the given inputs: result bits and GPU-measured errors.
void eval_on_device(const std::vector<uint32_t>& in, std::vector<uint32_t>& out, std::vector<double>& err) {
  const size_t n = in.size();
  DevBuf<uint32_t> d_in(n), d_out(n);
  DevBuf<double> d_err(n);
  KV_CUDA(cudaMemcpy(d_in.p, in.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
  calib::launch_rsqrt_eval(d_in.p, d_out.p, d_err.p, static_cast<int>(n));
  out.resize(n);
  err.resize(n);
  KV_CUDA(cudaMemcpy(out.data(), d_out.p, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  KV_CUDA(cudaMemcpy(err.data(), d_err.p, n * sizeof(double), cudaMemcpyDeviceToHost));
}

/// Sets MPFR's default precision (in decimal digits, as boost counts it) for a scope.
struct PrecisionScope {
  unsigned old;
  explicit PrecisionScope(unsigned digits10) : old(mpfr_float::default_precision()) {
    mpfr_float::default_precision(digits10);
  }
  ~PrecisionScope() { mpfr_float::default_precision(old); }
};

/// Error of r = rsqrtf(x) in fp32 ulps at 1/sqrt(x), with 1/sqrt(x) at >= 128 bits (its
/// relative error ~2^-128 is negligible next to the 2^-28 ulp of the GPU's double reference).
double mpfr_err_ulps(uint32_t x_bits, uint32_t r_bits, long& prec_bits) {
  const float r = as_float(r_bits);
  if (!std::isfinite(r)) return INFINITY;  // as the GPU reports a NaN or inf result
  mpfr_float t = mpfr_float(1) / sqrt(mpfr_float(as_float(x_bits)));
  prec_bits = static_cast<long>(mpfr_get_prec(t.backend().data()));
  // t = m 2^ex with m in [0.5, 1): floor(log2 t) = ex - 1 and the fp32 ulp is 2^(ex - 24).
  const long ex = static_cast<long>(mpfr_get_exp(t.backend().data()));
  mpfr_float d = abs(mpfr_float(r) - t);
  return mpfr_float(ldexp(d, static_cast<int>(24 - ex))).convert_to<double>();
}

struct Special {
  const char* name;
  uint32_t bits;
  const char* expect;
  bool (*ok)(float);
};

nlohmann::json check_specials() {
  // CUDA's documented rsqrtf special values (IEEE 754 rSqrt for the signed zero).
  static const Special specials[] = {
      {"+0", 0x00000000u, "+inf", [](float r) { return std::isinf(r) && r > 0; }},
      {"-0", 0x80000000u, "-inf", [](float r) { return std::isinf(r) && r < 0; }},
      {"+inf", 0x7f800000u, "+0", [](float r) { return r == 0 && !std::signbit(r); }},
      {"nan", 0x7fc00000u, "nan", [](float r) { return std::isnan(r); }},
      {"-1", 0xbf800000u, "nan", [](float r) { return std::isnan(r); }},
  };
  std::vector<uint32_t> in, out;
  std::vector<double> err;
  for (const auto& s : specials) in.push_back(s.bits);
  eval_on_device(in, out, err);
  nlohmann::json j = nlohmann::json::object();
  bool all = true;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool ok = specials[i].ok(as_float(out[i]));
    all = all && ok;
    j[specials[i].name] = {{"input", hex(in[i])}, {"result", hex(out[i])}, {"expected", specials[i].expect}, {"ok", ok}};
  }
  j["all_ok"] = all;
  return j;
}

nlohmann::json calibrate_rsqrt(double& max_ulps) {
  // Exhaustive sweep: per-block partials, reduced here in a fixed order (exact, deterministic).
  const int grid = calib::rsqrt_sweep_grid();
  const uint64_t total = uint64_t(kLast) - kFirst + 1;
  const size_t launches = (total + kChunk - 1) / kChunk;
  DevBuf<calib::RsqrtPartial> d_part(launches * grid);
  for (size_t l = 0; l < launches; ++l) {
    const uint64_t first = kFirst + uint64_t(l) * kChunk;
    const uint64_t count = std::min<uint64_t>(kChunk, uint64_t(kLast) + 1 - first);
    calib::launch_rsqrt_sweep(static_cast<uint32_t>(first), static_cast<uint32_t>(count), d_part.p + l * grid, grid);
  }
  std::vector<calib::RsqrtPartial> part(launches * grid);
  KV_CUDA(cudaMemcpy(part.data(), d_part.p, part.size() * sizeof(part[0]), cudaMemcpyDeviceToHost));
  double worst = -1;
  uint32_t worst_bits = 0xffffffffu;
  unsigned long long over_half = 0, over_one = 0;
  for (const auto& p : part) {
    if (p.max_err > worst || (p.max_err == worst && p.worst_bits < worst_bits)) worst = p.max_err, worst_bits = p.worst_bits;
    over_half += p.over_half;
    over_one += p.over_one;
  }
  if (worst < 0) throw HarnessError("calibrate rsqrt: the sweep tested no input");
  max_ulps = worst;

  // MPFR spot check on evenly spaced bit patterns (all binades, subnormals included) and
  // the worst input: the GPU's double-based errors must match MPFR's.
  std::vector<uint32_t> sample;
  for (int k = 0; k < kSample - 1; ++k) sample.push_back(kFirst + uint32_t(uint64_t(k) * (kLast - kFirst) / (kSample - 2)));
  sample.push_back(worst_bits);
  std::vector<uint32_t> res;
  std::vector<double> gpu_err;
  eval_on_device(sample, res, gpu_err);
  // The evaluator shares the sweep's error code, so it must reproduce the sweep's maximum.
  if (gpu_err.back() != worst)
    throw HarnessError("calibrate rsqrt: re-evaluating the worst input " + hex(worst_bits) + " gave " +
                       std::to_string(gpu_err.back()) + " ulp, the sweep " + std::to_string(worst) + " ulp");
  PrecisionScope scope(39);  // 39 decimal digits: >= 128 bits
  double disagree = 0, worst_mpfr = 0;
  uint32_t disagree_bits = 0;
  long prec_bits = 0;
  for (size_t i = 0; i < sample.size(); ++i) {
    if (gpu_err[i] > worst)
      throw HarnessError("calibrate rsqrt: sample input " + hex(sample[i]) + " errs more than the sweep's maximum");
    const double m = mpfr_err_ulps(sample[i], res[i], prec_bits);
    const double d = std::isinf(m) && std::isinf(gpu_err[i]) ? 0.0 : std::fabs(m - gpu_err[i]);
    if (!(d <= disagree)) disagree = d, disagree_bits = sample[i];
    if (i + 1 == sample.size()) worst_mpfr = m;
  }
  if (!(disagree <= kAgree))
    throw HarnessError("calibrate rsqrt: the GPU's double-based error and MPFR's disagree by " +
                       std::to_string(disagree) + " ulp (> 1e-6) at input " + hex(disagree_bits));

  const float wx = as_float(worst_bits);
  return {{"function", "rsqrtf"},
          {"inputs_tested", total},
          {"max_ulps", worst},
          {"worst_input",
           {{"bits", hex(worst_bits)}, {"value", double(wx)}, {"result", hex(res.back())}, {"mpfr_ulps", worst_mpfr}}},
          {"not_correctly_rounded", over_half},
          {"over_1_ulp", over_one},
          {"specials", check_specials()},
          {"mpfr_spot_check",
           {{"sample", sample.size()},
            {"mpfr_bits", prec_bits},
            {"max_disagreement_ulps", disagree},
            {"max_disagreement_input", hex(disagree_bits)},
            {"tolerance_ulps", kAgree}}},
          {"method",
           "exhaustive over positive finite fp32 inputs on the GPU; reference 1/sqrt in double on the GPU (error < "
           "2^-28 ulp), spot-checked with MPFR"}};
}

}  // namespace

MathCalibration calibrate_math() {
  MathCalibration c;
  double m = 0;
  c.detail["rsqrt"] = calibrate_rsqrt(m);
  c.max_ulps["rsqrt"] = m;
  return c;
}

}  // namespace kv
