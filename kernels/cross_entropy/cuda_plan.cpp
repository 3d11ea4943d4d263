// The row split of the CUDA cross-entropy kernels, its reduction shapes and launch checks.
#include "kernels/cross_entropy/cuda_plan.hpp"

#include <algorithm>

#include "device/cuda_check.hpp"
#include "kernels/cuda_row_impl.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "reference/ce_params.hpp"

namespace kv::cecuda {

ConfigKnob block_v_knob() { return {"block_v", {"row", "auto", "2048", "4096", "8192", "16384", "32768"}}; }

Plan plan(const Case& c, int64_t v, DType x, const DeviceProfile& p) {
  Plan pl;
  const std::string b = c.config_or("block_v", "row");
  v = std::max<int64_t>(v, 1);
  if (b == "row") {
    pl.block_v = v;
  } else if (b == "auto") {
    pl.block_v = 4096;
    while (ceil_div(v, pl.block_v) > kMaxCtas) pl.block_v *= 2;
  } else {
    pl.block_v = std::stoll(b);
  }
  pl.ctas = static_cast<int>(std::min<int64_t>(ceil_div(v, pl.block_v), 1 << 30));
  pl.threads = static_cast<int>(32 * c.config_int("num_warps", 8));
  pl.chunk = rowcuda::chunk_elems(x);
  // The segment's raw 16-byte chunks: two segments whole (pipelined), or as many as fit
  // (staged) in a share of the shared memory that leaves an SM 1024 threads: a block of T
  // threads keeps T/1024 of it (all of it from 1024 threads), so smaller blocks share an SM
  // and one's loads overlap another's work; beside the kernels' static buffers (< 1 KiB).
  const int64_t nch = ceil_div(std::min(v, pl.block_v), pl.chunk);
  const int64_t room = std::max<int64_t>(p.smem_per_block - 1024, 0) / 16 * 16;
  const int64_t share = std::max<int64_t>(1, 1024 / std::max(pl.threads, 1));
  const int64_t cache_room = std::max<int64_t>((p.smem_per_block + 1024) / share - 2048, 0) / 16 * 16;
  pl.cache_bytes = std::min(nch * 16, std::min(room, cache_room));
  pl.piped_bytes = 2 * nch * 16 <= room ? 2 * nch * 16 : 0;
  return pl;
}

std::vector<int64_t> row_thresholds(const Case& c, DType x, const DeviceProfile& p) {
  constexpr int64_t kMaxV = int64_t(1) << 24;  // plan_reason's limit
  std::vector<int64_t> t = {rowcuda::chunk_elems(x)};
  // The longest row whose segment a property holds for (both shrink as the row grows, up to
  // the block_v segment): found by bisection over plan() itself, not a copy of its sums.
  auto longest = [&](auto&& holds) {
    int64_t lo = 0, hi = std::min(kMaxV, plan(c, kMaxV, x, p).block_v);
    if (holds(hi)) return int64_t(0);  // never changes
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (holds(mid) ? lo : hi) = mid;
    }
    return lo;
  };
  const int64_t staged = longest([&](int64_t v) {
    const Plan pl = plan(c, v, x, p);
    return pl.cache_bytes >= ceil_div(std::min(v, pl.block_v), pl.chunk) * 16;
  });
  const int64_t piped = longest([&](int64_t v) { return plan(c, v, x, p).piped_bytes > 0; });
  for (int64_t v : {staged, piped})
    if (v > 0) t.push_back(v);
  // One more block per row: k segments of block_v (block_v auto grows with the row).
  for (int64_t b = 2048; b <= kMaxV; b *= 2)
    for (int64_t k = 1; k <= kMaxCtas; ++k)
      if (k * b < kMaxV && plan(c, k * b, x, p).ctas != plan(c, k * b + 1, x, p).ctas) t.push_back(k * b);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

ReductionShape row_shape(const Plan& pl, int64_t v) {
  ReductionShape s = row_reduction(std::min(std::max<int64_t>(v, 1), pl.block_v), pl.threads, pl.chunk);
  s.partials = pl.ctas - 1;
  return s;
}

ReductionShape rows_shape(int64_t rows) { return row_reduction(rows, kRowsThreads, 1); }

std::optional<std::string> plan_reason(const Plan& pl, int64_t v, DType x, DType g, bool bwd, bool device) {
  if (v > (int64_t(1) << 24))
    return "V = " + std::to_string(v) + " > 2^24 is not exact in fp32 (the kernels divide by it)";
  if (!row_kernel_built(x, g, bwd))
    return "no cross-entropy kernel for logits " + std::string(dtype_name(x)) + " and gradient " +
           std::string(dtype_name(g)) + " (the gradient takes the logits' dtype)";
  if (pl.ctas > kMaxCtas)
    return "block_v = " + std::to_string(pl.block_v) + " splits a row of " + std::to_string(v) + " into " +
           std::to_string(pl.ctas) + " blocks; a thread-block cluster holds at most " + std::to_string(kMaxCtas) +
           " (use a larger block_v, auto or row)";
  if (!device) return std::nullopt;
  if (pl.ctas > 1) {
    int dev = 0, cluster = 0;
    KV_CUDA(cudaGetDevice(&dev));
    KV_CUDA(cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, dev));
    if (!cluster)
      return "block_v = " + std::to_string(pl.block_v) + " splits each row over " + std::to_string(pl.ctas) +
             " blocks of a thread-block cluster, which this GPU lacks (compute capability 9.0+); use block_v=row";
  }
  // The staged kernel runs every layout; the pipelined one the aligned rows.
  for (bool piped : {false, true}) {
    const int64_t smem = piped ? pl.piped_bytes : pl.cache_bytes;
    if (piped && smem == 0) continue;
    if (max_active_clusters(x, g, bwd, piped, pl.ctas, pl.threads, smem) < 1)
      return "a cluster of " + std::to_string(pl.ctas) + " blocks of " + std::to_string(pl.threads) + " threads with " +
             std::to_string(smem) + " bytes of shared memory each does not fit this GPU";
  }
  return std::nullopt;
}

Params params(const Case& c, int64_t v) {
  const CeParams q = ce_params(c, v);
  Params p;
  p.v = v;
  p.ignore_index = q.ignore_index;
  p.ls = static_cast<float>(round_to(DType::f32, q.ls));
  p.zl = static_cast<float>(round_to(DType::f32, q.zl));
  p.softcap = static_cast<float>(round_to(DType::f32, q.softcap));
  p.reduction = q.reduction == CeReduction::none ? 0 : q.reduction == CeReduction::mean ? 1 : 2;
  p.weighted = q.weighted;
  p.empty_nan = q.empty_mean == CeEmptyMean::nan;
  p.ignored_p = q.ignored_grad == CeIgnoredGrad::propagate;
  return p;
}

}  // namespace kv::cecuda
