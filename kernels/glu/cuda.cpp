// The CUDA SwiGLU/GeGLU impls: configs, contracts, determinism claims, layouts, launches.
#include "kernels/glu/cuda.hpp"

#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "kernels/cuda_impl.hpp"
#include "kernels/glu/cuda_launch.hpp"

namespace kv {

namespace {

/// Addresses a tensor of shape (..., N) as rows x N with one row stride.
std::optional<glucuda::Mat> as_mat(const DevView& v) {
  const auto& d = v.desc;
  auto st = d.effective_strides();
  const size_t k = d.shape.size();
  auto rs = collapsed_stride(d, k == 0 ? 0 : k - 1);  // size-1 dims skipped, not trusted
  if (!rs) return std::nullopt;
  auto* base = static_cast<uint8_t*>(v.base) + d.offset * static_cast<int64_t>(dtype_size(d.dtype));
  return glucuda::Mat{base, *rs, st[k - 1]};
}

class CudaGlu : public CudaImpl {
 public:
  CudaGlu(bool geglu, bool bwd) : geglu_(geglu), bwd_(bwd) {}
  std::string op() const override { return std::string(geglu_ ? "geglu" : "swiglu") + (bwd_ ? ".bwd" : ".fwd"); }
  std::string name() const override { return "cuda"; }
  std::string version() const override { return impl_version("cuda_glu"); }
  std::vector<ConfigKnob> knobs() const override { return {{"num_warps", {"8", "1", "2", "4", "16", "32"}}}; }

  Contract contract(const Case& c, const DeviceProfile&) const override {
    // Elementwise: no reductions. expf and tanhf carry CUDA's documented maximum error
    // (CUDA C++ Programming Guide, Mathematical Functions: 2 ulp each, full range); division
    // is IEEE (nvcc's default -prec-div=true). nvcc fuses multiply-adds: a fused result lies
    // inside the enclosure of the two separate roundings.
    // Only the functions the kernels call: the runner holds every declared one to the
    // device's calibration (rsqrtf measures 1.51 ulp on an H100, above the host's 1).
    Contract k;
    k.acc = DType::f32;
    k.math_ulps = {{"exp", 2.0}, {"tanh", 2.0}};
    k.fma = true;
    for (const char* t : bwd_ ? std::vector<const char*>{"da", "db"} : std::vector<const char*>{"c"})
      k.determinism[t] = with_batch_claim(c, t, {"run_to_run", "config_invariant", "gpu_invariant"});
    return k;
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile&) const override {
    // launch_t joins rows that follow each other in every tensor into one row, cut into
    // tiles of num_warps * 32 threads x 16 bytes (one tile, two); rows that do not join keep
    // a partial 16-byte chunk where the row length is not a whole number of them.
    const int64_t vx = 16 / static_cast<int64_t>(dtype_size(c.dtypes.at("a")));
    const int64_t tile = c.config_int("num_warps", 8) * 32 * vx;
    const int rank = static_cast<int>(c.shape.size());
    return {{0, rank, {tile, 2 * tile}, "tiles of the joined rows: one, then two"},
            row_threshold(c, {vx}, "16-byte chunks of a row")};
  }

 protected:
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override {
    return c.config_int("num_warps", 8) * p.warp_size;
  }
  std::vector<KernelRef> kernels(const Case& c) const override {
    const DType x = c.dtypes.at("a");
    return {{op() + "<" + std::string(dtype_name(x)) + ">", glucuda::kernel(x, geglu_, bwd_), 0}};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    for (auto& [name, l] : c.dtypes) {
      if (l != c.dtypes.at("a")) return "every tensor must share a's dtype (" + name + " differs)";
    }
    for (auto& [name, l] : c.layout) {
      if (l.strides.empty()) continue;
      DevView v{nullptr, TensorDesc{name, DType::f32, c.shape, l.strides, l.offset}};
      if (!as_mat(v)) return "layout of " + name + ": the kernel addresses rows with one stride";
    }
    return std::nullopt;
  }
  void launch(DevSet& d, const Case& c, const DeviceProfile&) const override {
    const int64_t n = c.shape.empty() ? 1 : c.shape.back();
    const int64_t rows = n == 0 ? 0 : numel(c.shape) / n;
    auto mat = [&](const char* t) {
      auto it = d.t.find(t);
      if (it == d.t.end()) return glucuda::Mat{nullptr, 0, 0};
      auto m = as_mat(it->second);
      if (!m) throw UsageError(std::string("layout of ") + t + " not addressable by this kernel");
      return *m;
    };
    glucuda::Args a{mat("a"), mat("b"), mat("c"), mat("dc"), mat("da"), mat("db"), rows, n,
                    static_cast<int>(c.config_int("num_warps", 8) * 32)};
    glucuda::launch(c.dtypes.at("a"), geglu_, bwd_, a, d.stream);
  }

 private:
  bool geglu_, bwd_;
};

}  // namespace

void register_cuda_glu(Registry& r) {
  for (bool geglu : {false, true})
    for (bool bwd : {false, true}) r.add(std::make_unique<CudaGlu>(geglu, bwd));
}

}  // namespace kv
