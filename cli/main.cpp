// The kverify executable.
#include "cli/commands.hpp"
#include "core/registry.hpp"

int main(int argc, char** argv) {
  kv::register_builtin();
  return kv::kverify_main(argc, argv);
}
