// Error kinds that map to exit codes: usage/configuration errors exit 2.
#pragma once
#include <stdexcept>
#include <string>

namespace kv {

/// Bad input from the user (unknown op, invalid config, malformed case, bad shape): exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A harness invariant broke (e.g. the reference value outside its own enclosure).
struct HarnessError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An error from a device runtime (e.g. CUDA). A sticky one leaves the device context
/// unusable: the worker answers `error` for the case, then exits and is restarted.
struct DeviceError : std::runtime_error {
  DeviceError(const std::string& what, bool sticky) : std::runtime_error(what), sticky(sticky) {}
  bool sticky;
};

}  // namespace kv
