// swiglu's and geglu's planted faults: a and b swapped, a negated, a read as bf16.
#include "faults/faults.hpp"

namespace kvtest {

namespace {

void register_glu_faults(kv::Registry& r) {
  for (const char* dir : {".fwd", ".bwd"})
    for (const char* op : {"swiglu", "geglu"})
      add_host_faults(r, std::string(op) + dir, {false, true, true},
                      {{"swap_ab", [](kv::Case&, kv::OpInputs& in) { std::swap(in.mut("a"), in.mut("b")); }},
                       {"negate_a",
                        [](kv::Case&, kv::OpInputs& in) {
                          for (auto& v : in.mut("a")) v = -v;
                        }},
                       {"a_to_bf16", tweak_round_input("a", kv::DType::bf16)}});
}

const FaultRegistrar registrar("glu", register_glu_faults);

}  // namespace

}  // namespace kvtest
