// What an external impl takes, as it declares it: a worker's hello `accepts`, a plugin's
// kv_impl_desc.accepts (both the same JSON): float dtypes, attribute values, and layouts
// beyond contiguous. kverify declines cases outside them itself, without asking the impl,
// and the fuzz generator draws only inside them (impl_accepts).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "core/case.hpp"

namespace kv {

class Impl;

struct Accepts {
  /// Unset: any. dtypes among fp32, fp16, bf16 (integer tensors are not constrained);
  /// layouts among contiguous, strided (offsets and strides), in_place (aliases).
  std::optional<std::set<std::string>> dtypes, layouts;
  /// dtypes per tensor ({"x": ["bf16"], "y": ["bf16"]}; JSON dtypes as an object): the
  /// tensors named take only those, the others any (a norm's fp32 rstd beside bf16 x).
  std::map<std::string, std::set<std::string>> tensor_dtypes;
  /// Per attribute named, its values in canonical form (as a normalized case holds them).
  std::map<std::string, std::set<std::string>> attrs;

  /// Why c (normalized) is outside them, if it is.
  std::optional<std::string> outside(const Case& c) const;
  /// Whether the main dtype (tensor x's) may be d.
  bool dtype(DType d) const;
  bool layout(const std::string& l) const;
  /// The declaration in canonical form (parse_accepts reads it back unchanged).
  nlohmann::json to_json() const;
};

/// An impl that may declare what it accepts (plugin and worker impls derive from it too).
class DeclaresAccepts {
 public:
  virtual ~DeclaresAccepts() = default;
  /// Null: not declared (anything).
  virtual const Accepts* accepts() const = 0;
};

/// What `impl` declares it accepts, or null (not declared, or not an external impl).
const Accepts* impl_accepts(const Impl& impl);

/// Validates `j` for op `op`: known fields, dtypes and layouts; attributes the op has,
/// each value valid for it (reals and integers canonicalized, choices among the op's).
/// Throws UsageError prefixed with `who` naming the defect.
Accepts parse_accepts(const nlohmann::json& j, const std::string& op, const std::string& who);

/// The same from a JSON text (a plugin's kv_impl_desc.accepts).
Accepts parse_accepts(const std::string& text, const std::string& op, const std::string& who);

}  // namespace kv
