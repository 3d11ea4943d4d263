// Impl versions (README: Results, impl_version): what drift and the gate use to tell two
// builds of an impl apart. Per impl key ("host", "cuda_rms_norm", ...), a hash of every
// source-tree file that the key's translation units depend on, as the compiler reported
// them, with the compiler ids/versions and the flags. cmake/impl_versions.cmake generates
// the table (kv_impl_versions.cpp) after the impl objects compile; it is linked into every
// executable as an object file.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace kv {

struct ImplVersionEntry {
  const char* key;                     // host, cuda_<op>
  const char* version;                 // 16 hex digits
  std::span<const char* const> units;  // its translation units' sources, relative to the source tree
  std::span<const char* const> files;  // every file hashed (units and what they include), sorted
};

/// The build's table, sorted by key (generated).
std::span<const ImplVersionEntry> impl_version_table();
/// The compiler ids/versions and the flags the hashes include (generated).
const char* impl_version_salt();
/// The version of `key`; a HarnessError for a key the build has no entry for.
std::string impl_version(std::string_view key);
/// The entry of `key`, or nullptr.
const ImplVersionEntry* find_impl_version(std::string_view key);

}  // namespace kv
