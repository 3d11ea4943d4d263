// Host RMSNorm impls: fp32 accumulation (x's dtype in mode none) with a blocking that
// mimics a CUDA block: 32*num_warps lanes each summing a serial run, then a tree.
#pragma once
#include <memory>

#include "core/registry.hpp"

namespace kv {

/// Planted bugs for the sensitivity tests (none in the registered production impl).
enum class RmsBug {
  none,
  bf16_accumulation,   // the sum of squares accumulated in bf16
  drop_last_square,    // the last element of a row left out of the sum of squares
  eps_outside_sqrt,    // 1/(sqrt(ms) + eps)
  divide_by_n_minus_1, // mean over N-1
  gemma_for_llama,     // no intermediate rounding of x*rstd in llama mode
  drop_last_dw_row,    // the last row left out of dW
  truncate_to_bf16,    // outputs rounded to bf16 by truncation
  write_nan,           // one output element written as NaN
  leave_unwritten,     // one output element never written
  write_past_end,      // one element written one past the end of the output
  drop_tail,           // rows longer than a block (32*num_warps lanes) lose their last N % lanes
                       // squares: a block-strided main loop whose tail loop went missing
                       // (shorter rows take a correct one-pass path), so only some N fail
};

std::unique_ptr<Impl> make_host_rms_norm(bool bwd, RmsBug bug = RmsBug::none, std::string name = "host");
void register_host_rms_norm(Registry& r);

}  // namespace kv
