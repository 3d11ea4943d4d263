// rope_table's planted faults: the other layout, positions off by one, inv_freq read as bf16.
#include "faults/faults.hpp"

namespace kvtest {

namespace {

void register_rope_table_faults(kv::Registry& r) {
  add_host_faults(r, "rope_table.fwd", {false, false, true},  // no sums, no accumulator operations
                  {{"wrong_layout", tweak_other_layout()},
                   {"positions_off_by_one",
                    [](kv::Case&, kv::OpInputs& in) {
                      for (auto& v : in.mut("positions")) v += 1;
                    }},
                   {"inv_freq_to_bf16", tweak_round_input("inv_freq", kv::DType::bf16)}});
}

const FaultRegistrar registrar("rope_table", register_rope_table_faults);

}  // namespace

}  // namespace kvtest
