#include "ops/flce_certify.hpp"

#include <boost/multiprecision/eigen.hpp>
#include <boost/multiprecision/mpfr.hpp>
#include <Eigen/Core>
#include <cmath>

#include "core/error.hpp"
#include "reference/policy.hpp"

namespace kv {

void certify_samples(const std::vector<ProductSample>& samples) {
  using Vec = Eigen::Matrix<mpfr_float, Eigen::Dynamic, 1>;
  set_mpfr_bits(256);
  for (const auto& s : samples) {
    Vec a(s.n), b(s.n);
    for (int64_t i = 0; i < s.n; ++i) a[i] = s.a[i * s.a_stride], b[i] = s.b[i * s.b_stride];
    // Each product of two doubles is exact at 256 bits; the n additions err by at most
    // n 2^-256 sum|a_i b_i|, added to the bound below.
    const mpfr_float exact = a.dot(b);
    const mpfr_float mag = a.cwiseAbs().dot(b.cwiseAbs());
    const mpfr_float slack = mag * static_cast<double>(s.n) * mpfr_float(0x1p-250);
    if (abs(exact - s.value) > s.bound + slack)
      throw HarnessError("FLCE reference self-check failed: " + s.what + " = " + std::to_string(s.value) +
                         " with bound " + std::to_string(s.bound) + ", exact " +
                         std::to_string(exact.convert_to<double>()));
  }
}

}  // namespace kv
