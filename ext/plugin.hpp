// C ABI plugins (include/kverify/plugin.h): loads a shared library, checks its ABI
// version, and registers the impls it declares.
#pragma once
#include <string>

#include "core/registry.hpp"

namespace kv {

/// Loads the plugin and registers its impls; throws UsageError with a clear reason (file
/// not loadable, missing entry points, ABI mismatch, an impl of an unknown op, ...).
/// Returns the number of impls registered.
int load_plugin(Registry& r, const std::string& path);

}  // namespace kv
