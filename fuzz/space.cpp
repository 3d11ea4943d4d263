// Probing the registry for what a campaign may vary (fuzz/space.hpp).
#include "fuzz/space.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "ext/accepts.hpp"

namespace kv {

namespace {

bool normalizes(Case c) {
  try {
    registry().normalize(c);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

}  // namespace

bool is_normalized(const Case& c) {
  Case n = c;
  try {
    registry().normalize(n);
  } catch (const UsageError&) {
    return false;
  }
  return n == c;
}

DType main_dtype(const Case& c) {
  if (auto it = c.dtypes.find("x"); it != c.dtypes.end()) return it->second;
  // No tensor named x: the dtype that, given as x (every op's default key), derives the
  // most of the case's dtypes (fp32 on a tie).
  DType best = DType::f32;
  int best_n = -1;
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    Case t = c;
    t.dtypes = {{"x", d}};
    try {
      registry().normalize(t);
    } catch (const UsageError&) {
      continue;
    }
    int n = 0;
    for (auto& [k, v] : t.dtypes) n += c.dtypes.count(k) && c.dtypes.at(k) == v;
    if (n > best_n) best = d, best_n = n;
  }
  return best;
}

std::map<std::string, DType> essential_dtypes(const Case& c) {
  const DType main = main_dtype(c);
  Case base = c;
  base.dtypes = {{"x", main}};
  try {
    registry().normalize(base);
  } catch (const UsageError&) {
    return c.dtypes;
  }
  std::map<std::string, DType> out = {{"x", main}};
  for (auto& [t, d] : c.dtypes)
    if (t != "x" && (!base.dtypes.count(t) || base.dtypes.at(t) != d)) out[t] = d;
  return out;
}

int nondefault_count(const Case& c) {
  int n = 0;
  for (auto& k : registry().impl(c.op, c.impl).knobs()) n += c.config_or(k.name, k.values.front()) != k.values.front();
  for (auto& a : registry().op(c.op).attrs()) n += c.attrs.count(a.name) && c.attrs.at(a.name) != a.def;
  n += c.dist != "normal";
  n += main_dtype(c) != DType::f32;
  n += essential_dtypes(c).size() > 1;
  n += !c.layout.empty();
  n += !c.alias.empty();
  return n;
}

CaseSpace make_space(const std::string& opname, const std::string& implname) {
  const Registry& reg = registry();
  const OpBinding& op = reg.op(opname);
  const Impl& impl = reg.impl(opname, implname);
  CaseSpace s;
  s.op = opname;
  s.impl = implname;
  s.example = op.example_shape();
  s.knobs = impl.knobs();
  s.attrs = op.attrs();
  s.dists = op.dists();
  // normal first: it is where a shrunk failure should land.
  if (auto it = std::find(s.dists.begin(), s.dists.end(), "normal"); it != s.dists.end())
    std::rotate(s.dists.begin(), it, it + 1);

  Case ex;
  ex.op = opname;
  ex.impl = implname;
  ex.shape = s.example;
  ex.dtypes = {{"x", DType::f32}};
  Case norm = ex;
  try {
    reg.normalize(norm);
  } catch (const UsageError& e) {
    throw UsageError("cannot fuzz " + opname + " impl " + implname + ": its example case does not normalize (" +
                     e.what() + ")");
  }
  if (const Accepts* a = impl_accepts(impl)) {
    for (DType d : {DType::f32, DType::bf16, DType::f16})
      if (a->dtype(d)) s.dtypes.push_back(d);
    for (auto& [name, vals] : a->attrs)
      if (!vals.empty()) s.attr_values[name].assign(vals.begin(), vals.end());
    s.strided = a->layout("strided");
    s.in_place = a->layout("in_place");
  }
  // A dim takes only even sizes when an odd size is refused where the even neighbour is not.
  for (size_t i = 0; i < s.example.size(); ++i) {
    Case odd = ex, even = ex;
    odd.shape[i] = s.example[i] | 1;
    even.shape[i] = s.example[i] + (s.example[i] & 1);
    s.even.push_back(!normalizes(odd) && normalizes(even));
  }
  // A tensor's dtype may be mixed when it can differ from the main dtype both ways.
  for (auto& [t, d] : norm.dtypes) {
    if (t == "x" || !is_float(d)) continue;
    Case a = ex, b = ex;
    a.dtypes = {{"x", DType::bf16}, {t, DType::f32}};
    b.dtypes = {{"x", DType::f32}, {t, DType::bf16}};
    // A tensor whose dtypes the impl declares alone is not mixed (it follows the main dtype).
    const Accepts* acc = impl_accepts(impl);
    if (normalizes(a) && normalizes(b) && !(acc && acc->tensor_dtypes.count(t))) s.mixable.push_back(t);
  }
  return s;
}

}  // namespace kv
