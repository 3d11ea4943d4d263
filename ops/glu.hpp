// Registration of swiglu and geglu (ops and host impls), and their planted-fault impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_glu_ops(Registry& r);
/// Test-only host impls with planted faults (`host.bug.<fault>`), for the sensitivity tests.
void register_glu_faults(Registry& r);
}  // namespace kv
