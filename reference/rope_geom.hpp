// The geometry of a rope case (B, S, Hq, Hk, D, layout, position mode and sections), read
// from its shape and attributes: shared by the rope binding (ops/rope.cpp) and the CUDA
// impl (kernels/rope/).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/error.hpp"

namespace kv {

struct RopeGeom {
  int64_t b = 0, s = 0, hq = 0, hk = 0, d = 0;
  bool interleaved = false;
  std::string mode;       // 1d | 3d | mrope
  int64_t sec[3] = {0, 0, 0};  // mrope sections, or the 3d axis split, in pairs
  std::vector<int64_t> q_shape() const { return {b, s, hq, d}; }
  std::vector<int64_t> k_shape() const { return {b, s, hk, d}; }
  /// Section (table or axis) of pair i, and i's index inside it.
  int section(int64_t i, int64_t& local) const {
    if (i < sec[0]) return local = i, 0;
    if (i < sec[0] + sec[1]) return local = i - sec[0], 1;
    return local = i - sec[0] - sec[1], 2;
  }
};

inline std::vector<int64_t> parse_triple(const std::string& s, char sep, const std::string& what) {
  std::vector<int64_t> v;
  size_t pos = 0;
  while (true) {
    size_t e = s.find(sep, pos);
    v.push_back(parse_int(s.substr(pos, e == std::string::npos ? std::string::npos : e - pos), what));
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  if (v.size() != 3) throw UsageError(what + " needs three numbers separated by '" + std::string(1, sep) + "'");
  return v;
}

inline RopeGeom rope_geom(const Case& c) {
  if (c.shape.size() != 4) throw UsageError("rope needs a shape B x S x Hq x D");
  RopeGeom g;
  g.b = c.shape[0], g.s = c.shape[1], g.hq = c.shape[2], g.d = c.shape[3];
  const int64_t kh = std::stoll(c.attr("k_heads"));
  if (kh < 0) throw UsageError("k_heads must be >= 0 (0: as many as q)");
  g.hk = kh == 0 ? g.hq : kh;
  if (g.d < 2 || g.d % 2) throw UsageError("rope needs an even head dimension D >= 2");
  g.interleaved = c.attr("layout") == "interleaved";
  g.mode = c.attr("positions");
  const int64_t half = g.d / 2;
  if (g.mode == "3d") {
    if (half < 3) throw UsageError("3d rope needs D >= 6 (three axes)");
    g.sec[1] = g.sec[2] = half / 3;
    g.sec[0] = half - 2 * (half / 3);
    const std::string& grid = c.attr("grid");
    if (grid != "auto") {
      auto v = parse_triple(grid, 'x', "grid");
      if (v[0] < 1 || v[1] < 1 || v[2] < 1 || v[0] * v[1] * v[2] > g.s)
        throw UsageError("grid " + grid + " needs positive sizes with F*H*W <= S = " + std::to_string(g.s));
    }
  } else if (g.mode == "mrope") {
    const std::string& ms = c.attr("mrope_section");
    if (ms == "auto") {
      g.sec[1] = g.sec[2] = 3 * half / 8;
      g.sec[0] = half - 2 * g.sec[1];
    } else {
      auto v = parse_triple(ms, '/', "mrope_section");
      if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[0] + v[1] + v[2] != half)
        throw UsageError("mrope_section " + ms + " must be three sizes >= 0 summing to D/2 = " + std::to_string(half));
      for (int i = 0; i < 3; ++i) g.sec[i] = v[i];
    }
  }
  return g;
}

}  // namespace kv
