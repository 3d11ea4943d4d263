// Registration of fused_linear_cross_entropy (ops and host impls).
#pragma once
#include "core/registry.hpp"
#include "reference/flce.hpp"

namespace kv {
/// The case's geometry: BT x H x V, bias, and G's mandated rounding (grad_rounding).
FlceGeom flce_geom(const Case& c);
void register_flce_ops(Registry& r);
}  // namespace kv
