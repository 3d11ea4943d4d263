// Registration of softmax (ops and host impls).
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_softmax_ops(Registry& r);
}  // namespace kv
