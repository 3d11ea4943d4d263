// The audit's probes (issue 20, `kverify audit`; design: FPRev masking with exact
// arithmetic): per (op, reduced axis), which inputs carry a lane's crafted terms (+M, -M,
// units u0, zeros), which fixed values the other inputs take so that the axis's sum reaches
// an output unchanged, and where each lane's sum is read back. A lane is one independent
// instance of the sum in a call: a row for `row` axes, a column for `rows` axes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/case.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace kv {

/// Significand bits of a float dtype (24 for fp32, 11 fp16, 8 bf16).
int significand_bits(DType d);

/// The probe's values: unit u0, mask M (powers of two), block size B (units per lane).
/// M = u0 * 2^(ceil(log2(B + 1)) + p_acc + 2): a partial of at most B units meeting one that
/// holds +-M is absorbed (below a quarter ulp of M), +M and -M cancel exactly where they
/// meet, and every other partial is an integer multiple of u0 below 2^p_acc, so exact.
struct ProbeScale {
  double u0 = 1, M = 0;
  int64_t B = 0;      // 0: no exact probe fits the dtypes
  double floor = 0;   // the smallest |S| the readout resolves to relative 2^-p
  double max_in = 0;  // the largest power of two the terms' dtype holds (at most 2^60)
};
/// in: the dtype the terms are stored in; acc: the axis's accumulator; out: the dtype the
/// readout is stored in; divisor: N of an indirect readout v = fl(S / N). A direct readout
/// (the output is S) needs B <= 2^p_out and u0 at least out's smallest subnormal. An
/// indirect one, through up to 3 roundings of relative 2^-p (p = min(p_acc, p_out)), needs
/// B <= 2^(p - 4), so that |v N / u0 - S / u0| <= 3 B 2^-p <= 3/16, inside the 1/4 the
/// audit accepts off the integer grid, and u0 / N normal in out and acc (a subnormal
/// readout loses the relative precision). M must be exact and finite in `in`, and at most
/// 2^60, so that a row of them stays finite in acc. u0 is the largest power of two <= 1 that
/// allows this, B the largest that then fits (fp16 terms: u0 = 2^-23 direct; an indirect
/// fp16 readout over fp32 sums fits no probe).
ProbeScale probe_scale(DType in, DType acc, DType out, bool indirect, int64_t divisor);

/// One lane's terms: (position on the axis, value); every other position holds 0.
struct LaneTerms {
  std::vector<std::pair<int64_t, double>> terms;
  int64_t zero_slot = -1;  // a position holding 0 that the readout goes through (or -1)
};

/// The probe of one (op, axis, output read).
struct AxisProbe {
  std::string op, axis, out;  // out: the output the lane's sum is read from
  std::string how;            // the inputs and the readout, in words
  bool over_rows = false;     // leaves are rows, lanes are columns (else the converse)
  bool zero_slot = false;     // the readout needs a zero term outside the lane's probe
  bool indirect = false;      // read through S / N (probe_scale)
  std::string pattern;        // the input that holds the terms
  /// Fixed inputs set otherwise than the op's defaults (fill_fixed), e.g. x = 0.
  std::vector<std::pair<std::string, double>> fixed = {};
  /// The readout counts the sum this many times (two sums read together: 2).
  double times = 1;
  /// Names the readout where one output carries several (the output's name otherwise).
  std::string label = {};
  /// The output holds one value per lane (layer_norm.fwd's mean[r] = fl(S / N)), read at the
  /// lane's index and scaled by +N.
  bool lane_out = false;
  /// Positive terms (check/audit_triplets.hpp): lanes hold triples (a = M, b = c = v), every
  /// other position of the pattern `zero_in`; read() gives the raw output, which calibration
  /// lanes of known sum classify (positive_leaves). The read slot is a's position.
  bool positive = false;
  double zero_in = 0;
  /// An i32 input set per lane to the read slot (cross_entropy's target: the loss and the
  /// gradient read the sum at the target's logit).
  std::string target = {};
  /// The batch sum of the losses (cross_entropy and FLCE forward, rows): one lane, each leaf a
  /// row whose loss is the term (M: target logit a_code <= -100 beside a 0; v: target 0 beside
  /// the logit v_code; 0: the target alone), the rest of the row -1e4; read in loss[0].
  bool loss_rows = false;
  /// FLCE's logits over the hidden axis (h): lanes are rows, x[r, :] the triple, weight[0, :] =
  /// kHiddenWeight and the other vocabulary rows 0, target 1; read in loss[r] (reduction none),
  /// about logits[r, 0] itself. M sits on a bf16 tie, so logits rounded to bf16 still tell M
  /// from M + 1 ulp of fp32.
  bool hidden = false;

  int64_t length(const Case& c) const;  // leaves: the axis's length
  int64_t lanes(const Case& c) const;   // independent sums per call
  /// The other inputs' fixed values (every element). Once per TensorSet, and again after
  /// any call where an output aliases an input.
  void fill_fixed(TensorSet& ts, const Case& c) const;
  /// The pattern input: lane l gets lanes[l] (lanes past the vector's end: zeros).
  void fill(TensorSet& ts, const Case& c, const std::vector<LaneTerms>& lanes) const;
  /// The lane's sum S as read (before the grid check): NaN where the output is not finite.
  double read(const TensorSet& ts, const Case& c, int64_t lane, const LaneTerms& t) const;
};

/// A positive probe's inputs (pattern values) for one scale: a holds the term M, b = c the
/// term v with U/4 < v < U/2 (U = one ulp of M in the accumulator), w the control term in
/// (U/2, U): a + w sums to M + U in any order, a alone to M.
struct PositiveLeaves {
  double a = 0, v = 0, w = 0;
  double M = 0, U = 0;
};
/// Why the case leaves the probe no exact readout (cross_entropy: a loss per batch, not per
/// row; softcap's tanh or label smoothing's signed sum in the readout; FLCE: V or the mean's
/// BT no power of two, or attributes that move dlogits off g (1/V - [j = t])); empty when none.
std::string probe_unfit(const AxisProbe& p, const Case& c);
/// The scales to try, best first (rms_norm.fwd: x with x^2 exact, several significands of M;
/// softmax.fwd: x_a = 0 so M = exp(0) = 1, v = exp(x_b) from the input dtype's grid). Empty
/// where the input dtype holds none.
std::vector<PositiveLeaves> positive_leaves(const AxisProbe& p, DType in, DType acc);
/// weight[0, :] of the FLCE h probe: 29/8, so that M = 9/2 * 29/8 = 261/16 lies halfway between
/// the bf16 values 16.25 (even) and 16.375.
inline constexpr double kHiddenWeight = 3.625;

/// The probes of an op's axis (one per output read: layer_norm.bwd rows reads dw and db);
/// empty where none exists (then `unmeasurable` says why).
std::vector<AxisProbe> axis_probes(const std::string& op, const std::string& axis);

/// Why an axis that has no probe cannot be measured (positive-only sums, readouts through
/// exp or log), and the sibling whose measurement informs it where one exists.
std::string unmeasurable_why(const std::string& op, const std::string& axis);

}  // namespace kv
