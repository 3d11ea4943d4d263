// Registration of the rms_norm op bindings.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_rms_norm_ops(Registry& r);
}
