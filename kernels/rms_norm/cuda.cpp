// The CUDA RMSNorm impls: configs, contracts, determinism claims, layouts, launches.
#include "kernels/rms_norm/cuda.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "kv_build_info.hpp"
#include "kernels/cuda_impl.hpp"
#include "kernels/cuda_row_impl.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "kernels/rms_norm/cuda_launch.hpp"

namespace kv {

namespace {

/// Addresses a tensor of shape (..., N) as rows x N with one row stride; nullopt when
/// the leading dims do not collapse to a single stride.
std::optional<rmscuda::Mat> as_mat(const DevView& v) {
  const auto& d = v.desc;
  auto st = d.effective_strides();
  size_t k = d.shape.size();
  // All leading dims must collapse to one row stride (a size-1 dim's stride is skipped,
  // not trusted: shape 2x1xN with strides {S0, S1, 1} steps rows by S0).
  auto rs = collapsed_stride(d, k == 0 ? 0 : k - 1);
  if (!rs) return std::nullopt;
  int64_t cs = st[k - 1];
  auto* base = static_cast<uint8_t*>(v.base) + d.offset * static_cast<int64_t>(dtype_size(d.dtype));
  return rmscuda::Mat{base, rmscuda::dt_code(d.dtype), *rs, cs};
}

rmscuda::Vec as_vec(const DevView& v) {
  auto* base = static_cast<uint8_t*>(v.base) + v.desc.offset * static_cast<int64_t>(dtype_size(v.desc.dtype));
  return rmscuda::Vec{base, rmscuda::dt_code(v.desc.dtype), v.desc.effective_strides().back()};
}

class CudaRmsNorm : public CudaImpl {
 public:
  explicit CudaRmsNorm(bool bwd) : bwd_(bwd) {}
  std::string op() const override { return bwd_ ? "rms_norm.bwd" : "rms_norm.fwd"; }
  std::string name() const override { return "cuda"; }
  std::string version() const override { return KV_IMPL_VERSION_CUDA_RMS_NORM; }

  std::vector<ConfigKnob> knobs() const override {
    std::vector<ConfigKnob> k = {{"num_warps", {"4", "1", "2", "8", "16", "32"}}};
    if (bwd_) k.push_back(dw_knob());
    return k;
  }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    // T lanes: serial runs of ceil(N/T), then shuffle and cross-warp trees of depth log2 T.
    const int64_t n = c.shape.back(), T = 32 * c.config_int("num_warps", 4);
    Contract k = rms_norm_contract(c, bwd_, {ceil_div(n, T), log2_ceil(T), 0, std::nullopt},
                                   bwd_ ? dw_partials(c, p) : 1, dw_claims(c));
    k.fma = true;  // nvcc contracts a*b+c; the enclosure of separate roundings contains it
    if (bwd_) k.reductions["rows"].ftz = dw_strategy(c) == rowcuda::atomics;  // global fp32 atomicAdd flushes subnormals
    return k;
  }

  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile& p) const override {
    if (!bwd_) return {};
    return dw_workspaces({"dw"}, dw_partials(c, p), c.shape.back());
  }

 protected:
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override {
    return c.config_int("num_warps", 4) * p.warp_size;
  }
  std::vector<KernelRef> kernels(const Case& c) const override {
    DType x = c.dtypes.at("x");
    if (bwd_) return {{"rms_norm_bwd<" + std::string(dtype_name(x)) + ">", rmscuda::bwd_kernel(x), 0}};
    return {{"rms_norm_fwd<" + std::string(dtype_name(x)) + ">", rmscuda::fwd_kernel(x), 0}};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    // Fuzzing drew rstd written over w: later programs then read rstd values as weights.
    if (auto why = row_alias_reason(c, bwd_ ? std::vector<std::string>{"dy", "x", "dx"} : std::vector<std::string>{"x", "y"}))
      return why;
    for (auto& [name, l] : c.layout) {
      if (l.strides.empty()) continue;
      DevView v{nullptr, TensorDesc{name, DType::f32, {}, l.strides, l.offset}};
      for (auto& s : registry().op(c.op).tensors(c))
        if (s.name == name) v.desc.shape = s.shape;
      if (!as_mat(v)) return "layout of " + name + ": the kernel addresses rows with one stride";
    }
    return std::nullopt;
  }

  void launch(DevSet& d, const Case& c, const DeviceProfile& p) const override {
    const int64_t n = c.shape.back(), rows = numel(c.shape) / n;
    const std::string mode = c.attr("mode");
    const int m = mode == "llama" ? rmscuda::llama : mode == "gemma" ? rmscuda::gemma : rmscuda::none;
    const DType x = c.dtypes.at("x");
    const DType compute = m == rmscuda::none ? x : DType::f32;
    // Real launches use the GPU's own warp size; the profile's only validates.
    const int threads = static_cast<int>(c.config_int("num_warps", 4) * 32);
    auto mat = [&](const char* n_) {
      auto m_ = as_mat(d.t.at(n_));
      if (!m_) throw UsageError(std::string("layout of ") + n_ + " not addressable by this kernel");
      return *m_;
    };
    if (!bwd_) {
      rmscuda::FwdArgs a{mat("x"), mat("y"), as_vec(d.t.at("w")), as_vec(d.t.at("rstd")), rows, n, m,
                         static_cast<float>(round_to(compute, c.attr_real("eps"))),
                         static_cast<float>(c.attr_real("offset")), threads};
      rmscuda::launch_fwd(x, a, d.stream);
      return;
    }
    rmscuda::BwdArgs a{mat("dy"), mat("x"), mat("dx"), as_vec(d.t.at("w")), as_vec(d.t.at("rstd")), as_vec(d.t.at("dw")),
                       rows, n, m, c.attr("m_rounding") == "x_dtype", static_cast<float>(c.attr_real("offset")), threads,
                       dw_strategy(c), dw_partials(c, p), static_cast<float*>(d.ws.at("dw_partials").first),
                       static_cast<float*>(d.ws.at("dw_acc").first)};
    rmscuda::launch_bwd(x, a, d.stream);
  }

 private:
  bool bwd_;
};

}  // namespace

void register_cuda_rms_norm(Registry& r) {
  r.add(std::make_unique<CudaRmsNorm>(false));
  r.add(std::make_unique<CudaRmsNorm>(true));
}

}  // namespace kv
