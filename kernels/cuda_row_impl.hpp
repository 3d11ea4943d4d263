// The host side shared by the CUDA row impls (softmax, layer_norm): tensor roles and their
// strided views, the num_warps knob, the reduction shape of a row as the kernels in
// cuda_rows.cuh sum it, and the dW/dB strategies (shared with rms_norm).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_impl.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv {

/// How a row op addresses a tensor: rows x N (x, y, dy, dx), a vector over the N columns
/// (w, b, dw, db), or one value per row (mean, rstd).
enum class RowRole { rows, cols, per_row };

/// The view of a tensor in its role, with vector access allowed where its chunks of
/// `chunk` elements are aligned; nullopt when its rows need more than one stride.
std::optional<rowcuda::Mat> row_view(const DevView& v, RowRole role, int64_t chunk);

/// The sum over a row of n as the row kernels compute it with T threads and chunks of V:
/// a serial run of at most min(n, V*ceil(ceil(n/V)/T)) terms per thread, then a tree
/// over the A = min(T, ceil(n/V)) threads holding terms: lanes and warps past them add
/// exact zeros, so at most log2(min(A,32)) + log2(ceil(A/32)) additions round.
ReductionShape row_reduction(int64_t n, int64_t threads, int64_t chunk);

// dW/dB over rows (rms_norm and layer_norm backward): G programs each sum a contiguous
// chunk of rows in fp32 (serial), then the G partials are summed serially in program order
// (per_sm: G = the SM count, so the bits follow the GPU; fixed_partials: G = 64, the same
// on every GPU), or added atomically in any order (atomics: G = the SM count, not
// run-to-run deterministic).
ConfigKnob dw_knob();
rowcuda::DwStrategy dw_strategy(const Case& c);
int64_t dw_partials(const Case& c, const DeviceProfile& p);
DeterminismClaims dw_claims(const Case& c);
ReductionShape dw_rows_reduction(int64_t rows, int64_t partials, rowcuda::DwStrategy s);
/// fp32 workspaces per summed output `o`: `<o>_partials` [G][n] and `<o>_acc` [n].
std::vector<WorkspaceReq> dw_workspaces(const std::vector<std::string>& outputs, int64_t partials, int64_t n);

/// Thresholds of a row kernel whose team of warps per row follows the row length (softmax,
/// layer_norm, rms_norm; cuda_launch.hpp's wpr): on the row (the last dim of c), the
/// 16-byte chunk of x (rows of a partial chunk take the element path) and, for each team of
/// w = 1, 2, ..., num_warps warps, the longest row its lanes keep in registers (`cap` chunks
/// each; one past it takes 2w warps, or at num_warps is read again; cap 0: every lane's
/// first chunk); on the rows, one block's teams (num_warps / `wpr` rows per block) and, where
/// the backward sums dW over `programs` teams (0: none), one row per program, then two.
std::vector<Threshold> team_thresholds(const Case& c, DType x, int num_warps, int cap, int wpr, int64_t programs);

/// Claims of an output computed row by row: the same bits on every run and GPU, and at
/// every batch size and row position where the op's rows are independent
/// (OpBinding::row_local); not across num_warps (the row sums' shape follows it).
inline DeterminismClaims rowwise_claims(const Case& c, const std::string& out) {
  return with_batch_claim(c, out, {"run_to_run", "gpu_invariant"});
}

class CudaRowImpl : public CudaImpl {
 public:
  CudaRowImpl(std::string op, bool has_dw, int default_warps = 8)
      : op_(std::move(op)), has_dw_(has_dw), default_warps_(default_warps) {}
  std::string op() const override { return op_; }
  std::string name() const override { return "cuda"; }
  std::vector<ConfigKnob> knobs() const override;

 protected:
  /// Every tensor of the op and its role. The rows tensors share one dtype, the kernels'
  /// template parameter; the others may take any of fp32/fp16/bf16.
  virtual std::vector<std::pair<std::string, RowRole>> roles() const = 0;
  /// The rows tensors' dtype.
  DType row_dtype(const Case& c) const;
  int num_warps(const Case& c) const { return static_cast<int>(c.config_int("num_warps", default_warps_)); }
  /// Threads per block of a real launch (32-thread warps).
  int threads(const Case& c) const { return 32 * num_warps(c); }
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override { return num_warps(c) * p.warp_size; }
  std::optional<std::string> layout_reason(const Case& c) const override;
  /// The device view of tensor `name` (UsageError where it is not addressable).
  rowcuda::Mat view(const DevSet& d, const Case& c, const std::string& name) const;

 private:
  std::string op_;
  bool has_dw_;
  int default_warps_;
};

/// A row impl whose kernel follows the block size (softmax, layer_norm: larger blocks keep
/// fewer chunks per lane in registers, under other launch bounds).
class CudaTeamImpl : public CudaRowImpl {
 public:
  using CudaRowImpl::CudaRowImpl;
  /// As CudaImpl's, with the kernel a block of the profile's threads would run (capped at
  /// 1024: a 64-wide warp makes num_warps=16 1024 threads).
  std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const override;

 protected:
  /// The kernel a block of `threads` runs.
  virtual KernelRef kernel_at(const Case& c, int threads) const = 0;
  std::vector<KernelRef> kernels(const Case& c) const override { return {kernel_at(c, threads(c))}; }
};

}  // namespace kv
