// Cross-entropy cases for the tests of its edge semantics (host and CUDA).
#pragma once
#include <cstdint>

#include "core/case.hpp"
#include "core/registry.hpp"
#include "run/runner.hpp"

namespace kvtest {

/// The first seed from 1 whose drawn targets are all ignore_index (a mean over no rows), or
/// `below` where no seed under it is. The case need not be normalized.
inline uint64_t seed_ignoring_every_row(kv::Case c, uint64_t below = 500) {
  kv::registry().normalize(c);
  const auto& op = kv::registry().op(c.op);
  const double ignore = static_cast<double>(std::stoll(c.attr("ignore_index")));
  for (c.seed = 1; c.seed < below; ++c.seed) {
    kv::TensorSet ts = kv::allocate_tensors(c, op);
    op.generate(c, ts);
    const auto t = ts.view("target");
    bool all = true;
    for (int64_t r = 0; r < t.desc.numel() && all; ++r) all = t.get(r) == ignore;
    if (all) return c.seed;
  }
  return below;
}

}  // namespace kvtest
