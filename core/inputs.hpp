// Value distributions for generated inputs, drawn from Philox by logical coordinates.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "core/tensor.hpp"

namespace kv {

/// normal N(0,1); uniform U(-1,1); tiny N(0,1)*2^-10 (RMS near sqrt(eps)); large N(0,1)*2^6;
/// mean_shift N(4,1); wide N(0,1)*2^k with k uniform in [-12, 12];
/// big_mean 256 + N(0,1)/8 (a large mean over a small spread); zeros (all elements equal to
/// the op's shift, 0 for the main inputs); const_rows (N(0,1) drawn once per row: every
/// element of a row equal); subnormal (U(-1,1) times the dtype's smallest normal: mostly
/// subnormal values, ignoring shift and scale).
const std::vector<std::string>& known_dists();

/// Draws a base sample for `dist` at one element; value = shift + scale * sample.
double draw(const std::string& dist, uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords);

enum class ValueDist { normal, uniform, tiny, large, mean_shift, wide, big_mean, zeros, const_rows, subnormal,
                       near_overflow, nan_inject, inf_inject };

/// One tensor's draws with the distribution, the Philox keys and the affine map resolved
/// once (what fill_tensor stores before rounding): shift + scale * draw(...) for most
/// distributions. Throws UsageError for an unknown distribution.
class ValueDrawer {
 public:
  ValueDrawer(const std::string& dist, DType dt, uint64_t seed, const std::string& tensor, double shift, double scale);
  /// The value at these coordinates; `scratch` is working space (reused across calls).
  double value(const std::vector<int64_t>& coords, std::vector<int64_t>& scratch) const;

 private:
  ValueDist d_;
  DType dt_;
  PhiloxKey key_, row_key_;
  double shift_, scale_;
};

/// A uniform integer in [lo, hi) at one element (lo when the range is empty).
int64_t draw_int(uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords, int64_t lo, int64_t hi);

/// Fills every logical element of `v` with RNE(shift + scale * draw(dist, ...)) (subnormal
/// and const_rows as above).
void fill_tensor(TensorView& v, const std::string& dist, uint64_t seed, double shift, double scale);

/// Logical row-major coordinates of a linear index.
void unravel(int64_t linear, const std::vector<int64_t>& shape, std::vector<int64_t>& coords);

}  // namespace kv
