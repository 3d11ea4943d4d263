// Drawing and shrinking cases (fuzz/gen.hpp).
#include "fuzz/gen.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "core/registry.hpp"
#include "fuzz/targets.hpp"

namespace kv {

namespace {

uint64_t pick(rc::Random& r, uint64_t n) { return n == 0 ? 0 : r.next() % n; }
bool chance(rc::Random& r, uint64_t num, uint64_t den) { return pick(r, den) < num; }

/// The shapes the issue names as the seed cases: a long row batch and the 3D RoPE case.
/// Drawn only where --max-elements allows them (about 5e7 elements each).
const std::vector<std::vector<int64_t>>& seed_shapes() {
  static const std::vector<std::vector<int64_t>> s = {{32760, 1536}, {1, 32760, 12, 128}};
  return s;
}

/// Uniform on a log scale in [1, hi]: small and large sizes are drawn equally often.
int64_t log_uniform(rc::Random& r, int64_t hi) {
  int bits = 0;
  while ((int64_t(2) << bits) <= hi) ++bits;  // 2^bits <= hi < 2^(bits+1)
  int64_t lo = int64_t(1) << pick(r, static_cast<uint64_t>(bits) + 1);
  int64_t top = std::min(hi, 2 * lo - 1);
  return lo + static_cast<int64_t>(pick(r, static_cast<uint64_t>(top - lo + 1)));
}

/// One dim in [1, hi]. The row (last) dim is where block edges matter most, so it draws
/// from the special sizes more often; leading dims are mostly small.
int64_t draw_dim(rc::Random& r, int64_t hi, bool even, bool row) {
  hi = std::max<int64_t>(hi, 1);
  if (even) return 2 * draw_dim(r, std::max<int64_t>(hi / 2, 1), false, row);
  auto special = [&] {
    const auto& s = special_sizes();
    auto end = std::upper_bound(s.begin(), s.end(), hi);
    return s[pick(r, static_cast<uint64_t>(end - s.begin()))];
  };
  auto small = [&] { return 1 + static_cast<int64_t>(pick(r, static_cast<uint64_t>(std::min<int64_t>(hi, 8)))); };
  const uint64_t u = pick(r, 100);
  if (row) return u < 35 ? special() : u < 50 ? small() : log_uniform(r, hi);
  return u < 35 ? 1 : u < 65 ? small() : u < 80 ? special() : log_uniform(r, hi);
}

std::vector<int64_t> draw_shape(const CaseSpace& s, rc::Random& r, int size, int64_t cap, bool& seed) {
  const size_t rank = s.example.size();
  seed = false;
  if (size >= 50 && chance(r, 1, 8)) {
    std::vector<const std::vector<int64_t>*> fit;
    for (auto& sh : seed_shapes())
      if (sh.size() == rank && shape_elements(sh) <= cap) fit.push_back(&sh);
    if (!fit.empty()) {
      seed = true;
      return *fit[pick(r, fit.size())];
    }
  }
  // RapidCheck's size (0..100) scales the limits: rows up to 2^2..2^20, leading dims up to
  // 2^1..2^12, all under the element cap.
  const double sz = std::clamp(size, 0, 100);
  auto pow2 = [](double e) { return static_cast<int64_t>(std::llround(std::exp2(e))); };
  std::vector<int64_t> shape(rank, 1);
  shape[rank - 1] = draw_dim(r, std::min(cap, pow2(2 + 0.18 * sz)), s.even[rank - 1], true);
  int64_t left = std::max<int64_t>(cap / shape[rank - 1], 1);
  for (size_t i = 0; i + 1 < rank; ++i) {
    shape[i] = draw_dim(r, std::min(left, pow2(1 + 0.11 * sz)), s.even[i], false);
    left = std::max<int64_t>(left / shape[i], 1);
  }
  return shape;
}

std::string pick_of(rc::Random& r, const std::vector<std::string>& v) { return v[pick(r, v.size())]; }

/// Values worth trying for an attribute, its default first. Reals by name: the values
/// where each attribute changes the arithmetic (eps that dominates small rows, full label
/// smoothing, a softcap small enough to saturate, large RoPE bases); attributes whose valid
/// values depend on the shape (mrope sections, 3D grids, table offsets) derive from it.
std::vector<std::string> attr_pool(const AttrSpec& a, const std::vector<int64_t>& shape, rc::Random& r) {
  std::vector<std::string> p = {a.def};
  auto add = [&](std::initializer_list<const char*> v) { p.insert(p.end(), v.begin(), v.end()); };
  if (!a.choices.empty()) {
    for (auto& c : a.choices)
      if (c != a.def) p.push_back(c);
    return p;
  }
  const std::string& n = a.name;
  if (a.real) {
    if (n == "eps") add({"0", "1e-6", "1e-5", "1e-12", "1e-2"});
    else if (n == "offset") add({"0", "1"});
    else if (n == "label_smoothing") add({"0.1", "0.5", "1"});
    else if (n == "z_loss") add({"1e-4", "1e-2", "1"});
    else if (n == "softcap") add({"30", "1", "0.5"});
    else if (n == "base") add({"500000", "1000000", "2"});
    else add({"0", "1"});
  } else if (a.integer) {
    if (n == "ignore_index") add({"0", "1", "-1"});  // in [0, V): collides with real targets
    else if (n == "k_heads") add({"1", "2", "4"});
    else if (n == "pos_offset") {
      p.push_back("1");
      // The largest offset whose positions stay exact in fp32: table arguments near 2^24.
      if (!shape.empty()) p.push_back(std::to_string((int64_t(1) << 24) - shape[0]));
    } else add({"0", "1"});
  } else if (n == "mrope_section" && !shape.empty()) {
    const int64_t half = shape.back() / 2;
    const int64_t t = static_cast<int64_t>(pick(r, static_cast<uint64_t>(half) + 1));
    const int64_t h = static_cast<int64_t>(pick(r, static_cast<uint64_t>(half - t) + 1));
    p.push_back(std::to_string(t) + "/" + std::to_string(h) + "/" + std::to_string(half - t - h));
  } else if (n == "grid" && shape.size() >= 2) {
    // F x H x W <= S: tokens past F*H*W are padding.
    const int64_t s = shape[1];
    const int64_t f = 1 + static_cast<int64_t>(pick(r, static_cast<uint64_t>(std::min<int64_t>(s, 4))));
    const int64_t h = 1 + static_cast<int64_t>(pick(r, static_cast<uint64_t>(std::clamp<int64_t>(s / f, 1, 8))));
    const int64_t w = std::max<int64_t>(1, 1 + static_cast<int64_t>(pick(r, static_cast<uint64_t>(std::max<int64_t>(s / (f * h), 1)))));
    p.push_back(std::to_string(f) + "x" + std::to_string(h) + "x" + std::to_string(w));
  }
  return p;
}

/// Now and then: outputs written in place over an input of the same shape and dtype, and
/// tensors at a base offset (one element of a 16-bit dtype misaligns by 2 bytes) with a
/// padded row stride, which vector loads and stores must respect.
void draw_layouts(const CaseSpace& s, Case& c, rc::Random& r) {
  // Both chances drawn whatever the impl accepts: the draws after them stay the same.
  const bool alias = chance(r, 1, 6) && s.in_place, layout = chance(r, 1, 6) && s.strided;
  if (!alias && !layout) return;
  Case plain = c;
  try {
    registry().normalize(plain);
  } catch (const UsageError&) {
    return;  // an invalid draw: its tensors are unknown
  }
  const auto specs = registry().op(c.op).tensors(plain);
  std::set<std::string> taken;
  if (alias)
    for (auto& o : specs) {
      if (o.role != Role::output || !chance(r, 1, 2)) continue;
      for (auto& i : specs)
        if (i.role == Role::input && i.shape == o.shape && i.dtype == o.dtype && !taken.count(i.name)) {
          c.alias[o.name] = i.name;
          taken.insert({i.name, o.name});
          break;
        }
    }
  if (layout)
    for (auto& t : specs) {
      if (taken.count(t.name) || t.shape.empty() || !chance(r, 1, 3)) continue;
      TensorLayout l;
      l.offset = std::vector<int64_t>{0, 1, 3}[pick(r, 3)];
      if (chance(r, 1, 2)) {
        const size_t rank = t.shape.size();
        l.strides.assign(rank, 1);
        if (rank == 1) {
          l.strides[0] = 2;
        } else {
          l.strides[rank - 2] = t.shape[rank - 1] + std::vector<int64_t>{1, 8, 64}[pick(r, 3)];
          for (size_t i = rank - 2; i-- > 0;) l.strides[i] = l.strides[i + 1] * std::max<int64_t>(t.shape[i + 1], 1);
        }
      }
      if (l.offset || !l.strides.empty()) c.layout[t.name] = l;
    }
}

rc::Maybe<Case> renormalized(Case c, const Case& from) {
  try {
    registry().normalize(c);
  } catch (const UsageError&) {
    return rc::Nothing;
  }
  if (c == from) return rc::Nothing;
  return c;
}

}  // namespace

const std::vector<int64_t>& special_sizes() {
  static const std::vector<int64_t> s = [] {
    std::set<int64_t> v = {1, 113, 239, 799};
    for (int k = 1; k <= 24; ++k)
      for (int64_t d : {-1, 0, 1}) v.insert((int64_t(1) << k) + d);
    for (int64_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101,
                      103, 107, 109, 127, 131, 251, 509, 521, 1021, 1031, 2039, 2053, 4093, 4099, 8191, 16381, 32749, 65521})
      v.insert(p);
    // Hidden sizes and vocabularies of real models.
    for (int64_t m : {1536, 3072, 5120, 7168, 11008, 14336, 32000, 50257, 128256, 151936}) v.insert(m);
    return std::vector<int64_t>(v.begin(), v.end());
  }();
  return s;
}

