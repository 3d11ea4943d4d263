// The CUDA device: identity for result lines and the profile launch decisions use.
#pragma once
#include <string>

#include "core/device.hpp"

namespace kv {

/// Number of CUDA devices; 0 (with the reason in *why) when there is no usable GPU.
int cuda_device_count(std::string* why = nullptr);
/// Name, UUID, compute capability, SM count, memory, driver and runtime versions, MIG mode.
DeviceInfo cuda_device(int ordinal = 0);
/// The CUDA runtime this build links and the installed driver's CUDA version ("none" where no
/// driver answers); needs no GPU (`kverify --version`).
std::string cuda_versions();

}  // namespace kv
