// "cuda" plugin impls: kverify mirrors the buffers (canaries, poison) to the GPU, the
// plugin enqueues its kernels on kverify's stream, kverify checks and copies back.
#include <cuda_runtime.h>

#include "device/cuda_check.hpp"
#include "core/error.hpp"
#include "ext/plugin_call.hpp"
#include "kernels/cuda_impl.hpp"

namespace kv {

namespace {

class PluginCudaImpl : public PluginImplBase<CudaImpl> {
 public:
  using PluginImplBase::PluginImplBase;

 protected:
  // The plugin validates its own launches (contract() answers KV_UNSUPPORTED).
  int64_t threads_per_block(const Case&, const DeviceProfile&) const override { return 0; }
  std::vector<KernelRef> kernels(const Case&) const override { return {}; }
  void launch(DevSet& d, const Case& c, const DeviceProfile& p) const override {
    PluginCall call(d_, c, p);
    for (auto& s : plugin_tensor_order(c)) {
      const DevView& v = d.t.at(s.name);
      call.add_tensor(v.desc, v.base, s.role == Role::output);
    }
    int rc = d_.launch(call.get(d.stream));
    KV_CUDA(cudaGetLastError());
    if (rc != KV_OK) throw std::runtime_error("plugin impl " + d_.impl + " failed: " + call.message());
  }
};

}  // namespace

std::unique_ptr<Impl> make_plugin_cuda_impl(PluginDesc d) { return std::make_unique<PluginCudaImpl>(std::move(d)); }

}  // namespace kv
