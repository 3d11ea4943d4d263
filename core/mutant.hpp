// Mutation points (issue 7; tools/mutate/): `if (KV_MUTANT(id))` marks a deliberate bug
// in an impl. In every normal build KV_MUTANT is the constant false, so a mutation point
// compiles to nothing. Only the kverify-mutate target compiles the mutated sources with
// -DKV_MUTANTS, where it compares id with the mutant chosen at run time (kv::g_mutant on
// the host; kernels/mutant.cuh's __constant__ copy in device code). The mutants, what
// each one breaks and which ops it belongs to are listed in core/mutant_catalog.def.
#pragma once
#ifdef KV_MUTANTS
#include <type_traits>
#endif

namespace kv {

#ifdef KV_MUTANTS
enum class Mutant : int {
  none = 0,
#define KV_MUTANT_DEF(id, ops, device, kind, what) id,
#include "core/mutant_catalog.def"
#undef KV_MUTANT_DEF
};

/// The active mutant of this process (none: the impls as shipped).
extern Mutant g_mutant;

/// Definitions shared by the reference and a host impl (reference/*.hpp run over a scalar
/// policy) mutate only under the host impls' policy, which specializes this to true: the
/// reference itself must stay correct.
template <class P>
inline constexpr bool kMutablePolicy = false;
#endif

}  // namespace kv

#ifdef KV_MUTANTS
#ifdef __CUDA_ARCH__
#define KV_MUTANT(id) (kv_dev_mutant == static_cast<int>(::kv::Mutant::id))
#else
#define KV_MUTANT(id) (::kv::g_mutant == ::kv::Mutant::id)
#endif
/// A mutation point inside a definition over the scalar policy p.
#define KV_MUTANT_P(p, id) (::kv::kMutablePolicy<std::remove_cvref_t<decltype(p)>> && KV_MUTANT(id))
#else
#define KV_MUTANT(id) false
#define KV_MUTANT_P(p, id) false
#endif
