// rope's planted faults: layout confusion, the wrong rotation direction, and (3d)
// transposed height/width.
#include "faults/faults.hpp"
#include "ops/rope_common.hpp"

namespace kvtest {

namespace {

void register_rope_faults(kv::Registry& r) {
  for (const char* op : {"rope.fwd", "rope.bwd"})
    add_host_faults(r, op, {false, true, true},
                    {{"wrong_layout", tweak_other_layout()},
                     {"sin_negated",
                      [](kv::Case&, kv::OpInputs& in) {
                        for (auto& n : kv::table_names_all())
                          if (n.rfind("sin", 0) == 0 && in.has(n))
                            for (auto& v : in.mut(n)) v = -v;
                      }},
                     {"grid_hw_swapped", [](kv::Case&, kv::OpInputs& in) {
                        if (!in.has("grid")) return;
                        auto& g = in.mut("grid");
                        for (size_t b = 0; b + 2 < g.size(); b += 3) std::swap(g[b + 1], g[b + 2]);
                      }}});
}

const FaultRegistrar registrar("rope", register_rope_faults);

}  // namespace

}  // namespace kvtest
