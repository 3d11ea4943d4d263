// rope_table (OPS.md): angle = RN_fp32(pos * inv_freq_i) is a mandated rounding (HF
// computes it in fp32); cos and sin of that fp32 angle are fp32 math functions with
// declared ulps; the table dtype's rounding is the output's.
#pragma once
#include <cstdint>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

template <class P>
typename P::T rope_table_angle(const P& p, double pos, double inv_freq) {
  if (KV_MUTANT_P(p, rt_pos_f16)) pos = round_to(DType::f16, pos);
  if (KV_MUTANT_P(p, rt_pos_fp32)) pos = static_cast<float>(pos);
  if (KV_MUTANT_P(p, rt_inv_bf16)) inv_freq = round_to(DType::bf16, inv_freq);
  if (KV_MUTANT_P(p, rt_angle_rz)) return p.c(round_toward_zero(DType::f32, pos * inv_freq));
  if (KV_MUTANT_P(p, rt_angle_unrounded)) return p.c(pos) * p.c(inv_freq);
  return p.mand(p.c(pos) * p.c(inv_freq), KV_MUTANT_P(p, rt_angle_bf16) ? DType::bf16 : DType::f32);
}

}  // namespace kv
