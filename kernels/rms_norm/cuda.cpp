// The CUDA RMSNorm impls: configs, contracts, determinism claims, layouts, launches.
#include "kernels/rms_norm/cuda.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "kernels/cuda_impl.hpp"
#include "kernels/cuda_row_impl.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "kernels/rms_norm/cuda_launch.hpp"

namespace kv {

namespace {

/// Each tensor's role: rows x N (x, y, dy, dx), a vector over the columns (w, dw), or one
/// value per row (rstd).
RowRole role_of(const std::string& name) {
  if (name == "w" || name == "dw") return RowRole::cols;
  if (name == "rstd") return RowRole::per_row;
  return RowRole::rows;
}

class CudaRmsNorm : public CudaImpl {
 public:
  explicit CudaRmsNorm(bool bwd) : bwd_(bwd) {}
  std::string op() const override { return bwd_ ? "rms_norm.bwd" : "rms_norm.fwd"; }
  std::string name() const override { return "cuda"; }
  std::string version() const override { return impl_version("cuda_rms_norm"); }

  std::vector<ConfigKnob> knobs() const override {
    // Defaults: the fastest on an H100 at Liger's shapes (reports/gpus/.../rows-speed-*).
    std::vector<ConfigKnob> k = {bwd_ ? ConfigKnob{"num_warps", {"16", "1", "2", "4", "8", "32"}}
                                      : ConfigKnob{"num_warps", {"4", "1", "2", "8", "16", "32"}}};
    if (bwd_) k.push_back(dw_knob());
    return k;
  }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    // A team of P = 32*wpr lanes per row (cuda_launch.hpp): serial runs over each lane's
    // chunks, then shuffle and cross-warp trees (row_reduction's shape with P threads).
    const int64_t n = c.shape.back();
    const DType x = c.dtypes.at("x");
    Contract k = rms_norm_contract(c, bwd_, row_reduction(n, 32 * wpr(c), rowcuda::chunk_elems(x)),
                                   bwd_ ? programs(c, p) : 1, dw_claims(c));
    k.fma = true;  // nvcc contracts a*b+c; the enclosure of separate roundings contains it
    if (bwd_) k.reductions["rows"].ftz = dw_strategy(c) == rowcuda::atomics;  // global fp32 atomicAdd flushes subnormals
    return k;
  }

  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile& p) const override {
    if (!bwd_) return {};
    return dw_workspaces({"dw"}, programs(c, p), c.shape.back());
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const override {
    const DType x = c.dtypes.at("x");
    const int threads = 32 * num_warps(c);
    const int cap = bwd_ ? rmscuda::bwd_chunks(threads) : rmscuda::fwd_chunks(x, threads);
    return team_thresholds(c, x, num_warps(c), cap, wpr(c), bwd_ ? programs(c, p) : 0);
  }

 protected:
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override { return num_warps(c) * p.warp_size; }
  std::vector<KernelRef> kernels(const Case& c) const override { return {kernel_for(c, 32 * num_warps(c))}; }

 public:
  /// As CudaImpl's, with the kernel a block of the profile's threads would run (larger
  /// blocks keep fewer chunks per lane).
  std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const override {
    if (auto why = layout_reason(c)) return why;
    const int64_t threads = threads_per_block(c, p);
    const KernelRef k = kernel_for(c, static_cast<int>(std::min<int64_t>(threads, 1024)));
    return check_block_size(k.name, k.fn, threads, k.dynamic_smem, p,
                            "num_warps=" + c.config_or("num_warps", "?") + " x warp_size " + std::to_string(p.warp_size));
  }

 protected:
  std::optional<std::string> layout_reason(const Case& c) const override {
    if (c.shape.back() >= (int64_t(1) << 31))
      return "N = " + std::to_string(c.shape.back()) + ": the kernels take rows of fewer than 2^31 elements";
    // Fuzzing drew rstd written over w: later programs then read rstd values as weights.
    if (auto why = row_alias_reason(c, bwd_ ? std::vector<std::string>{"dy", "x", "dx"} : std::vector<std::string>{"x", "y"}))
      return why;
    const int64_t chunk = rowcuda::chunk_elems(c.dtypes.at("x"));
    for (auto& [name, l] : c.layout) {
      if (l.strides.empty()) continue;
      DevView v{nullptr, TensorDesc{name, c.dtypes.at(name), {}, l.strides, l.offset}};
      for (auto& s : registry().op(c.op).tensors(c))
        if (s.name == name) v.desc.shape = s.shape;
      if (!row_view(v, role_of(name), chunk)) return "layout of " + name + ": the kernel addresses rows with one stride";
    }
    return std::nullopt;
  }

  void launch(DevSet& d, const Case& c, const DeviceProfile& p) const override {
    const int64_t n = c.shape.back(), rows = numel(c.shape) / n;
    const int m = mode(c);
    const DType x = c.dtypes.at("x");
    const DType compute = m == rmscuda::none ? x : DType::f32;
    // Real launches use the GPU's own warp size; the profile's only validates.
    const int threads = static_cast<int>(num_warps(c) * 32);
    auto v = [&](const char* name) {
      auto m_ = row_view(d.t.at(name), role_of(name), rowcuda::chunk_elems(x));
      if (!m_) throw UsageError(std::string("layout of ") + name + " not addressable by this kernel");
      return *m_;
    };
    const auto offset = static_cast<float>(c.attr_real("offset"));
    if (!bwd_) {
      rmscuda::FwdArgs a{v("x"), v("w"), v("y"), v("rstd"), rows, n, m,
                         static_cast<float>(round_to(compute, c.attr_real("eps"))), offset, threads, wpr(c), 0};
      a.fast = a.x.vec && a.y.vec && a.w.vec && n % rowcuda::chunk_elems(x) == 0 && c.dtypes.at("y") == x;
      rmscuda::launch_fwd(x, a, d.stream);
      return;
    }
    rmscuda::BwdArgs a{v("dy"), v("x"), v("w"), v("rstd"), v("dx"), v("dw"), rows, n, m,
                       c.attr("m_rounding") == "x_dtype", offset, threads, wpr(c), dw_strategy(c), programs(c, p),
                       static_cast<float*>(d.ws.at("dw_partials").first), static_cast<float*>(d.ws.at("dw_acc").first)};
    rmscuda::launch_bwd(x, a, d.stream);
  }

 private:
  KernelRef kernel_for(const Case& c, int threads) const {
    const DType x = c.dtypes.at("x");
    if (bwd_)
      return {"rms_norm_bwd<" + std::string(dtype_name(x)) + ">",
              rmscuda::bwd_kernel(x, threads, mode(c), c.attr("m_rounding") == "x_dtype"), 0};
    return {"rms_norm_fwd<" + std::string(dtype_name(x)) + ">", rmscuda::fwd_kernel(x, threads, mode(c)), 0};
  }
  static int mode(const Case& c) {
    const std::string m = c.attr("mode");
    return m == "llama" ? rmscuda::llama : m == "gemma" ? rmscuda::gemma : rmscuda::none;
  }
  int num_warps(const Case& c) const { return static_cast<int>(c.config_int("num_warps", bwd_ ? 16 : 4)); }
  /// Warps per row (a team), as the kernels choose it.
  int wpr(const Case& c) const {
    const int64_t n = c.shape.back();
    const DType x = c.dtypes.at("x");
    return bwd_ ? rmscuda::bwd_wpr(n, x, num_warps(c)) : rmscuda::fwd_wpr(n, x, num_warps(c));
  }
  /// dW programs: the blocks (dw_partials: the SM count or 64) times the teams in each.
  int64_t programs(const Case& c, const DeviceProfile& p) const { return dw_partials(c, p) * (num_warps(c) / wpr(c)); }

  bool bwd_;
};

}  // namespace

void register_cuda_rms_norm(Registry& r) {
  r.add(std::make_unique<CudaRmsNorm>(false));
  r.add(std::make_unique<CudaRmsNorm>(true));
}

}  // namespace kv
