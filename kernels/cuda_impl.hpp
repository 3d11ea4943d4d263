// The base of CUDA impls: mirrors the harness's buffers (canaries and poison included)
// to the GPU, launches, checks every call, times the kernels with events and copies
// every buffer back, so the host-side checks see exactly what the GPU wrote.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/registry.hpp"

namespace kv {

/// A tensor on the device: payload pointer plus the harness's layout.
struct DevView {
  void* base = nullptr;
  TensorDesc desc;
};

struct DevSet {
  std::map<std::string, DevView> t;
  std::map<std::string, std::pair<void*, size_t>> ws;
  cudaStream_t stream = nullptr;
};

class CudaImpl : public Impl {
 public:
  std::string device() const override { return "cuda"; }
  /// layout_reason(): what the kernels do not take on any device.
  std::optional<std::string> declines(const Case& c, const DeviceProfile&) const override { return layout_reason(c); }
  /// Launch validation from the kernels' own attributes and the device profile.
  std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const override;
  void run(TensorSet& ts, const Case& c, const DeviceProfile& p) const final;
  /// For benchmarks: the buffers mirrored once, `warmup` launches, then `reps` launches
  /// back to back, each between two CUDA events; the milliseconds of each. `free_after`:
  /// the device's free memory after the launches, before the buffers are released.
  std::vector<float> time_launches(TensorSet& ts, const Case& c, const DeviceProfile& p, int warmup, int reps,
                                   size_t* free_after = nullptr) const;

 protected:
  /// Threads per block the kernels are launched with under this config and profile.
  virtual int64_t threads_per_block(const Case& c, const DeviceProfile& p) const = 0;
  /// The kernels launched with that block size (name, function pointer, dynamic smem bytes).
  struct KernelRef {
    std::string name;
    const void* fn;
    size_t dynamic_smem;
  };
  virtual std::vector<KernelRef> kernels(const Case& c) const = 0;
  /// Layouts this impl cannot address (reason), checked before launch.
  virtual std::optional<std::string> layout_reason(const Case& c) const { return std::nullopt; }
  virtual void launch(DevSet& d, const Case& c, const DeviceProfile& p) const = 0;
};

/// Device canaries: each mirrored buffer gets this many bytes of canary on each side, at
/// least a row of every tensor in it (its last dim, or its row stride where rows are
/// padded) and kDeviceCanaryMinBytes, a multiple of 256. Writes farther out are left to
/// compute-sanitizer (`--sanitize memcheck`).
inline constexpr size_t kDeviceCanaryMinBytes = 4096;
std::map<const Buffer*, size_t> device_canary_bytes(const TensorSet& ts);

/// The one stride that steps through the first `dims` dims of a tensor in row-major order
/// (dims of size 1 skipped), or nullopt when they do not collapse to one (0 when none is
/// larger than 1). Kernels that address rows with one stride use it to accept a layout.
std::optional<int64_t> collapsed_stride(const TensorDesc& d, size_t dims);

/// Why an output may not be written over the input the case aliases it to: row kernels
/// compute in place only between row tensors (each program reads its own rows before
/// writing them, while every program reads the per-column and per-row inputs).
std::optional<std::string> row_alias_reason(const Case& c, const std::vector<std::string>& row_tensors);

/// Threads a launch may use: the kernel's limit given its registers and the profile's.
std::optional<std::string> check_block_size(const std::string& kernel, const void* fn, int64_t threads,
                                            size_t dynamic_smem, const DeviceProfile& p, const std::string& what);

}  // namespace kv
