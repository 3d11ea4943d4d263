// Registration of rope_table (op and host impl).
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_rope_table_ops(Registry& r);
}  // namespace kv
