// How the CUDA cross-entropy kernels split a row (the block_v and num_warps knobs), the
// reduction shapes that split gives, and the launch checks against the device; shared by
// the cross_entropy impls and FLCE's CE step.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/contract.hpp"
#include "core/device.hpp"
#include "core/registry.hpp"
#include "kernels/cross_entropy/cuda_launch.hpp"

namespace kv::cecuda {

/// Blocks of one row at most: a portable thread-block cluster.
constexpr int kMaxCtas = 8;

/// block_v: elements of a row per block. row (the default): one block per row (any GPU;
/// enough blocks where the rows alone fill the GPU, and no cluster waits for its slowest
/// block); auto: the smallest power of two >= 4096 that splits the row into at most 8
/// blocks (parallelism for few rows); a number: that. The choice never depends on the
/// number of rows or the GPU: a row's bits do not either.
ConfigKnob block_v_knob();

struct Plan {
  int64_t block_v = 0;
  int ctas = 1;             // blocks per row (a cluster when > 1)
  int threads = 0;          // 32 * num_warps
  int64_t chunk = 0;        // elements per 16-byte access of the logits
  int64_t cache_bytes = 0;  // the segment's first raw chunks kept in shared memory (staged)
  int64_t piped_bytes = 0;  // two raw segments (pipelined kernel), 0 where they do not fit
};

/// The plan of a case's config for rows of v logits of dtype x under the profile.
Plan plan(const Case& c, int64_t v, DType x, const DeviceProfile& p);

/// Row lengths where the plan of c's config changes for logits of dtype x (Impl::thresholds):
/// the 16-byte chunk; the longest row (or block_v segment) kept whole in shared memory,
/// staged and pipelined; the lengths past which a row takes one more block of its cluster.
std::vector<int64_t> row_thresholds(const Case& c, DType x, const DeviceProfile& p);

/// The sum over a row (axis "row": d, the smoothing sum and wbar): a block's serial run and
/// tree over its segment, then the blocks' partials added in rank order.
ReductionShape row_shape(const Plan& pl, int64_t v);
/// Sums over rows (axis "rows": the loss total and the weight sum): one block of kRowsThreads.
ReductionShape rows_shape(int64_t rows);

/// Why the plan cannot run: the row length, the cluster limit; with `device`, what the
/// current GPU says (thread-block clusters, whether a cluster of this size fits at all).
std::optional<std::string> plan_reason(const Plan& pl, int64_t v, DType x, DType g, bool bwd, bool device);

/// The case's attributes as the kernels take them.
Params params(const Case& c, int64_t v);

}  // namespace kv::cecuda
