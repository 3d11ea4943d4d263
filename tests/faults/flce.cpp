// fused_linear_cross_entropy's planted faults: the bias or ignore_index ignored, the
// weight read as bf16, and (bwd) G left unrounded where grad_rounding=x_dtype mandates it.
#include "faults/faults.hpp"

namespace kvtest {

namespace {

void register_flce_faults(kv::Registry& r) {
  for (bool bwd : {false, true}) {
    std::vector<std::pair<std::string, InputTweak>> faults = {
        {"bias_ignored",
         [](kv::Case&, kv::OpInputs& in) {
           if (in.has("bias"))
             for (auto& v : in.mut("bias")) v = 0;
         }},
        {"ignore_index_ignored", [](kv::Case& c, kv::OpInputs&) { c.attrs["ignore_index"] = "-999999"; }},
        {"weight_to_bf16", tweak_round_input("weight", kv::DType::bf16)}};
    if (bwd)
      faults.push_back({"grad_not_rounded", [](kv::Case& c, kv::OpInputs&) { c.attrs["grad_rounding"] = "fp32"; }});
    add_host_faults(r, bwd ? "fused_linear_cross_entropy.bwd" : "fused_linear_cross_entropy.fwd", {true, true, bwd},
                    faults);  // fwd's loss is fp32
  }
}

const FaultRegistrar registrar("flce", register_flce_faults);

}  // namespace

}  // namespace kvtest
