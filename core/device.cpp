// Host device identity and profile overrides.
#include "core/device.hpp"

#include <fstream>
#include <thread>

#include "core/case.hpp"
#include "core/error.hpp"

namespace kv {

void DeviceProfile::apply_overrides(const std::string& text) {
  if (text.empty()) return;
  for (auto& [k, v] : parse_kv_list(text, "device profile")) {
    int64_t n = parse_int(v, "device profile " + k);
    if (n <= 0) throw UsageError("device profile " + k + " must be positive, got " + v);
    if (k == "sm_count") sm_count = n;
    else if (k == "warp_size") warp_size = n;
    else if (k == "max_threads_per_block") max_threads_per_block = n;
    else if (k == "smem_per_block") smem_per_block = n;
    else throw UsageError("unknown device profile key '" + k + "' (sm_count, warp_size, max_threads_per_block, smem_per_block)");
  }
  overrides = overrides.empty() ? text : overrides + "," + text;
}

nlohmann::json DeviceProfile::to_json() const {
  return {{"sm_count", sm_count}, {"warp_size", warp_size}, {"max_threads_per_block", max_threads_per_block},
          {"smem_per_block", smem_per_block}, {"overrides", overrides}};
}

DeviceProfile DeviceProfile::from_json(const nlohmann::json& j) {
  DeviceProfile p;
  p.sm_count = j.value("sm_count", p.sm_count);
  p.warp_size = j.value("warp_size", p.warp_size);
  p.max_threads_per_block = j.value("max_threads_per_block", p.max_threads_per_block);
  p.smem_per_block = j.value("smem_per_block", p.smem_per_block);
  p.overrides = j.value("overrides", p.overrides);
  return p;
}

nlohmann::json DeviceInfo::to_json() const {
  return {{"kind", kind}, {"name", name}, {"uuid", uuid}, {"compute_capability", compute_capability},
          {"driver_version", driver_version}, {"runtime_version", runtime_version}, {"mig_mode", mig_mode},
          {"memory_bytes", memory_bytes}, {"profile", profile.to_json()}};
}

DeviceInfo host_device() {
  DeviceInfo d;
  d.kind = "host";
  d.name = "host CPU";
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) d.name = line.substr(p + 2);
      break;
    }
  }
  d.uuid = "host";
  d.mig_mode = "n/a";
  d.profile = host_profile();
  return d;
}

DeviceProfile host_profile() {
  DeviceProfile p;
  p.sm_count = 32;
  p.warp_size = 32;
  p.max_threads_per_block = 1024;
  return p;
}

}  // namespace kv
