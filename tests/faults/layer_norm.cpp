// layer_norm's planted faults: eps left out, w reversed, the saved mean ignored (bwd).
#include "faults/faults.hpp"

namespace kvtest {

namespace {

void register_layer_norm_faults(kv::Registry& r) {
  auto no_eps = [](kv::Case& c, kv::OpInputs&) { c.attrs["eps"] = kv::hex_float(0.0); };
  add_host_faults(r, "layer_norm.fwd", {}, {{"no_eps", no_eps}, {"w_reversed", tweak_reverse_input("w")}});
  add_host_faults(r, "layer_norm.bwd", {},
                  {{"mean_ignored",
                    [](kv::Case&, kv::OpInputs& in) {
                      for (auto& v : in.mut("mean")) v = 0;
                    }},
                   {"w_reversed", tweak_reverse_input("w")}});
}

const FaultRegistrar registrar("layer_norm", register_layer_norm_faults);

}  // namespace

}  // namespace kvtest
