// Registration of the built-in ops and impls.
#include "core/registry.hpp"
#include "kernels/rms_norm/host.hpp"
#include "ops/rms_norm.hpp"

namespace kv {

void register_builtin() {
  static bool done = false;
  if (done) return;
  done = true;
  Registry& r = registry();
  register_rms_norm_ops(r);
  register_host_rms_norm(r);
}

}  // namespace kv
