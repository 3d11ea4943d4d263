// The lookup over the generated impl version table (core/impl_version.hpp).
#include "core/impl_version.hpp"

#include "core/error.hpp"

namespace kv {

const ImplVersionEntry* find_impl_version(std::string_view key) {
  for (const ImplVersionEntry& e : impl_version_table())
    if (key == e.key) return &e;
  return nullptr;
}

std::string impl_version(std::string_view key) {
  if (const ImplVersionEntry* e = find_impl_version(key)) return e->version;
  std::string known;
  for (const ImplVersionEntry& e : impl_version_table()) known += std::string(known.empty() ? "" : ", ") + e.key;
  throw HarnessError("no impl version for '" + std::string(key) + "' in this build (it has: " + known + ")");
}

}  // namespace kv
