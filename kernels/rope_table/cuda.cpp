// The CUDA rope_table impl: config, contract, determinism claims, launch (kernel in
// cuda_kernels.cu).
#include "kernels/rope_table/cuda.hpp"

#include <cstdint>

#include "core/impl_version.hpp"
#include "kernels/cuda_impl.hpp"
#include "kernels/cuda_rows.hpp"
#include "kernels/rope_table/cuda_launch.hpp"

namespace kv {

namespace {

uint8_t* payload(const DevView& v) {
  return static_cast<uint8_t*>(v.base) + v.desc.offset * static_cast<int64_t>(dtype_size(v.desc.dtype));
}

class CudaRopeTable : public CudaImpl {
 public:
  std::string op() const override { return "rope_table.fwd"; }
  std::string name() const override { return "cuda"; }
  std::string version() const override { return impl_version("cuda_rope_table"); }
  std::vector<ConfigKnob> knobs() const override { return {{"num_warps", {"8", "1", "2", "4", "16", "32"}}}; }

  Contract contract(const Case& c, const DeviceProfile&) const override {
    // angle = __fmul_rn(pos, inv_freq) is the mandated fp32 rounding; cosf and sinf are
    // CUDA's full-range functions: 2 ulp each (CUDA C++ Programming Guide, Mathematical
    // Functions, single precision), no other arithmetic.
    Contract k;
    k.acc = DType::f32;
    k.fma = false;
    k.ftz = false;
    k.math_ulps = {{"sin", 2.0}, {"cos", 2.0}};
    for (const char* t : {"cos", "sin"}) k.determinism[t] = with_batch_claim(c, t, {"run_to_run", "config_invariant", "gpu_invariant"});
    return k;
  }

 protected:
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override {
    return c.config_int("num_warps", 8) * p.warp_size;
  }
  std::vector<KernelRef> kernels(const Case&) const override {
    return {{"rope_table.fwd", ropetablecuda::table_kernel(), 0}};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    if (c.shape[1] / 2 > (int64_t(1) << 31) - 1) return "D/2 beyond 2^31 - 1";
    return std::nullopt;
  }
  void launch(DevSet& d, const Case& c, const DeviceProfile&) const override {
    const DevView &pos = d.t.at("positions"), &inv = d.t.at("inv_freq"), &cs = d.t.at("cos"), &sn = d.t.at("sin");
    const auto cst = cs.desc.effective_strides(), sst = sn.desc.effective_strides();
    ropetablecuda::TableArgs a{reinterpret_cast<const int32_t*>(payload(pos)), pos.desc.effective_strides()[0],
                          payload(inv), rowcuda::dt_code(inv.desc.dtype), inv.desc.effective_strides()[0],
                          payload(cs), rowcuda::dt_code(cs.desc.dtype), cst[0], cst[1],
                          payload(sn), rowcuda::dt_code(sn.desc.dtype), sst[0], sst[1],
                          c.shape[0], c.shape[1], c.attr("layout") == "interleaved" ? 1 : 0,
                          static_cast<int>(32 * c.config_int("num_warps", 8))};
    ropetablecuda::launch_table(a, d.stream);
  }
};

}  // namespace

void register_cuda_rope_table(Registry& r) { r.add(std::make_unique<CudaRopeTable>()); }

}  // namespace kv
