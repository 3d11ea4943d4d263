// rms_norm's planted faults (tests/faults/rms_norm.cpp), by name, for the sensitivity
// tests and for kverify-testbin's KV_TEST_WORSEN_HOST.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/registry.hpp"

namespace kvtest {

struct PlantedBug {
  std::string name;
  bool bwd;  // the op it is planted in
};

/// The planted bugs every row length must flag (host.bug.<name>).
const std::vector<PlantedBug>& planted_bugs();
/// Planted bug `name` in the host impl of `host` (a registry holding the rms_norm ops and
/// host impls, which must outlive the result), registered as impl `impl`.
std::unique_ptr<kv::Impl> planted_rms_bug(const kv::Registry& host, const std::string& name, const std::string& impl);

}  // namespace kvtest
