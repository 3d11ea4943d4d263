// Registration of rope_table (op and host impl), and its planted-fault impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_rope_table_ops(Registry& r);
void register_rope_table_faults(Registry& r);
}  // namespace kv
