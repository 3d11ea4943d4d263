// CUDA device identity. MIG mode comes from NVML, loaded at run time (the driver ships it;
// the build machine need not have it).
#include "device/cuda_device.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

#include "device/cuda_check.hpp"

namespace kv {

namespace {

std::string version_str(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::string uuid_str(const cudaUUID_t& u) {
  char buf[64];
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}

/// MIG mode and the driver version through NVML's C API (prototypes of the public
/// entry points we call).
std::string mig_mode(int ordinal, std::string* driver) {
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return "unknown (NVML not found)";
  using drv_t = int (*)(char*, unsigned);
  auto get_drv = reinterpret_cast<drv_t>(dlsym(h, "nvmlSystemGetDriverVersion"));
  using init_t = int (*)();
  using by_pci_t = int (*)(const char*, void**);
  using mig_t = int (*)(void*, unsigned*, unsigned*);
  auto init = reinterpret_cast<init_t>(dlsym(h, "nvmlInit_v2"));
  auto by_pci = reinterpret_cast<by_pci_t>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto get_mig = reinterpret_cast<mig_t>(dlsym(h, "nvmlDeviceGetMigMode"));
  auto shutdown = reinterpret_cast<init_t>(dlsym(h, "nvmlShutdown"));
  std::string out = "unknown";
  char pci[32] = {0};
  if (init && by_pci && get_mig && init() == 0) {
    char ver[96] = {0};
    if (get_drv && get_drv(ver, sizeof ver) == 0) *driver = ver;
    void* dev = nullptr;
    unsigned cur = 0, pending = 0;
    if (cudaDeviceGetPCIBusId(pci, sizeof pci, ordinal) == cudaSuccess && by_pci(pci, &dev) == 0) {
      int r = get_mig(dev, &cur, &pending);
      if (r == 0) out = cur ? "enabled" : "disabled";
      else if (r == 3) out = "not supported";  // NVML_ERROR_NOT_SUPPORTED
    }
    if (shutdown) shutdown();
  }
  dlclose(h);
  return out;
}

}  // namespace

int cuda_device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount found no device";
  return n;
}

std::string cuda_versions() {
  int rt = 0, drv = 0;
  const std::string runtime = cudaRuntimeGetVersion(&rt) == cudaSuccess ? version_str(rt) : "unknown";
  const std::string driver = cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0 ? version_str(drv) : "none";
  return "CUDA runtime " + runtime + ", driver " + driver;
}

DeviceInfo cuda_device(int ordinal) {
  cudaDeviceProp p{};
  KV_CUDA(cudaSetDevice(ordinal));
  KV_CUDA(cudaGetDeviceProperties(&p, ordinal));
  int drv = 0, rt = 0;
  KV_CUDA(cudaDriverGetVersion(&drv));
  KV_CUDA(cudaRuntimeGetVersion(&rt));
  DeviceInfo d;
  d.kind = "cuda";
  d.name = p.name;
  d.uuid = uuid_str(p.uuid);
  d.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
  std::string nvml_driver;
  d.mig_mode = mig_mode(ordinal, &nvml_driver);
  d.driver_version = (nvml_driver.empty() ? std::string() : nvml_driver + ", ") + "CUDA " + version_str(drv) + " driver API";
  d.runtime_version = version_str(rt);
  d.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  d.profile.sm_count = p.multiProcessorCount;
  d.profile.warp_size = p.warpSize;
  d.profile.max_threads_per_block = p.maxThreadsPerBlock;
  d.profile.smem_per_block = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  return d;
}

}  // namespace kv
