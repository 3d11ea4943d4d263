// Registration of rope (ops and host impls).
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_rope_ops(Registry& r);
}  // namespace kv
