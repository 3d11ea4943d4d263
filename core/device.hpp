// Devices: identity for result lines, and the profile every launch decision goes through
// (overridable, so another GPU's reduction order can be forecast on this one).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kv {

struct DeviceProfile {
  int64_t sm_count = 0;
  int64_t warp_size = 32;
  int64_t max_threads_per_block = 1024;
  int64_t smem_per_block = 48 * 1024;
  std::string overrides;  // the --device-profile text applied, for result lines

  /// Applies `sm_count=108,warp_size=64,...`; throws UsageError on unknown keys.
  void apply_overrides(const std::string& text);
  nlohmann::json to_json() const;
  /// The profile to_json wrote (missing keys keep their defaults).
  static DeviceProfile from_json(const nlohmann::json& j);
};

struct DeviceInfo {
  std::string kind;  // host | cuda
  std::string name;
  std::string uuid;
  std::string compute_capability;
  std::string driver_version;
  std::string runtime_version;
  std::string mig_mode;
  int64_t memory_bytes = 0;
  DeviceProfile profile;
  nlohmann::json to_json() const;
};

/// The host device: CPU model name, a profile whose "SM count" is the partial count that
/// per-SM strategies use on the host (default 32, overridable).
DeviceInfo host_device();
/// That profile alone (no machine facts): sm_count 32, warp_size 32, 1024 threads.
DeviceProfile host_profile();

}  // namespace kv
