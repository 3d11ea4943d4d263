// A driver shared by the generator-target tests (host and CUDA impls): which threshold
// sizes a space's draws declare and which their shapes hold.
#pragma once
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "core/error.hpp"
#include "fuzz/gen.hpp"
#include "fuzz/space.hpp"
#include "fuzz/targets.hpp"

namespace kvtest {

using Key = std::tuple<std::string, int64_t, int64_t>;  // (what, value, offset -1/0/+1)

struct Coverage {
  std::map<Key, int> declared;  // draws whose normalized case declares the size (under the cap)
  std::set<Key> hit;            // ... and whose shape has it
};

inline int64_t product(const std::vector<int64_t>& s, int b, int e) {
  int64_t n = 1;
  for (int i = b; i < e; ++i) n *= s[static_cast<size_t>(i)];
  return n;
}

/// Draws `n` cases of the space as a campaign does (index i: rc::Random(i), size i % 101)
/// and tallies, against each drawn case's own targets, which sizes it declares and which
/// its shape holds.
inline Coverage coverage(const kv::CaseSpace& space, const kv::GenLimits& lim, int n) {
  Coverage cov;
  for (int i = 0; i < n; ++i) {
    kv::Case c = kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, lim);
    try {
      kv::registry().normalize(c);
    } catch (const kv::UsageError&) {
      continue;
    }
    for (auto& t : kv::size_targets(c, lim.profile)) {
      // The dim that takes the size, as move_to_target picks it: even-only dims step by 2.
      int d = t.end - 1;
      while (d > t.begin && space.even[static_cast<size_t>(d)]) --d;
      const int64_t step = space.even[static_cast<size_t>(d)] ? 2 : 1;
      const int64_t have = product(c.shape, t.begin, t.end);
      for (int64_t v : t.values) {
        if (v + 2 > lim.max_elements) continue;
        if (step == 2) v += v & 1;
        for (int64_t off : {-1, 0, 1}) {
          if (v + off * step < 1) continue;
          const Key k{t.what, v, off};
          ++cov.declared[k];
          if (have == v + off * step) cov.hit.insert(k);
        }
      }
    }
  }
  return cov;
}

/// Every size declared by at least `min_declared` draws was drawn.
inline void expect_covered(const Coverage& cov, int min_declared, const std::string& label) {
  int checked = 0;
  for (auto& [k, n] : cov.declared) {
    if (n < min_declared) continue;
    ++checked;
    EXPECT_TRUE(cov.hit.count(k)) << label << ": " << std::get<0>(k) << " = " << std::get<1>(k) << " "
                                  << (std::get<2>(k) < 0 ? "- 1" : std::get<2>(k) > 0 ? "+ 1" : "")
                                  << " declared by " << n << " draws, never drawn";
  }
  EXPECT_GT(checked, 0) << label << ": nothing declared often enough to check";
}

}  // namespace kvtest