int64_t shape_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Case draw_case(const CaseSpace& s, rc::Random r, int size, const GenLimits& lim) {
  const int64_t cap = std::max<int64_t>(lim.max_elements, 1);
  Case c;
  c.op = s.op;
  c.impl = s.impl;
  bool seed_shape = false;
  c.shape = draw_shape(s, r, size, cap, seed_shape);
  static const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};
  // A dtype the impl does not accept becomes one it does (the same number of draws).
  auto accepted = [&](DType d, uint64_t u) {
    if (s.dtypes.empty() || std::find(s.dtypes.begin(), s.dtypes.end(), d) != s.dtypes.end()) return d;
    return s.dtypes[u % s.dtypes.size()];
  };
  const uint64_t d = pick(r, 10);
  c.dtypes["x"] = accepted(d < 3 ? DType::f32 : d < 7 ? DType::bf16 : DType::f16, d);
  const bool mix = !s.mixable.empty() && chance(r, 1, 5);
  for (auto& k : s.knobs) c.config[k.name] = chance(r, 2, 5) ? k.values.front() : pick_of(r, k.values);
  for (auto& a : s.attrs) {
    auto pool = attr_pool(a, c.shape, r);
    const bool set = !chance(r, 1, 2);
    if (auto only = s.attr_values.find(a.name); only != s.attr_values.end()) c.attrs[a.name] = pick_of(r, only->second);
    else if (set) c.attrs[a.name] = pick_of(r, pool);
  }
  if (mix) {
    // Only tensors this case has (rope's tables depend on its positions attribute).
    Case plain = c;
    try {
      registry().normalize(plain);
    } catch (const UsageError&) {
      // An invalid draw: its tensors are unknown, so nothing is mixed.
    }
    for (auto& t : s.mixable)
      if (chance(r, 1, 2) && plain.dtypes.count(t)) {
        const uint64_t u = pick(r, 3);
        c.dtypes[t] = accepted(kDtypes[u], u);
      }
  }
  if (!s.dists.empty()) c.dist = chance(r, 35, 100) ? s.dists.front() : pick_of(r, s.dists);
  // Sizes where the impl's path changes (issue 18): the thresholds it declares for this
  // config and dtype, k * sm_count rows; now and then a second range besides the first
  // (a row length at one threshold, the rows at another). Seed shapes stay as they are.
  if (!seed_shape && chance(r, 2, 5) && lim.aim) {
    std::pair<int, int> first{0, 0};
    if (move_to_target(c, r, cap, s.even, lim.profile, 0, 0, &first) && chance(r, 1, 3))
      move_to_target(c, r, cap, s.even, lim.profile, first.first, first.second);
  }
  c.seed = r.next() >> 33;  // small enough to read in a case string
  draw_layouts(s, c, r);
  return c;
}

