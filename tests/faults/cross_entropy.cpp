// cross_entropy's planted faults: attributes silently ignored (the commonest CE bug class)
// and an off-by-one target.
#include "faults/faults.hpp"

namespace kvtest {

namespace {

void register_cross_entropy_faults(kv::Registry& r) {
  for (const char* op : {"cross_entropy.fwd", "cross_entropy.bwd"})
    add_host_faults(
        r, op, {true, true, op == std::string("cross_entropy.bwd")},  // fwd's loss is fp32
        {{"ignore_index_ignored", [](kv::Case& c, kv::OpInputs&) { c.attrs["ignore_index"] = "-999999"; }},
         {"no_label_smoothing", [](kv::Case& c, kv::OpInputs&) { c.attrs["label_smoothing"] = kv::hex_float(0.0); }},
         {"no_softcap", [](kv::Case& c, kv::OpInputs&) { c.attrs["softcap"] = kv::hex_float(0.0); }},
         {"no_z_loss", [](kv::Case& c, kv::OpInputs&) { c.attrs["z_loss"] = kv::hex_float(0.0); }},
         {"target_off_by_one", [](kv::Case& c, kv::OpInputs& in) {
            const int64_t v = c.shape.back(), ign = std::stoll(c.attr("ignore_index"));
            for (auto& t : in.mut("target"))
              if (static_cast<int64_t>(t) != ign) t = static_cast<double>((static_cast<int64_t>(t) + 1) % v);
          }}});
}

const FaultRegistrar registrar("cross_entropy", register_cross_entropy_faults);

}  // namespace

}  // namespace kvtest
