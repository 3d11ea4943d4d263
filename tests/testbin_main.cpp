// kverify with the test-only impls registered (planted bugs, a crash, a hang), so the
// worker process model can be tested end to end.
#include "cli/commands.hpp"
#include "core/registry.hpp"
#include "test_impls.hpp"

int main(int argc, char** argv) {
  kv::register_builtin();
  kvtest::register_test_impls();
  return kv::kverify_main(argc, argv);
}
