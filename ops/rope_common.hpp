// Geometry, tables and per-token table lookup of the rope op (see ops/rope.cpp).
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "core/inputs.hpp"
#include "ops/op_base.hpp"
#include "reference/rope.hpp"
#include "reference/rope_geom.hpp"

namespace kv {

inline const std::vector<std::string>& table_names_all() {
  static const std::vector<std::string> n = {"cos", "sin", "cos_f", "sin_f", "cos_h", "sin_h", "cos_w", "sin_w"};
  return n;
}

inline std::vector<TensorSpec> rope_table_specs(const Case& c, const RopeGeom& g) {
  auto t = [&](const std::string& n, std::vector<int64_t> s, DType d) { return TensorSpec{n, s, d, Role::input}; };
  std::vector<TensorSpec> v;
  if (g.mode == "1d" || g.mode == "mrope") {
    std::vector<int64_t> s = g.mode == "1d" ? std::vector<int64_t>{1, g.s, g.d} : std::vector<int64_t>{3, g.b, g.s, g.d};
    v = {t("cos", s, c.dtypes.at("cos")), t("sin", s, c.dtypes.at("sin"))};
  } else {
    const char* ax[3] = {"f", "h", "w"};
    for (int a = 0; a < 3; ++a)
      for (const char* k : {"cos_", "sin_"}) {
        std::string n = std::string(k) + ax[a];
        v.push_back(t(n, {g.s, g.sec[a]}, c.dtypes.at(n)));
      }
    v.push_back(t("grid", {g.b, 3}, DType::i32));
    v.push_back(t("seq_len", {g.b}, DType::i32));
  }
  return v;
}

/// Angle of pair l of a table with n pairs at position pos: pos * base^(-l/n), as HF's
/// inv_freq = base^(-2l/D) (computed in double by the generator; the tables are inputs).
inline double rope_angle(double pos, int64_t l, int64_t n, double base) {
  return pos * std::pow(base, -static_cast<double>(l) / static_cast<double>(std::max<int64_t>(n, 1)));
}

/// The grid of sample b: the `grid` attribute, or drawn so that F*H*W <= S.
inline void rope_sample_grid(const Case& c, const RopeGeom& g, int64_t b, int64_t out[3]) {
  if (c.attr("grid") != "auto") {
    auto v = parse_triple(c.attr("grid"), 'x', "grid");
    for (int i = 0; i < 3; ++i) out[i] = v[i];
    return;
  }
  const int64_t s = std::max<int64_t>(g.s, 1);
  out[2] = draw_int(c.seed, "grid", {b, 2}, 1, std::min<int64_t>(s, 32) + 1);
  out[1] = draw_int(c.seed, "grid", {b, 1}, 1, std::max<int64_t>(1, std::min<int64_t>(s / out[2], 32)) + 1);
  out[0] = std::max<int64_t>(1, s / (out[1] * out[2]) - draw_int(c.seed, "grid", {b, 0}, 0, 2));
}

inline void rope_fill_tables(const Case& c, const RopeGeom& g, TensorSet& ts) {
  const double base = c.attr_real("base");
  const int64_t half = g.d / 2;
  if (g.mode == "1d" || g.mode == "mrope") {
    auto cv = ts.view("cos"), sv = ts.view("sin");
    const int64_t nt = g.mode == "1d" ? 1 : 3 * g.b;
    par_rows(nt * g.s, true, [&](int64_t row) {
      const int64_t k = row / (g.s * std::max<int64_t>(g.b, 1)), s = row % g.s, b = (row / g.s) % std::max<int64_t>(g.b, 1);
      // mrope positions per section: temporal s, height s/4, width s%4 + b.
      const double pos = g.mode == "1d" || k == 0 ? s : k == 1 ? s / 4 : s % 4 + b;
      for (int64_t j = 0; j < g.d; ++j) {
        double a = rope_angle(pos, rope_pair(j, g.d, g.interleaved), half, base);
        cv.store(row * g.d + j, std::cos(a));
        sv.store(row * g.d + j, std::sin(a));
      }
    });
    return;
  }
  const char* ax[3] = {"f", "h", "w"};
  for (int a = 0; a < 3; ++a) {
    auto cv = ts.view(std::string("cos_") + ax[a]), sv = ts.view(std::string("sin_") + ax[a]);
    par_rows(g.s, true, [&](int64_t pos) {
      for (int64_t l = 0; l < g.sec[a]; ++l) {
        double an = rope_angle(static_cast<double>(pos), l, g.sec[a], base);
        cv.store(pos * g.sec[a] + l, std::cos(an));
        sv.store(pos * g.sec[a] + l, std::sin(an));
      }
    });
  }
  auto grid = ts.view("grid"), sl = ts.view("seq_len");
  for (int64_t b = 0; b < g.b; ++b) {
    int64_t gr[3];
    rope_sample_grid(c, g, b, gr);
    for (int i = 0; i < 3; ++i) grid.store(b * 3 + i, static_cast<double>(gr[i]));
    sl.store(b, static_cast<double>(b % 2 ? gr[0] * gr[1] * gr[2] : g.s));
  }
}

/// Per-token table values for every element of a head.
class TokenTables {
 public:
  TokenTables(const Case& c, const RopeGeom& g, const OpInputs& in) : g_(g) {
    if (g.mode == "3d") {
      const char* names[6] = {"cos_f", "sin_f", "cos_h", "sin_h", "cos_w", "sin_w"};
      for (int i = 0; i < 6; ++i) t_[i] = in[names[i]].data();
      grid_ = in["grid"].data();
      len_ = in["seq_len"].data();
    } else {
      t_[0] = in["cos"].data();
      t_[1] = in["sin"].data();
    }
  }
  /// Fills c[D], s[D] for token tok = b*S + s; false for a padding token.
  bool fill(int64_t tok, double* cs, double* sn) const {
    const int64_t b = tok / g_.s, s = tok % g_.s;
    if (g_.mode == "1d" || g_.mode == "mrope") {
      for (int64_t j = 0; j < g_.d; ++j) {
        int64_t row = s;
        if (g_.mode == "mrope") {
          int64_t local;
          int k = g_.section(rope_pair(j, g_.d, g_.interleaved), local);
          row = (k * g_.b + b) * g_.s + s;
        }
        cs[j] = t_[0][row * g_.d + j];
        sn[j] = t_[1][row * g_.d + j];
      }
      return true;
    }
    const double* grid = grid_;
    const int64_t F = static_cast<int64_t>(grid[b * 3]), H = static_cast<int64_t>(grid[b * 3 + 1]),
                  W = static_cast<int64_t>(grid[b * 3 + 2]);
    const int64_t len = static_cast<int64_t>(len_[b]);
    if (F < 1 || H < 1 || W < 1 || s >= std::min(len, F * H * W)) return false;
    const int64_t pos[3] = {s / (H * W), (s / W) % H, s % W};
    for (int64_t j = 0; j < g_.d; ++j) {
      int64_t l;
      int a = g_.section(rope_pair(j, g_.d, g_.interleaved), l);
      cs[j] = t_[2 * a][pos[a] * g_.sec[a] + l];
      sn[j] = t_[2 * a + 1][pos[a] * g_.sec[a] + l];
    }
    return true;
  }

 private:
  RopeGeom g_;
  const double* t_[6] = {};
  const double* grid_ = nullptr;
  const double* len_ = nullptr;
};

}  // namespace kv
