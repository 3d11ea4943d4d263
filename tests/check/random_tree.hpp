// A random summation tree for property tests (check/audit_tree, check/audit_triplets): leaves
// 0..n-1 as a forest, then 2..fan random roots merged at a time until one is left.
#pragma once
#include <rapidcheck.h>

#include <algorithm>
#include <vector>

#include "check/audit_tree.hpp"

namespace kvtest {

inline kv::SumTree random_tree(int64_t n, int fan) {
  kv::SumTree t;
  std::vector<int> forest;
  for (int64_t i = 0; i < n; ++i) t.nodes.push_back({1, i, {}}), forest.push_back(static_cast<int>(i));
  while (forest.size() > 1) {
    const int k = *rc::gen::inRange(2, std::min<int>(fan, static_cast<int>(forest.size())) + 1);
    kv::SumTree::Node v{0, -1, {}};
    for (int i = 0; i < k; ++i) {
      const size_t at = static_cast<size_t>(*rc::gen::inRange<int64_t>(0, static_cast<int64_t>(forest.size())));
      v.kids.push_back(forest[at]), v.size += t.nodes[static_cast<size_t>(forest[at])].size;
      forest.erase(forest.begin() + static_cast<int64_t>(at));
    }
    t.nodes.push_back(v), forest.push_back(static_cast<int>(t.nodes.size()) - 1);
  }
  t.root = forest[0];
  return t;
}

}  // namespace kvtest
