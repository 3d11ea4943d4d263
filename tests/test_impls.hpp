// Test-only impls: the planted RMSNorm bugs (named host.bug.<name>), and impls that
// crash or hang inside the worker.
#pragma once
#include <string>
#include <vector>

#include "kernels/rms_norm/host.hpp"

namespace kvtest {

struct PlantedBug {
  kv::RmsBug bug;
  std::string name;
  bool bwd;  // the op it is planted in
};

const std::vector<PlantedBug>& planted_bugs();
void register_test_impls();
/// The CUDA test-only impls (a kernel that faults); CUDA builds only.
void register_cuda_test_impls();

}  // namespace kvtest
