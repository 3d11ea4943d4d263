// kverify with the test-only impls registered (planted bugs, a crash, a hang), so the
// worker process model can be tested end to end. KV_TEST_WORSEN_HOST=<planted bug> puts
// that rms_norm bug into the host impl under its own name "host", as a kernel change would
// (the gate's tests compare such a run with a baseline).
#include <cstdlib>

#include "cli/commands.hpp"
#include "core/registry.hpp"
#include "faults/rms_norm.hpp"
#include "ops/rms_norm.hpp"
#include "test_impls.hpp"

int main(int argc, char** argv) {
  if (const char* bug = std::getenv("KV_TEST_WORSEN_HOST")) {
    static kv::Registry host;  // the correct host impls the bug is planted in
    kv::register_rms_norm_ops(host);
    kv::registry().add(kvtest::planted_rms_bug(host, bug, "host"));  // found before the real one
  }
  kv::register_builtin();
  kvtest::register_test_impls();
  return kv::kverify_main(argc, argv);
}
