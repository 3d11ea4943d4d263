// The shared planted faults and tweaks (tests/faults/faults.hpp).
#include "faults/faults.hpp"

#include <algorithm>

namespace kvtest {

const kv::FaultableHost& faultable_host(const kv::Registry& r, const std::string& op) {
  for (const kv::Impl* im : r.impls(op))
    if (auto* h = dynamic_cast<const kv::FaultableHost*>(im); h && im->name() == "host" && !im->test_only()) return *h;
  throw std::logic_error("no host impl of " + op + " to plant a fault in");
}

InputTweak tweak_round_input(std::string name, kv::DType d) {
  return [name, d](kv::Case&, kv::OpInputs& in) {
    for (auto& v : in.mut(name)) v = kv::round_to(d, v);
  };
}

InputTweak tweak_reverse_input(std::string name) {
  return [name](kv::Case&, kv::OpInputs& in) {
    auto& v = in.mut(name);
    std::reverse(v.begin(), v.end());
  };
}

InputTweak tweak_other_layout() {
  return [](kv::Case& c, kv::OpInputs&) {
    c.attrs["layout"] = c.attr("layout") == "interleaved" ? "rotate_half" : "interleaved";
  };
}

void add_host_faults(kv::Registry& r, const std::string& op, FaultScope scope,
                     std::vector<std::pair<std::string, InputTweak>> tweaks) {
  const kv::FaultableHost& host = faultable_host(r, op);
  auto add = [&](const std::string& n, kv::HostFault f) { r.add(host.with_fault("host.bug." + n, std::move(f))); };
  kv::HostFault acc;
  acc.policy.bf16_accumulation = true;
  if (scope.acc) add("bf16_accumulation", acc);
  kv::HostFault trunc;
  trunc.truncate = true;
  if (scope.lowp_out) add("truncate", trunc);
  if (scope.sums) {
    kv::HostFault drop;
    drop.policy.drop_last_term = true;
    add("drop_last_term", drop);
  }
  for (auto& [n, t] : tweaks) add(n, kv::HostFault{{}, false, t});
}

namespace {
std::vector<std::pair<std::string, void (*)(kv::Registry&)>>& registrars() {
  static std::vector<std::pair<std::string, void (*)(kv::Registry&)>> all;  // built before main, by each file
  return all;
}
}  // namespace

FaultRegistrar::FaultRegistrar(const char* name, void (*add)(kv::Registry&)) { registrars().emplace_back(name, add); }

void register_faults(kv::Registry& r) {
  auto all = registrars();
  std::sort(all.begin(), all.end());  // static initialization runs in no set order across files
  for (auto& [name, add] : all) add(r);
}

}  // namespace kvtest
