// Registration of the rms_norm ops and host impls, and the case's parameters of the
// definition (reference/rms_norm.hpp).
#pragma once
#include "core/registry.hpp"
#include "reference/rms_norm.hpp"

namespace kv {
void register_rms_norm_ops(Registry& r);
/// Mode, eps, offset, m_rounding, x's dtype and the row geometry of a normalized case.
RmsParams rms_params(const Case& c);
}  // namespace kv
