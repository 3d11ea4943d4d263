// Test-only impls: every op's planted faults (host.bug.<name>, tests/faults/), impls that crash or
// hang inside the worker, impls that each break one determinism claim (test.breaks_<claim>,
// test.batch_dependent; test.claims_kept keeps them all), one with two bugs at two row
// lengths (test.two_bugs), impls that write outside an output (test.oob.<where>), and
// impls whose bits break a determinism claim the way kernels do (test.det.<how>).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "faults/rms_norm.hpp"

namespace kvtest {

/// The out-of-bounds test impls: name, and where they write (bytes past the end of y, or
/// before its start when negative).
const std::vector<std::pair<std::string, int64_t>>& out_of_bounds_writes();
void register_test_impls();
/// Impls that each break one determinism claim (test.det.<how>; tests/determinism_impls.cpp).
void register_determinism_impls(kv::Registry& r);
/// The CUDA test-only impls (a kernel that faults); CUDA builds only.
void register_cuda_test_impls();

}  // namespace kvtest
