// The reference, enclosure and judging of a case's row-local outputs a block of its rows at
// a time (OpBinding::slice_dims), so that the host memory they take beyond the case's own
// tensors is one block's (issue 18: 2^31-element cases on a 128 GiB host); outputs reduced
// over rows are evaluated whole. Verdicts, counts and the reference method are those of
// the whole-tensor path (run/runner.cpp), bit for bit.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "check/judge.hpp"
#include "core/case.hpp"
#include "core/contract.hpp"
#include "core/registry.hpp"

namespace kv {

/// Reference working set per element: the value and its bound, the enclosure's bounds and
/// flags (OutputRef, OutputEnclosure).
inline constexpr double kRefBytesPerOutput = 2 * 8 + 2 * 8 + 2;
/// An input element as the reference reads it (OpInputs: an exact double).
inline constexpr double kRefBytesPerInput = 8;

struct StreamPlan {
  std::map<std::string, int> dims;            // op.slice_dims(c)
  std::set<std::string> sliced, whole;        // outputs by block, outputs evaluated whole
  int64_t extent = 0, block = 0, blocks = 1;  // dim-0 indices: all, per block, blocks
  double block_bytes = 0;  // the reference's working set of one block
  double whole_bytes = 0;  // and of the whole pass over the outputs not sliced
  bool streams() const { return blocks > 1; }
};

/// How c is evaluated under a block budget: in blocks where the op slices it and it takes
/// more than one block, else whole (blocks = 1).
StreamPlan plan_stream(const Case& c, const OpBinding& op, double budget);

/// Host bytes a case needs: its tensors, an aliased input's pristine copy, the judge's
/// coverage map of a strided output, and the reference's working set, whole or (where
/// the plan streams) the outputs reduced over rows plus a block.
double case_host_bytes(const Case& c, const OpBinding& op, const StreamPlan& plan);

struct StreamOutcome {
  /// An output reduced over rows missed the reference target in a case small enough that
  /// its refinement recomputes every row (kRefineAllMaxElements): run the whole path.
  bool whole_instead = false;
  std::vector<TensorVerdict> verdicts;  // per output, in the op's order
  std::string method;
  int64_t refined = 0, insufficient = 0;
  int64_t blocks_evaluated = 0;  // blocks, each evaluation counted (a refinement evaluates some twice)
  double reference_s = 0, refine_s = 0, judge_s = 0;
};

/// Evaluates c's outputs under contract k as `plan` says and judges each against the
/// impl's outputs in `outs` (which an impl wrote); `ins` holds the inputs as generated
/// (an input that an output aliases, its pristine copy).
StreamOutcome check_streamed(const Case& c, const OpBinding& op, const Contract& k, const StreamPlan& plan,
                             const TensorSet& ins, const TensorSet& outs);

}  // namespace kv
