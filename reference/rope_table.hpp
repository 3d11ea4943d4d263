// rope_table (OPS.md): angle = RN_fp32(pos * inv_freq_i) is a mandated rounding (HF
// computes it in fp32); cos and sin of that fp32 angle are fp32 math functions with
// declared ulps; the table dtype's rounding is the output's.
#pragma once
#include <cstdint>

#include "core/dtype.hpp"

namespace kv {

template <class P>
typename P::T rope_table_angle(const P& p, double pos, double inv_freq) {
  return p.mand(p.c(pos) * p.c(inv_freq), DType::f32);
}

}  // namespace kv
