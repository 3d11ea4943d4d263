// Test-only CUDA impls: a kernel that writes through an invalid pointer (an illegal
// address is a sticky error, so the worker must end and be restarted), and one that writes
// a byte just outside output y on the device (the device canaries must catch it).
#include "device/cuda_check.hpp"
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

__global__ void poke_kernel(uint8_t* p, long long at) {
  if (threadIdx.x == 0) p[at] = 0;
}

/// Writes one byte outside y (knob `where`): the first byte past its end, the last byte
/// of a row past its end, the first byte of a row before its start. Computes nothing
/// else: the canary damage must be named in the verdict's reason.
/// The CUDA rms_norm.bwd kernel under a contract that understates dW's reduction: a quarter
/// of its serial run and of its partials (n_eff about a quarter of the real one; `kverify
/// audit` must say understated, exit 1: the acceptance's planted understated contract on the GPU).
class DwUnderstated : public kv::Impl {
 public:
  explicit DwUnderstated(const kv::Impl& base) : base_(base) {}
  std::string op() const override { return base_.op(); }
  std::string name() const override { return "test.cuda.dw_understated"; }
  std::string device() const override { return base_.device(); }
  std::string version() const override { return base_.version(); }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_.knobs(); }
  std::optional<std::string> declines(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_.declines(c, p);
  }
  std::optional<std::string> invalid_reason(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_.invalid_reason(c, p);
  }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k = base_.contract(c, p);
    auto& r = k.reductions.at("rows");
    r.serial = std::max<int64_t>(1, r.serial / 4);
    r.partials /= 4;
    return k;
  }
  std::vector<kv::WorkspaceReq> workspaces(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_.workspaces(c, p);
  }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override { base_.run(ts, c, p); }
  std::vector<kv::Threshold> thresholds(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_.thresholds(c, p);
  }

 private:
  const kv::Impl& base_;
};

class DeviceOutOfBounds : public kv::CudaImpl {
 public:
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override { return "test.cuda_oob"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return {{"where", {"after_1elem", "after_row", "before_row"}}}; }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k;
    k.math_ulps["rsqrt"] = 2;
    k.reductions["row"] = {c.shape.back(), 0, 0, std::nullopt};
    return k;
  }

 protected:
  int64_t threads_per_block(const kv::Case&, const kv::DeviceProfile&) const override { return 32; }
  std::vector<KernelRef> kernels(const kv::Case&) const override {
    return {{"poke_kernel", reinterpret_cast<const void*>(&poke_kernel), 0}};
  }
  void launch(kv::DevSet& d, const kv::Case& c, const kv::DeviceProfile&) const override {
    const kv::DevView& y = d.t.at("y");
    const long long elem = static_cast<long long>(kv::dtype_size(y.desc.dtype)), row = y.desc.shape.back() * elem,
                    bytes = y.desc.storage_elems() * elem;
    const std::string w = c.config_or("where", "after_1elem");
    const long long at = w == "after_row" ? bytes + row - 1 : w == "before_row" ? -row : bytes;
    poke_kernel<<<1, 32, 0, d.stream>>>(static_cast<uint8_t*>(y.base), at);
    KV_CUDA_LAUNCHED();
  }
};

}  // namespace

void register_cuda_test_impls() {
  kv::registry().add(std::make_unique<Fault>());
  kv::registry().add(std::make_unique<DeviceOutOfBounds>());
  kv::registry().add(std::make_unique<DwUnderstated>(kv::registry().impl("rms_norm.bwd", "cuda")));
}

}  // namespace kvtest
