// Value distributions for generated inputs, drawn from Philox by logical coordinates.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/draw.hpp"
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

using ValueDist = gen::Dist;  // core/draw.hpp, shared with the GPU generator

/// One tensor's draws with the distribution, the Philox keys and the affine map resolved
/// once (what fill_tensor stores before rounding): shift + scale * draw(...) for most
/// distributions. Throws UsageError for an unknown distribution.
class ValueDrawer {
 public:
  ValueDrawer(const std::string& dist, DType dt, uint64_t seed, const std::string& tensor, double shift, double scale);
  /// The value at these coordinates; `scratch` is working space (reused across calls).
  double value(const std::vector<int64_t>& coords, std::vector<int64_t>& scratch) const;
  const gen::Spec& spec() const { return spec_; }

 private:
  gen::Spec spec_;
};

/// A uniform integer in [lo, hi) at one element (lo when the range is empty).
int64_t draw_int(uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords, int64_t lo, int64_t hi);

/// Writes the bits of every element of a contiguous tensor of `shape` in s's dtype, in
/// logical order, to host memory at dst, computed on a GPU with core/draw.hpp's arithmetic
/// (device/gpu_fill.cu): the bits the host loop stores. Returns false where it does not
/// take the tensor (then the host loop fills it); throws DeviceError on a CUDA failure.
using GpuFiller = bool (*)(const gen::Spec& s, const std::vector<int64_t>& shape, uint8_t* dst);
/// Installed by the CUDA build (ops/builtin.cpp); none by default.
void set_gpu_filler(GpuFiller f);
/// Whether fill_tensor hands tensors of at least kGpuFillMin elements to the GPU filler in
/// this process: the runner allows it for cases on a CUDA device, never where the
/// environment sets KV_INPUTS=host (the host path, kept as the cross-check).
void allow_gpu_fill(bool on);
inline constexpr int64_t kGpuFillMin = int64_t(1) << 18;

/// Fills every logical element of `v` with RNE(shift + scale * draw(dist, ...)) (subnormal
/// and const_rows as above).
void fill_tensor(TensorView& v, const std::string& dist, uint64_t seed, double shift, double scale);

/// Logical row-major coordinates of a linear index.
void unravel(int64_t linear, const std::vector<int64_t>& shape, std::vector<int64_t>& coords);

}  // namespace kv
