// softmax's planted faults. fwd: logits scaled by 17/16, fp32 logits read as bf16; bwd: dy
// and y swapped, dy read as bf16 (plus the shared faults: bf16 accumulation, truncation,
// a dropped term). And an approximate division (rcp in bf16) that is a fault where the
// contract does not declare it, beside the same impl declaring it (test.softmax.rcp_bf16_*).
#include "faults/faults.hpp"

namespace kvtest {

namespace {

/// An impl under another name whose contract declares "div" with the given error.
class DeclaresDiv : public HostWrapper {
 public:
  DeclaresDiv(const kv::Impl& base, std::string name, kv::MathError e)
      : HostWrapper(base), name_(std::move(name)), e_(std::move(e)) {}
  std::string name() const override { return name_; }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k = base_.contract(c, p);
    k.math_ulps["div"] = e_;
    return k;
  }

 private:
  std::string name_;
  kv::MathError e_;
};

/// host.bug.rcp_bf16 (a / b as a * bf16(1/b), not declared), test.softmax.rcp_bf16_declared
/// (the same, declaring div via rcp within 0.5 ulp of bf16) and test.softmax.rcp_bf16_fp32_units
/// (declaring 0.5 ulp of fp32: understated).
void register_rcp(kv::Registry& r) {
  kv::HostFault f;
  f.policy.rcp_bf16 = true;
  r.add(faultable_host(r, "softmax.fwd").with_fault("host.bug.rcp_bf16", f));
  const kv::Impl& bug = r.impl("softmax.fwd", "host.bug.rcp_bf16");
  kv::MathError e(0.5);
  e.via = "rcp";
  kv::MathError in_bf16 = e;
  in_bf16.in = kv::DType::bf16;
  r.add(std::make_unique<DeclaresDiv>(bug, "test.softmax.rcp_bf16_declared", in_bf16));
  r.add(std::make_unique<DeclaresDiv>(bug, "test.softmax.rcp_bf16_fp32_units", e));
}

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
  register_rcp(r);
}

const FaultRegistrar registrar("softmax", register_softmax_faults);

}  // namespace

}  // namespace kvtest
