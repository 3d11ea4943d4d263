// Registration of softmax (ops and host impls), and its planted-fault impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_softmax_ops(Registry& r);
void register_softmax_faults(Registry& r);
}  // namespace kv