rc::Gen<Case> candidate_gen(const CaseSpace& s, const GenLimits& lim) {
  return rc::Gen<Case>([s, lim](const rc::Random& random, int size) {
    Case c = draw_case(s, random, size, lim);
    Case n = c;
    try {
      registry().normalize(n);
    } catch (const UsageError&) {
      return rc::shrinkable::just(c);
    }
    return shrinkable_case(n);
  });
}

rc::Gen<Case> case_gen(const CaseSpace& s, const GenLimits& lim) {
  return rc::Gen<Case>([s, lim](const rc::Random& random, int size) {
    rc::Random r = random;
    for (int attempt = 0; attempt < 200; ++attempt) {
      Case n = draw_case(s, r.split(), size, lim);
      try {
        registry().normalize(n);
      } catch (const UsageError&) {
        continue;
      }
      return shrinkable_case(n);
    }
    throw rc::GenerationFailure("no valid case of " + s.op + " impl " + s.impl + " in 200 draws");
  });
}

rc::Seq<Case> shrink_case(const Case& c) {
  Case base = c;
  base.dtypes = essential_dtypes(c);
  std::vector<rc::Seq<Case>> parts;
  for (size_t i = 0; i < base.shape.size(); ++i) {
    if (base.shape[i] <= 1) continue;
    auto at = [base, i, c](int64_t v) {
      Case d = base;
      d.shape[i] = v;
      return renormalized(d, c);
    };
    parts.push_back(rc::seq::mapMaybe(rc::shrink::towards<int64_t>(base.shape[i], 1), at));
    // A dim the op keeps even (rope's head dim) never reaches an even size by the integral
    // shrink from an even size (v - (v-1)/2^k is odd): shrink its half instead.
    if (base.shape[i] % 2 == 0 && !at(base.shape[i] - 1))
      parts.push_back(rc::seq::mapMaybe(rc::shrink::towards<int64_t>(base.shape[i] / 2, 1),
                                        [at](int64_t h) { return at(2 * h); }));
  }
  // The other simplifications, in order: dtypes, knobs, attributes, distribution, layout.
  std::vector<Case> simpler;
  auto with = [&](auto&& f) {
    Case d = base;
    f(d);
    simpler.push_back(std::move(d));
  };
  if (base.dtypes.size() > 1) with([&](Case& d) { d.dtypes = {{"x", base.dtypes.at("x")}}; });
  if (base.dtypes.at("x") != DType::f32) with([](Case& d) { d.dtypes["x"] = DType::f32; });
  for (auto& k : registry().impl(c.op, c.impl).knobs())
    if (base.config_or(k.name, k.values.front()) != k.values.front())
      with([&](Case& d) { d.config[k.name] = k.values.front(); });
  for (auto& a : registry().op(c.op).attrs())
    if (base.attrs.count(a.name) && base.attrs.at(a.name) != a.def) with([&](Case& d) { d.attrs[a.name] = a.def; });
  if (base.dist != "normal") with([](Case& d) { d.dist = "normal"; });
  if (!base.layout.empty()) with([](Case& d) { d.layout.clear(); });
  if (!base.alias.empty()) with([](Case& d) { d.alias.clear(); });
  parts.push_back(rc::seq::mapMaybe(rc::seq::fromContainer(std::move(simpler)), [c](Case d) { return renormalized(d, c); }));
  return rc::seq::join(rc::seq::fromContainer(std::move(parts)));
}

rc::Shrinkable<Case> shrinkable_case(const Case& c) { return rc::shrinkable::shrinkRecur(c, &shrink_case); }

}  // namespace kv
