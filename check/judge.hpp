// Judging one output tensor against its reference and enclosure: a verdict with
// measurements (never a bare boolean), written so NaN fails and an exact 0 <= 0 passes.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check/tolerance.hpp"
#include "core/digest.hpp"
#include "core/registry.hpp"
#include "core/tensor.hpp"

namespace kv {

/// Reference error target: at most 2^-16 of the enclosure's half-width (or of half an
/// output ulp where the enclosure is narrower), per element.
inline constexpr double kRefTargetFraction = 0x1p-16;

struct TensorVerdict {
  std::string name;
  std::string verdict;  // pass | fail | unverifiable
  int64_t n = 0;
  int64_t n_fail = 0, n_unverifiable = 0, n_nan_mismatch = 0, n_unwritten = 0, n_padding_written = 0;
  /// Failures in unverifiable elements: NaN or unwritten where the contract bounds nothing,
  /// or a number outside the finite bounds of an element that admits NaN.
  int64_t n_fail_unverifiable = 0;
  /// NaN outputs where the admissible set is unbounded (an intermediate may overflow to
  /// ±inf) or admits NaN (OutputEnclosure::may_nan): admitted, counted as unverifiable,
  /// never as pass.
  int64_t n_nan_admitted = 0;
  /// Elements whose defined value is NaN (a NaN input reaches them): NaN is required there.
  int64_t n_nan_expected = 0;
  int64_t n_diff_rn = 0;  // elements whose bits differ from RN(v)
  double max_ratio = 0, max_ulps = 0;
  /// The largest share of the admissible half-width an element uses before the output's own
  /// rounding (0 for the correctly rounded value; above 1 only outside the set): headroom.
  double max_used = 0;
  /// Mean signed and mean absolute error in output ulps (at the reference), over the
  /// elements where both are finite: a bias shows as |bias_ulps| near mean_abs_ulps.
  double bias_ulps = 0, mean_abs_ulps = 0;
  // Quantiles over the elements: upper edges of their histogram bins (within 1.1%), capped
  // at the maximum.
  double p50_ratio = 0, p99_ratio = 0, p50_ulps = 0, p99_ulps = 0;
  /// Points (|v|, |out - v|) bounding every element with finite output and reference, for
  /// recommended (atol, rtol) pairs (check/tolerance.hpp).
  std::vector<TolPoint> tol_points;
  int64_t worst_index = -1, first_fail_index = -1;
  std::vector<int64_t> worst_coords;
  // The bound at the worst element, split into its terms.
  double worst_out = 0, worst_v = 0, worst_lo = 0, worst_hi = 0, worst_ref_err = 0, worst_half_width = 0;
  Digest digest;
  nlohmann::json to_json() const;
};

/// Elements whose reference error misses the target under this enclosure.
std::vector<int64_t> ref_target_misses(const OutputRef& ref, const OutputEnclosure& enc, DType out);

/// Throws HarnessError when the reference value lies outside its own enclosure.
TensorVerdict judge(const TensorView& out, const OutputRef& ref, const OutputEnclosure& enc, bool check_padding);

/// judge() over an output whose reference and enclosure come a block of elements at a
/// time, in order (check/stream.hpp): elements are judged in the same fixed chunks, a chunk
/// that spans two blocks carried over, and chunks merged in order, so the verdict is
/// judge()'s over the whole, bit for bit.
class JudgeStream {
 public:
  explicit JudgeStream(const TensorView& out);
  ~JudgeStream();
  JudgeStream(const JudgeStream&) = delete;
  JudgeStream& operator=(const JudgeStream&) = delete;
  JudgeStream(JudgeStream&&) noexcept;
  /// Output elements [first, first + ref.v.size()) against ref and enc, which hold just
  /// those elements; `first` is where the previous block ended.
  void add(int64_t first, const OutputRef& ref, const OutputEnclosure& enc);
  /// The verdict, once every element was added; throws HarnessError before.
  TensorVerdict finish(bool check_padding);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kv
