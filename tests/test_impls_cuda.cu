// A test-only CUDA impl whose kernel writes through an invalid pointer: an illegal
// address is a sticky error, so the worker must end and be restarted.
#include "core/cuda/cuda_check.hpp"
#include "kernels/cuda_impl.hpp"
#include "test_impls.hpp"

namespace kvtest {

namespace {

__global__ void fault_kernel(float* p) { p[threadIdx.x] = 1.0f; }

class Fault : public kv::CudaImpl {
 public:
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override { return "test.fault"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return {{"num_warps", {"4"}}}; }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k;
    k.math_ulps["rsqrt"] = 2;
    k.reductions["row"] = {c.shape.back(), 0, 0, std::nullopt};
    return k;
  }

 protected:
  int64_t threads_per_block(const kv::Case&, const kv::DeviceProfile&) const override { return 32; }
  std::vector<KernelRef> kernels(const kv::Case&) const override {
    return {{"fault_kernel", reinterpret_cast<const void*>(&fault_kernel), 0}};
  }
  void launch(kv::DevSet& d, const kv::Case&, const kv::DeviceProfile&) const override {
    fault_kernel<<<1, 32, 0, d.stream>>>(reinterpret_cast<float*>(0x10));
    KV_CUDA_LAUNCHED();
  }
};

}  // namespace

void register_cuda_test_impls() { kv::registry().add(std::make_unique<Fault>()); }

}  // namespace kvtest
