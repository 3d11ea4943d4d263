// Representative cases of every op (small enough for MPFR-256), and a
// RapidCheck generator of random valid cases per op, shared by the reference, soundness
// and sensitivity tests.
#pragma once
#include <rapidcheck.h>

#include <map>
#include <string>
#include <vector>

#include "core/case.hpp"

namespace kvtest {

inline kv::Case op_case(const std::string& op, std::vector<int64_t> shape, const std::string& dtype,
                        std::map<std::string, std::string> attrs = {}, std::string dist = "normal", uint64_t seed = 1) {
  kv::Case c;
  c.op = op;
  c.impl = "host";
  c.shape = std::move(shape);
  c.dtypes["x"] = *kv::parse_dtype(dtype);
  c.attrs = std::move(attrs);
  c.dist = std::move(dist);
  c.seed = seed;
  return c;
}

/// Ops and, per op, cases covering its attributes.
inline std::vector<kv::Case> representative_cases() {
  std::vector<kv::Case> v;
  for (const char* d : {"fp32", "bf16", "fp16"})
    for (const char* mode : {"llama", "gemma", "none"}) {
      v.push_back(op_case("rms_norm.fwd", {3, 77}, d, {{"mode", mode}}, "normal"));
      v.push_back(op_case("rms_norm.bwd", {3, 77}, d, {{"mode", mode}, {"m_rounding", "x_dtype"}, {"offset", "1"}}, "wide"));
    }
  for (const char* d : {"fp32", "bf16"})
    for (const char* op : {"swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd", "softmax.fwd", "softmax.bwd"})
      for (const char* dist : {"normal", "large", "wide"}) v.push_back(op_case(op, {3, 77}, d, {}, dist));
  for (const char* d : {"fp32", "bf16", "fp16"})
    for (const char* op : {"layer_norm.fwd", "layer_norm.bwd"})
      for (const char* dist : {"normal", "big_mean", "tiny"}) v.push_back(op_case(op, {3, 130}, d, {}, dist));
  for (const char* op : {"cross_entropy.fwd", "cross_entropy.bwd"}) {
    v.push_back(op_case(op, {9, 50}, "fp32"));
    v.push_back(op_case(op, {9, 50}, "bf16", {{"reduction", "none"}}, "large"));
    v.push_back(op_case(op, {9, 50}, "bf16", {{"reduction", "sum"}, {"label_smoothing", "0.1"}, {"z_loss", "1e-4"}}));
    v.push_back(op_case(op, {9, 50}, "fp32", {{"softcap", "3"}, {"weights", "class"}, {"label_smoothing", "0.2"}}, "large"));
  }
  for (const char* op : {"rope.fwd", "rope.bwd"})
    for (const char* layout : {"rotate_half", "interleaved"}) {
      v.push_back(op_case(op, {2, 5, 2, 12}, "bf16", {{"layout", layout}}));
      v.push_back(op_case(op, {2, 5, 2, 12}, "fp32", {{"layout", layout}, {"positions", "mrope"}, {"k_heads", "1"}}));
      v.push_back(op_case(op, {2, 13, 2, 12}, "fp16", {{"layout", layout}, {"positions", "3d"}}));
    }
  for (const char* layout : {"rotate_half", "interleaved"})
    v.push_back(op_case("rope_table.fwd", {40, 16}, "fp32", {{"layout", layout}, {"pos_offset", "32700"}}));
  for (const char* op : {"fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd"}) {
    v.push_back(op_case(op, {5, 16, 30}, "bf16", {{"bias", "true"}}));
    v.push_back(op_case(op, {5, 16, 30}, "fp32", {{"reduction", "none"}, {"label_smoothing", "0.1"}, {"softcap", "5"}}));
  }
  return v;
}

/// A random valid case of `op` for the host impl: odd and edge sizes, every dtype, the
/// attributes that change numerics, every distribution, every num_warps.
inline kv::Case gen_op_case(const std::string& op) {
  using namespace rc;
  const std::string dt = *gen::element<std::string>("fp32", "fp16", "bf16");
  const std::string dist = *gen::element<std::string>("normal", "uniform", "tiny", "large", "mean_shift", "wide", "big_mean");
  const uint64_t seed = *gen::inRange<uint64_t>(0, 1000000);
  auto n = [] { return *gen::oneOf(gen::inRange<int64_t>(1, 200), gen::element<int64_t>(31, 32, 33, 127, 128, 129, 239, 799)); };
  std::map<std::string, std::string> a;
  std::vector<int64_t> shape;
  const std::string base = op.substr(0, op.find('.'));
  if (base == "rope") {
    const std::string pos = *gen::element<std::string>("1d", "mrope", "3d");
    a = {{"layout", *gen::element<std::string>("rotate_half", "interleaved")}, {"positions", pos},
         {"k_heads", std::to_string(*gen::inRange<int64_t>(0, 4))}};
    int64_t d = 2 * *gen::inRange<int64_t>(pos == "3d" ? 3 : 1, 40);
    shape = {*gen::inRange<int64_t>(1, 3), *gen::inRange<int64_t>(1, 40), *gen::inRange<int64_t>(1, 4), d};
  } else if (base == "rope_table") {
    a = {{"layout", *gen::element<std::string>("rotate_half", "interleaved")},
         {"pos_offset", std::to_string(*gen::inRange<int64_t>(0, 40000))}};
    shape = {*gen::inRange<int64_t>(1, 60), 2 * *gen::inRange<int64_t>(1, 70)};
  } else if (base == "fused_linear_cross_entropy") {
    a = {{"reduction", *gen::element<std::string>("mean", "sum", "none")}, {"bias", *gen::element<std::string>("false", "true")},
         {"label_smoothing", *gen::element<std::string>("0", "0.1")}, {"softcap", *gen::element<std::string>("0", "15")},
         {"grad_rounding", *gen::element<std::string>("fp32", "x_dtype")}};
    shape = {*gen::inRange<int64_t>(1, 9), *gen::inRange<int64_t>(1, 40), *gen::inRange<int64_t>(1, 90)};
  } else if (base == "cross_entropy") {
    a = {{"reduction", *gen::element<std::string>("mean", "sum", "none")},
         {"label_smoothing", *gen::element<std::string>("0", "0.1")}, {"z_loss", *gen::element<std::string>("0", "1e-4")},
         {"softcap", *gen::element<std::string>("0", "30")}, {"weights", *gen::element<std::string>("none", "class")}};
    shape = {*gen::inRange<int64_t>(1, 12), n()};
  } else if (base == "layer_norm") {
    a = {{"stat_dtype", *gen::element<std::string>("fp32", "x_dtype")}};
    shape = {*gen::inRange<int64_t>(0, 6), n()};
  } else {
    shape = {*gen::inRange<int64_t>(0, 6), n()};
  }
  kv::Case c = op_case(op, shape, dt, a, dist, seed);
  c.config["num_warps"] = *gen::element<std::string>("1", "2", "4", "8", "16", "32");
  return c;
}

/// The overflow sweep of one op family (tests/kernels/test_ops_overflow.cpp): fwd and bwd
/// over these shapes and attribute sets.
struct OverflowSweep {
  std::string base;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::map<std::string, std::string>> attrs;
};

inline const std::vector<OverflowSweep>& overflow_sweeps() {
  static const std::vector<std::vector<int64_t>> rows = {{1, 7}, {3, 300}, {17, 129}};
  static const std::vector<OverflowSweep> v = {
      {"rms_norm", rows, {{{"mode", "llama"}}, {{"mode", "gemma"}}, {{"mode", "none"}}}},
      {"layer_norm", rows, {{{"stat_dtype", "fp32"}}, {{"stat_dtype", "x_dtype"}}}},
      {"rope",
       {{1, 3, 2, 8}, {2, 17, 3, 64}},
       {{{"positions", "1d"}}, {{"positions", "3d"}, {"layout", "interleaved"}}, {{"positions", "mrope"}}}},
      {"softmax", rows, {{}}},
      {"swiglu", rows, {{}}},
      {"geglu", rows, {{}}},
      {"cross_entropy",
       rows,
       {{{"reduction", "mean"}},
        {{"reduction", "none"}, {"softcap", "1"}},
        {{"reduction", "sum"}, {"softcap", "30"}, {"z_loss", "1e-4"}, {"label_smoothing", "0.1"}, {"weights", "class"}}}},
      {"fused_linear_cross_entropy",
       {{1, 4, 377}, {3, 16, 30}, {17, 8, 29}},
       {{{"reduction", "mean"}},
        {{"reduction", "none"}, {"softcap", "1"}, {"bias", "true"}},
        {{"reduction", "sum"}, {"softcap", "30"}, {"z_loss", "1e-4"}, {"label_smoothing", "0.1"},
         {"grad_rounding", "x_dtype"}}}}};
  return v;
}

inline const std::vector<std::string>& new_ops() {
  static const std::vector<std::string> o = {
      "swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd", "softmax.fwd", "softmax.bwd", "layer_norm.fwd",
      "layer_norm.bwd", "cross_entropy.fwd", "cross_entropy.bwd", "rope.fwd", "rope.bwd", "rope_table.fwd",
      "fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd"};
  return o;
}

}  // namespace kvtest
