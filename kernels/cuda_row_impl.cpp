// The host side shared by the CUDA row impls: views, layout checks, reduction shapes, dW.
#include "kernels/cuda_row_impl.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "kernels/rms_norm/contract.hpp"

namespace kv {

std::optional<rowcuda::Mat> row_view(const DevView& v, RowRole role, int64_t chunk) {
  const TensorDesc& d = v.desc;
  const auto st = d.effective_strides();
  const size_t k = d.shape.size();
  // Dims that index rows: all but the last (rows, cols), or all of them (per_row). They
  // must collapse to one stride: each one's stride is the next non-unit one's extent.
  const size_t row_dims = role == RowRole::per_row ? k : (k == 0 ? 0 : k - 1);
  auto collapsed = collapsed_stride(d, row_dims);
  if (!collapsed) return std::nullopt;
  int64_t rs = *collapsed;
  const int64_t cs = role == RowRole::per_row ? 0 : (k == 0 ? 1 : st[k - 1]);
  if (role == RowRole::cols) rs = 0;
  const int64_t esz = static_cast<int64_t>(dtype_size(d.dtype));
  auto* base = static_cast<uint8_t*>(v.base) + d.offset * esz;
  // Chunks move as 16 bytes (rows dtype) or V elements of a cols tensor's own dtype.
  const int64_t unit = std::min<int64_t>(16, chunk * esz);
  const bool vec = role != RowRole::per_row && cs == 1 && reinterpret_cast<uintptr_t>(base) % unit == 0 &&
                   (rs * esz) % unit == 0;
  return rowcuda::Mat{base, rowcuda::dt_code(d.dtype), vec ? 1 : 0, rs, cs};
}

ReductionShape row_reduction(int64_t n, int64_t threads, int64_t chunk) {
  n = std::max<int64_t>(n, 1);
  const int64_t nch = ceil_div(n, chunk), active = std::min(threads, nch);
  const int64_t serial = std::min(n, chunk * ceil_div(nch, threads));
  const int64_t depth = log2_ceil(std::min<int64_t>(active, 32)) + log2_ceil(ceil_div(active, 32));
  return {serial, depth, 0, std::nullopt};
}

std::vector<Threshold> team_thresholds(const Case& c, DType x, int num_warps, int cap, int wpr, int64_t programs) {
  const int64_t v = rowcuda::chunk_elems(x);
  std::vector<int64_t> row = {v};
  for (int64_t w = 1; w <= num_warps; w *= 2) row.push_back(32 * w * std::max(cap, 1) * v);
  std::vector<Threshold> t = {row_threshold(c, row, "16-byte chunks of the row; the longest row a team of w warps keeps in "
                                                    "registers (" + std::to_string(cap) + " chunks a lane)")};
  const int64_t teams = num_warps / std::max(wpr, 1);
  if (teams > 1) t.push_back(rows_threshold(c, {teams}, "one block's teams, a row each"));
  if (programs > 0) t.push_back(rows_threshold(c, {programs, 2 * programs}, "dW programs holding one row each, then two"));
  return t;
}

ConfigKnob dw_knob() { return {"dw", {"per_sm", "fixed_partials", "atomics"}}; }

rowcuda::DwStrategy dw_strategy(const Case& c) {
  const std::string s = c.config_or("dw", "per_sm");
  return s == "atomics" ? rowcuda::atomics : s == "fixed_partials" ? rowcuda::fixed_partials : rowcuda::per_sm;
}

int64_t dw_partials(const Case& c, const DeviceProfile& p) {
  return dw_strategy(c) == rowcuda::fixed_partials ? 64 : std::max<int64_t>(1, p.sm_count);
}

DeterminismClaims dw_claims(const Case& c) {
  switch (dw_strategy(c)) {
    case rowcuda::atomics: return {};
    case rowcuda::per_sm: return {"run_to_run"};
    default: return {"run_to_run", "gpu_invariant"};
  }
}

ReductionShape dw_rows_reduction(int64_t rows, int64_t partials, rowcuda::DwStrategy s) {
  ReductionShape r{ceil_div(std::max<int64_t>(rows, 1), partials), 0, partials, DType::f32};
  r.ftz = s == rowcuda::atomics;  // fp32 atomicAdd on global memory flushes subnormals
  return r;
}

std::vector<WorkspaceReq> dw_workspaces(const std::vector<std::string>& outputs, int64_t partials, int64_t n) {
  std::vector<WorkspaceReq> w;
  for (auto& o : outputs) {
    w.push_back({o + "_partials", static_cast<size_t>(partials * n) * sizeof(float), DType::f32});
    w.push_back({o + "_acc", static_cast<size_t>(n) * sizeof(float), DType::f32});
  }
  return w;
}

std::vector<ConfigKnob> CudaRowImpl::knobs() const {
  std::vector<std::string> nw = {std::to_string(default_warps_)};  // the default first
  for (const char* w : {"1", "2", "4", "8", "16", "32"})
    if (w != nw[0]) nw.push_back(w);
  std::vector<ConfigKnob> k = {{"num_warps", nw}};
  if (has_dw_) k.push_back(dw_knob());
  return k;
}

DType CudaRowImpl::row_dtype(const Case& c) const {
  for (auto& [name, role] : roles())
    if (role == RowRole::rows) return c.dtypes.at(name);
  throw HarnessError(op_ + ": no rows tensor");
}

std::optional<std::string> CudaRowImpl::layout_reason(const Case& c) const {
  const DType x = row_dtype(c);
  if (c.shape.back() >= (int64_t(1) << 31))
    return "N = " + std::to_string(c.shape.back()) + ": the kernels take rows of fewer than 2^31 elements";
  std::string first;
  for (auto& [name, role] : roles()) {
    if (role != RowRole::rows) continue;
    if (first.empty()) first = name;
    if (c.dtypes.at(name) != x)
      return "the cuda kernel is specialized for one dtype of " + first + " and " + name + " (given " +
             std::string(dtype_name(x)) + " and " + std::string(dtype_name(c.dtypes.at(name))) +
             "); the other tensors may differ";
  }
  std::vector<std::string> rows;
  for (auto& [name, role] : roles())
    if (role == RowRole::rows) rows.push_back(name);
  if (auto why = row_alias_reason(c, rows)) return why;  // fuzzing drew rstd written over w
  const auto specs = registry().op(c.op).tensors(c);
  for (auto& [name, role] : roles()) {
    auto l = c.layout.find(name);
    if (l == c.layout.end() || l->second.strides.empty()) continue;
    DevView v{nullptr, TensorDesc{name, c.dtypes.at(name), {}, l->second.strides, l->second.offset}};
    for (auto& s : specs)
      if (s.name == name) v.desc.shape = s.shape;
    if (!row_view(v, role, rowcuda::chunk_elems(x)))
      return "layout of " + name + ": the kernel addresses its rows with one stride";
  }
  return std::nullopt;
}

std::optional<std::string> CudaTeamImpl::invalid_reason(const Case& c, const DeviceProfile& p) const {
  if (auto why = layout_reason(c)) return why;
  const int64_t threads = threads_per_block(c, p);
  const KernelRef k = kernel_at(c, static_cast<int>(std::min<int64_t>(threads, 1024)));
  return check_block_size(k.name, k.fn, threads, k.dynamic_smem, p,
                          "num_warps=" + c.config_or("num_warps", "?") + " x warp_size " + std::to_string(p.warp_size));
}

rowcuda::Mat CudaRowImpl::view(const DevSet& d, const Case& c, const std::string& name) const {
  for (auto& [n, role] : roles())
    if (n == name) {
      auto m = row_view(d.t.at(name), role, rowcuda::chunk_elems(row_dtype(c)));
      if (!m) throw UsageError("layout of " + name + " not addressable by this kernel");
      return *m;
    }
  throw HarnessError(op_ + ": no tensor " + name);
}

}  // namespace kv
