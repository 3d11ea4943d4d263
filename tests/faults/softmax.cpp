// softmax's planted faults. fwd: logits scaled by 17/16, fp32 logits read as bf16; bwd: dy
// and y swapped, dy read as bf16 (plus the shared faults: bf16 accumulation, truncation,
// a dropped term).
#include "faults/faults.hpp"

namespace kvtest {

namespace {

void register_softmax_faults(kv::Registry& r) {
  add_host_faults(r, "softmax.fwd", {},
                  {{"scale_logits",
                    [](kv::Case&, kv::OpInputs& in) {
                      for (auto& v : in.mut("x")) v *= 1.0625;
                    }},
                   {"x_to_bf16", tweak_round_input("x", kv::DType::bf16)}});
  add_host_faults(r, "softmax.bwd", {},
                  {{"swap_dy_y", [](kv::Case&, kv::OpInputs& in) { std::swap(in.mut("dy"), in.mut("y")); }},
                   {"dy_to_bf16", tweak_round_input("dy", kv::DType::bf16)}});
}

const FaultRegistrar registrar("softmax", register_softmax_faults);

}  // namespace

}  // namespace kvtest
