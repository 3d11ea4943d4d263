// The reference and the enclosure under a contract in one pass: every operation is done
// on a pair of enclosures, the first with no contract (the certified reference) and the
// second under the contract. Each component is computed by exactly the operations
// EncPolicy{} and EncPolicy{&k} would apply, so the pair equals what two separate passes
// give; one pass reads the inputs once and walks the definition once.
#pragma once
#include "reference/policy.hpp"

namespace kv {

struct Dual {
  Enc ref;  // exact defined value (no contract)
  Enc con;  // every output a correct impl under the contract may produce
};

[[gnu::always_inline]] inline Dual operator+(const Dual& a, const Dual& b) { return {a.ref + b.ref, a.con + b.con}; }
[[gnu::always_inline]] inline Dual operator-(const Dual& a, const Dual& b) { return {a.ref - b.ref, a.con - b.con}; }
[[gnu::always_inline]] inline Dual operator-(const Dual& a) { return {-a.ref, -a.con}; }
[[gnu::always_inline]] inline Dual operator*(const Dual& a, const Dual& b) { return {a.ref * b.ref, a.con * b.con}; }
[[gnu::always_inline]] inline Dual operator/(const Dual& a, const Dual& b) { return {a.ref / b.ref, a.con / b.con}; }

struct DualPolicy {
  using T = Dual;
  static constexpr bool kEnclosure = true;
  EncPolicy r;  // no contract
  EncPolicy k;  // under the contract
  explicit DualPolicy(const Contract* con) : r{}, k{con} {}
  [[gnu::always_inline]] T c(double v) const { return {enc_exact(v), enc_exact(v)}; }
  [[gnu::always_inline]] T acc(const T& x) const { return {r.acc(x.ref), k.acc(x.con)}; }
  [[gnu::always_inline]] T mand(const T& x, DType d) const { return {r.mand(x.ref, d), k.mand(x.con, d)}; }
  T div(const T& a, const T& b) const { return {r.div(a.ref, b.ref), k.div(a.con, b.con)}; }
  T rsqrt(const T& x) const { return {r.rsqrt(x.ref), k.rsqrt(x.con)}; }
  /// One library exp where both halves share their midpoint (the usual case).
  T exp(const T& x) const {
    const double em = std::exp(x.ref.m);
    return {r.exp_from(x.ref, em), x.con.m == x.ref.m ? k.exp_from(x.con, em) : k.exp(x.con)};
  }
  T log(const T& x) const { return {r.log(x.ref), k.log(x.con)}; }
  T tanh(const T& x) const { return {r.tanh(x.ref), k.tanh(x.con)}; }
  T sin(const T& x) const { return {r.sin(x.ref), k.sin(x.con)}; }
  T cos(const T& x) const { return {r.cos(x.ref), k.cos(x.con)}; }
  [[gnu::always_inline]] T max(const T& a, const T& b) const { return {r.max(a.ref, b.ref), k.max(a.con, b.con)}; }
  T or_zero(const T& x) const { return {r.or_zero(x.ref), k.or_zero(x.con)}; }
  T sq(const T& x) const { return {r.sq(x.ref), k.sq(x.con)}; }
  T at_least(const T& x, double b) const { return {r.at_least(x.ref, b), k.at_least(x.con, b)}; }
  T max_sub_den(const T& d) const { return {r.max_sub_den(d.ref), k.max_sub_den(d.con)}; }
  T max_sub_log(const T& d) const { return {r.max_sub_log(d.ref), k.max_sub_log(d.con)}; }
  struct Sum {
    EncSum ref, con;
    [[gnu::always_inline]] void add(const T& t) {
      ref.add(t.ref);
      con.add(t.con);
    }
    void merge(const Sum& o) {
      ref.merge(o.ref);
      con.merge(o.con);
    }
  };
  Sum sum() const { return Sum{}; }
  T finish(const Sum& s, const char* axis) const { return {r.finish(s.ref, axis), k.finish(s.con, axis)}; }
};

}  // namespace kv
