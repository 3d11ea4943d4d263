// Registration of swiglu and geglu (ops and host impls).
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_glu_ops(Registry& r);
}  // namespace kv
