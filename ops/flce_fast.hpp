// fused_linear_cross_entropy's reference and enclosure in one pass built on dense matrix
// products (reference/gemm.hpp) instead of one enclosure operation per product term.
#pragma once
#include <vector>

#include "core/case.hpp"
#include "core/contract.hpp"
#include "core/registry.hpp"
#include "ops/op_base.hpp"

namespace kv {

/// Fills `ref` and `out` (already sized for the op's outputs) for the case: the logits
/// x W^T (+ b) in double with a-priori error bounds, cross-entropy per row over their
/// enclosures (the op's definition, cross_entropy.hpp), and for bwd dx = G W, dW = G^T x
/// as products in double, with the magnitude products that bound them in float.
void flce_fast_evaluate(const Case& c, const OpInputs& in, const Contract& k, bool bwd, RefResult& ref,
                        std::vector<OutputEnclosure>& out);

}  // namespace kv
