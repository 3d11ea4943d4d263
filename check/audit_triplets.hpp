// Summation trees from positive terms (issue 20, `kverify audit` of sums whose terms cannot
// cancel: sums of squares and of exp). FPRev's masking needs +M and -M; with positive terms
// the audit reads rooted triplets instead: a = M, b = c = v with v in (U/4, U/2), U = one ulp
// of M in the accumulator, the rest 0. A single v meeting a partial that holds M is absorbed
// (below half an ulp); b + c first gives 2v in (U/2, U), which M + 2v rounds up to M + U. So
// the sum reads M + U exactly when b and c meet no later than either meets a, else M.
// From that answer alone, L(h, j) of FPRev's recursion follows by sorting (below).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "check/audit_tree.hpp"

namespace kv {

/// (a, b, c), distinct leaves: the question P(a; b, c).
using Triple = std::array<int64_t, 3>;
/// P(a; b, c) per triple: 1 when L(b, c) <= min(L(a, b), L(a, c)) (b and c meet below the
/// node where a joins them, or the three meet in one fused node), 0 when not, -1 where the
/// readout is neither M nor M + U. A batch is one round of calls.
using TripletOracle = std::function<std::vector<int>(const std::vector<Triple>&)>;

/// P(a; b, c) read off a known tree.
int triplet_of(const SumTree& tree, const Triple& t);
TripletOracle tree_triplet_oracle(const SumTree& tree);

/// FPRev's reconstruction (reconstruct_rounds) with each task's L(h, j) found from triplets:
/// P(j; h, r) = [L(h, r) <= L(h, j)] unless j and r share a kid below L (then P(j; h, r) =
/// P(r; h, j) = 0), so the two answers against a splitter r order j before, with or after r
/// (a quicksort, one round per level over every task). The classes in order are h's ancestors:
/// L of a class = 1 + the leaves in it and the classes before. The last class may instead be
/// the other kids of the task's parent (L = parent_size): P(h; outside, j) = 1 says which.
/// An answer of -1 stops it (inconsistent, with the triple); max_probes counts triples.
TreeBuild reconstruct_from_triplets(int64_t n, const TripletOracle& oracle, uint64_t seed, int64_t max_probes);

/// Each triple followed by its other two orientations, (b; a, c) and (c; a, b): a tree
/// answers 1 to exactly one of the three (a binary meeting) or to all three (one fused node),
/// so any other count is a readout no tree gives (spot checks).
std::vector<Triple> orientations(const std::vector<Triple>& triples);

}  // namespace kv
