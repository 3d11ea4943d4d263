// The case: everything that determines one check, as a one-line string that parses back
// to the same case (attributes that enter arithmetic are stored as exact hex floats).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/rng.hpp"

namespace kv {

struct TensorLayout {
  int64_t offset = 0;
  std::vector<int64_t> strides;  // empty: contiguous
  bool operator==(const TensorLayout&) const = default;
};

struct Case {
  std::string op;
  std::string impl;
  std::map<std::string, std::string> config;
  std::vector<int64_t> shape;
  std::map<std::string, DType> dtypes;
  std::map<std::string, std::string> attrs;
  std::map<std::string, TensorLayout> layout;
  std::map<std::string, std::string> alias;  // output -> input whose storage it reuses
  std::string dist = "normal";
  uint64_t seed = 0;
  int gen = kGeneratorVersion;
  /// Rounding sites an impl's contract declares (core/sites.hpp), name -> dtype: not part of
  /// the case string; set on the copy the reference and the enclosure evaluate, and part of
  /// input_id() when not empty (they change the op's defined outputs).
  std::map<std::string, DType> sites;
  /// Evaluation forms the contract declares (Contract::forms), carried the same way.
  std::map<std::string, std::string> forms;

  bool operator==(const Case&) const = default;

  /// The replay string: `kv1 op=... impl=... config=k:v,... shape=AxB dtypes=t:d,... attrs=k:v,...
  /// dist=... seed=N gen=N` (plus layout= and alias= when set).
  std::string str() const;
  /// The dtype a declared rounding site rounds to, if declared.
  std::optional<DType> site(const std::string& name) const {
    auto it = sites.find(name);
    return it == sites.end() ? std::nullopt : std::optional<DType>(it->second);
  }
  /// The form declared for form point `name`, or "" (the definition's own).
  std::string form(const std::string& name) const {
    auto it = forms.find(name);
    return it == forms.end() ? "" : it->second;
  }
  /// Parses a replay string; throws UsageError with the reason.
  static Case parse(std::string_view s);

  /// Hash of the replay string.
  uint64_t case_id() const;
  /// Hash of everything that determines the input bits and the op's defined outputs:
  /// the case without impl, config, layout and alias. References are shared under it.
  uint64_t input_id() const;

  double attr_real(const std::string& name) const;
  const std::string& attr(const std::string& name) const;
  std::string config_or(const std::string& key, const std::string& def) const;
  int64_t config_int(const std::string& key, int64_t def) const;
};

/// Appends item to out, with sep before it unless out is empty.
inline void append_sep(std::string& out, const char* sep, const std::string& item) {
  if (!out.empty()) out += sep;
  out += item;
}

std::string hex_float(double v);
/// Parses decimal or hex floats (strtod), requiring the whole string; throws UsageError.
double parse_real(std::string_view s, std::string_view what);
int64_t parse_int(std::string_view s, std::string_view what);
std::string shape_str(const std::vector<int64_t>& shape);
std::vector<int64_t> parse_shape(std::string_view s);
/// A case string's layout field, `name+offset[/stride,...];...`; throws UsageError.
std::map<std::string, TensorLayout> parse_layout(std::string_view s);
std::string hex64(uint64_t v);
/// `k=v,k=v` or `k:v,k:v` into a map; throws UsageError on a malformed pair or a key given twice.
std::map<std::string, std::string> parse_kv_list(std::string_view s, std::string_view what);
/// A seed: decimal digits only (no sign), at most 2^64 - 1; throws UsageError.
uint64_t parse_seed(std::string_view s);
/// " (did you mean 'x'?)" when one of `known` is a likely typo of `word` (edit distance at
/// most a third of its length, at least 1), else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known);
/// "unknown <what> 'word'<where> (did you mean 'x'?) (known: a, b, c)", the did-you-mean
/// only where one is close.
std::string unknown_name(std::string_view what, std::string_view word, const std::vector<std::string>& known,
                         std::string_view where = "");

}  // namespace kv
