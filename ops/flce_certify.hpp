// Certification samples for FLCE's dense products: a few sums recomputed exactly enough
// with Eigen vectors of MPFR numbers, checked against the double value and its a-priori
// bound. A violation means the bound (or the product) is wrong: a harness error, never a
// verdict on the kernel.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kv {

struct ProductSample {
  std::string what;  // e.g. "logit (3, 17)"
  const double* a;
  int64_t a_stride;
  const double* b;
  int64_t b_stride;
  int64_t n;
  double value;  // the double product's result
  double bound;  // its stated error bound
};

/// Checks every sample at 256 bits; throws HarnessError naming the first violation.
void certify_samples(const std::vector<ProductSample>& samples);

}  // namespace kv
