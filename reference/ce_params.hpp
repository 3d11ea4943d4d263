// A cross-entropy case's parameters (CeParams) from its attributes: shared by the
// cross_entropy and fused_linear_cross_entropy bindings (ops/ce_common.hpp) and the CUDA
// impls (kernels/cross_entropy/).
#pragma once
#include <cstdint>
#include <string>

#include "core/case.hpp"
#include "reference/cross_entropy.hpp"

namespace kv {

inline CeParams ce_params(const Case& c, int64_t v) {
  CeParams q;
  q.v = v;
  q.ignore_index = std::stoll(c.attr("ignore_index"));
  q.ls = c.attr_real("label_smoothing");
  q.zl = c.attr_real("z_loss");
  q.softcap = c.attr_real("softcap");
  q.weighted = c.attrs.count("weights") && c.attr("weights") == "class";
  const std::string& r = c.attr("reduction");
  q.reduction = r == "none" ? CeReduction::none : r == "sum" ? CeReduction::sum : CeReduction::mean;
  q.empty_mean = c.attr("empty_mean") == "zero" ? CeEmptyMean::zero : CeEmptyMean::nan;
  q.ignored_grad = c.attr("ignored_grad") == "zero" ? CeIgnoredGrad::zero : CeIgnoredGrad::propagate;
  q.row_loss = c.site("ce.row_loss");
  q.grad = c.site("ce.grad");
  return q;
}

}  // namespace kv
