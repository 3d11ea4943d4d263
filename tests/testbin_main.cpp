// kverify with the test-only impls registered (planted bugs, a crash, a hang), so the
// worker process model can be tested end to end. KV_TEST_WORSEN_HOST=<planted bug> puts
// that bug into the host RMSNorm impl under its own name "host", as a kernel change would
// (the gate's tests compare such a run with a baseline).
#include <cstdlib>

#include "cli/commands.hpp"
#include "core/registry.hpp"
#include "ops/rms_norm_host.hpp"
#include "test_impls.hpp"

int main(int argc, char** argv) {
  if (const char* bug = std::getenv("KV_TEST_WORSEN_HOST"))
    for (auto& b : kvtest::planted_bugs())
      if (b.name == bug) kv::registry().add(kv::make_host_rms_norm(b.bwd, b.bug, "host"));  // found before the real one
  kv::register_builtin();
  kvtest::register_test_impls();
  return kv::kverify_main(argc, argv);
}
