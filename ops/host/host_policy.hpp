// The host implementations' arithmetic: an op's definition run in its low precision.
// Values are doubles holding numbers of the accumulator dtype; every accumulator operation
// is computed exactly in double and rounded once to that dtype (for + - * / of two fp32
// numbers the double result rounds to the correctly rounded fp32 result: Figueroa, 1995,
// since 53 >= 2*24 + 2). Math functions are evaluated in double and rounded to fp32, which
// errs by at most 0.5 fp32 ulp plus glibc's few double ulps (declared as 1 fp32 ulp).
// Sums follow a block's shape: term i goes to lane i % lanes (serial there), then the
// lanes are combined by a tree, as a CUDA block of `lanes` threads does. fp32 results are
// rounded by a cast: the same RNE, but one that follows the FPU's rounding mode (tests run
// a host impl under fesetround).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

/// Planted faults a test-only host impl can carry (none in the registered impls).
struct HostFaults {
  bool bf16_accumulation = false;  // every accumulator rounding to bf16 instead of fp32
  bool drop_last_term = false;     // every sum leaves out its last term
  bool rcp_bf16 = false;           // a / b as a * rcp(b), rcp rounded to bf16 (an undeclared approximate division)
};

struct HostPolicy {
  using T = double;
  static constexpr bool kEnclosure = false;
  /// How a sum's lanes start and combine: pairwise (a lane starts at its first term; lane
  /// i takes lane i + w for w = 1, 2, 4, ...) or as a CUDA block's __shfl_down tree (a
  /// lane starts at +0; lane i takes lane i + w/2 for w from the lane count's power of two
  /// down to 2).
  enum class Tree { pairwise, shfl_down };
  DType acc_dt = DType::f32;
  int64_t lanes = 128;
  Tree tree = Tree::pairwise;
  bool rsqrt_two_roundings = false;  // rsqrt as 1.0f / sqrtf(x) instead of one rounding
  HostFaults faults;

  T c(double v) const { return v; }
  T acc(T x) const {
    if (KV_MUTANT(pol_acc_rz)) return round_toward_zero(acc_dt, x);
    if (faults.bf16_accumulation) return round_to(DType::bf16, x);
    return acc_dt == DType::f32 ? static_cast<float>(x) : round_to(acc_dt, x);
  }
  T div(T a, T b) const { return faults.rcp_bf16 ? acc(a * round_to(DType::bf16, 1.0 / b)) : acc(a / b); }
  T mand(T x, DType d) const { return round_to(d, x); }
  T fn(double v) const { return round_to(DType::f32, v); }
  T rsqrt(T x) const {
    if (rsqrt_two_roundings) return static_cast<float>(1.0 / static_cast<float>(std::sqrt(x)));
    return fn(1.0 / std::sqrt(x));
  }
  T exp(T x) const { return KV_MUTANT(pol_exp_bf16) ? round_to(DType::bf16, std::exp(x)) : fn(std::exp(x)); }
  T log(T x) const { return fn(std::log(x)); }
  T tanh(T x) const { return fn(std::tanh(x)); }
  T sin(T x) const { return fn(std::sin(x)); }
  T cos(T x) const { return fn(std::cos(x)); }
  T max(T a, T b) const { return std::fmax(a, b); }
  T or_zero(T x) const { return x; }
  T sq(T x) const { return x * x; }
  T max_sub_den(T d) const { return d; }
  T max_sub_log(T d) const { return log(d); }
  T at_least(T x, double) const { return x; }

  struct Sum {
    const HostPolicy* p = nullptr;
    std::vector<double> lane;
    int64_t n = 0;
    double held = 0;  // drop_last_term: the newest term, added only when another follows
    bool holding = false;
    void put(double t) {
      const size_t l = static_cast<size_t>(n % p->lanes);
      if (l == lane.size()) lane.push_back(p->tree == Tree::shfl_down ? p->acc(0.0 + t) : t);
      else lane[l] = p->acc(lane[l] + t);
      ++n;
    }
    void add(double t) {
      if (!p->faults.drop_last_term) return put(t);
      if (holding) put(held);
      held = t, holding = true;
    }
    /// Combines the lanes by the tree.
    double total() const {
      std::vector<double> l = lane;
      if (p->tree == Tree::shfl_down) {
        size_t w = 1;
        while (w < l.size()) w *= 2;
        for (; w > 1; w /= 2)
          for (size_t i = 0; i < w / 2; ++i)
            if (i + w / 2 < l.size() - KV_MUTANT(rms_h_tree_last_lane)) l[i] = p->acc(l[i] + l[i + w / 2]);
        return l.empty() ? 0.0 : l[0];
      }
      for (size_t w = 1; w < l.size(); w *= 2)
        for (size_t i = 0; i + w < l.size() - KV_MUTANT(pol_tree_last_lane); i += 2 * w) l[i] = p->acc(l[i] + l[i + w]);
      return l.empty() ? 0.0 : l[0];
    }
    /// Another partial sum added after this one's lanes are combined (chunk merges).
    void merge(const Sum& o) {
      double a = total(), b = KV_MUTANT(pol_merge_drops) && n > 0 ? 0.0 : o.total();
      lane.assign(1, p->acc(a + b));
      n = 1;
    }
  };
  Sum sum() const { return Sum{this, {}, 0, 0, false}; }
  T finish(const Sum& s, const char*) const { return s.total(); }
};

#ifdef KV_MUTANTS
template <>
inline constexpr bool kMutablePolicy<HostPolicy> = true;
#endif

}  // namespace kv
