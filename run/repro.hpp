// Reproducer bundles: a failing case leaves its inputs, the impl's outputs, the reference
// and the admissible bounds in one .safetensors file (PyTorch's safetensors loads it), and
// the case with its verdict as JSON, so the failure can be studied without kverify.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/registry.hpp"
#include "core/safetensors.hpp"

namespace kv {

/// Writes <dir>/<case_id>/{case.json, tensors.safetensors} and returns the directory.
/// Tensors: each input and output under its own name (its dtype), and per output
/// `ref.<name>`, `ref_err.<name>`, `lo.<name>`, `hi.<name>` in F64 (the reference value,
/// its error bound, and the admissible interval before the output's final rounding).
std::string write_repro(const std::string& dir, const Case& c, const TensorSet& ts, const RefResult& ref,
                        const std::vector<OutputEnclosure>& encs, const nlohmann::json& result);

/// The bundle of a batch-invariance failure: <dir>/<case_id>/{case.json, outputs.safetensors,
/// companion.safetensors}: the result line with its replay command (which reruns the pair)
/// and the outputs of the case and of its companion (fuzz/batch.hpp), by name.
std::string write_batch_repro(const std::string& dir, const Case& c, const nlohmann::json& result,
                              const std::map<std::string, StoredTensor>& outputs,
                              const std::map<std::string, StoredTensor>& companion_outputs);

}  // namespace kv
