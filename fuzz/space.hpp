// What a fuzz campaign may vary for one (op, impl): learned from the registry (the op's
// attributes, distributions and example shape, the impl's knobs) and by asking the op's
// normalize() which variations it accepts, so every op and external impl is covered by one
// generator instead of a copy per op.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/registry.hpp"

namespace kv {

struct CaseSpace {
  std::string op, impl;
  std::vector<int64_t> example;       // a valid shape; generated shapes keep its rank
  std::vector<bool> even;             // dims that only take even sizes (rope's head dim)
  std::vector<std::string> mixable;   // tensors whose dtype may differ from the main dtype
  std::vector<ConfigKnob> knobs;      // the first value of each is its default
  std::vector<AttrSpec> attrs;
  std::vector<std::string> dists;     // "normal" first when the op knows it
  // Inside what the impl declares it accepts (impl_accepts), where it does:
  std::vector<DType> dtypes;          // float dtypes drawn; empty: fp32, bf16 and fp16
  std::map<std::string, std::vector<std::string>> attr_values;  // attributes drawn from these alone
  bool strided = true, in_place = true;  // offset or strided layouts, outputs over inputs
};

/// Builds the space of one (op, impl) pair; throws UsageError when the op's example shape
/// does not normalize for the impl (nothing could be generated).
CaseSpace make_space(const std::string& op, const std::string& impl);

/// Whether c normalizes (as the campaign would run it) and equals its normalized form.
bool is_normalized(const Case& c);

/// The case's main dtype: x's, or for ops without an x tensor the dtype that, given as
/// `dtypes=x:..`, derives the most of its tensors' dtypes.
DType main_dtype(const Case& c);

/// The dtypes a case needs to be stated: the main one (as `x`, which every op takes as
/// the default for its tensors) and those that differ from what normalization derives.
std::map<std::string, DType> essential_dtypes(const Case& c);

/// How far a normalized case is from the simplest case of its shape: knobs, attributes,
/// the distribution and the dtypes that are not their defaults (fp32, no per-tensor mix).
int nondefault_count(const Case& c);

}  // namespace kv
