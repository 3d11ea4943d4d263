// A plugin built against the wrong ABI version, for kverify's loader tests: the loader must
// refuse it after kverify_plugin_abi_version and never call kverify_plugin_register.
#include <cstdio>

#include "kverify/plugin.h"


/// One past the ABI kverify speaks.
KV_PLUGIN_EXPORT uint32_t kverify_plugin_abi_version(void) { return KV_PLUGIN_ABI_VERSION + 1u; }

/// Never to be called: says so and fails if a loader calls it anyway.
KV_PLUGIN_EXPORT int kverify_plugin_register(const kv_registrar*) {
  std::fprintf(stderr, "kverify_bad_abi_plugin: kverify_plugin_register called despite the ABI version mismatch\n");
  return KV_ERROR;
}
