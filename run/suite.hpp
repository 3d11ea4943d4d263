// Suites: cartesian products of ops, impls, dtypes, attributes, configs, shapes,
// distributions, layouts and seeds, from a committed JSON file or from command-line options.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/case.hpp"

namespace kv {

struct SuiteEntry {
  std::vector<std::string> ops, impls;  // impls empty: every non-test impl on the device
  std::vector<std::string> dtypes;      // "bf16" (all main tensors) or "x:bf16,w:fp32"
  std::vector<std::string> shapes;
  std::map<std::string, std::vector<std::string>> attrs, configs;
  std::vector<std::string> dists = {"normal"};
  std::vector<std::string> layouts = {""};  // the case string's layout field; "": none
  std::vector<uint64_t> seeds = {1};
};

/// "bf16" (x's dtype; the others follow it) or "x:bf16,w:fp32"; throws UsageError.
std::map<std::string, DType> parse_dtypes_arg(const std::string& s);
/// Reads a suite file ({"name":..., "entries":[{...}]}); throws UsageError.
std::vector<SuiteEntry> load_suite(const std::string& path);
std::vector<SuiteEntry> parse_suite(const std::string& text, const std::string& where);
/// Expands entries to normalized cases for impls on `device`; config knobs an impl does
/// not have are left out for it; duplicates are dropped. Throws UsageError.
std::vector<Case> expand_suite(const std::vector<SuiteEntry>& entries, const std::string& device);

}  // namespace kv
