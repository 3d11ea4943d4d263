// Normalization helpers and input reading shared by the op bindings.
#include "ops/op_base.hpp"

#include <cmath>

#include "core/error.hpp"

namespace kv {

OpInputs OpInputs::read(const std::vector<TensorSpec>& specs, const TensorSet& ts) {
  OpInputs in;
  for (auto& t : specs) {
    if (t.role != Role::input) continue;
    auto v = ts.view(t.name);
    auto& out = in.v_[t.name];
    const int64_t n = v.desc.numel();
    out.resize(static_cast<size_t>(n));
    const int64_t chunk = 1 << 16;
    par_rows((n + chunk - 1) / chunk, true,
             [&](int64_t c) { v.read(c * chunk, std::min(n, (c + 1) * chunk) - c * chunk, out.data() + c * chunk); });
  }
  return in;
}

std::vector<TensorSpec> output_specs(const std::vector<TensorSpec>& tensors) {
  std::vector<TensorSpec> o;
  for (auto& t : tensors)
    if (t.role == Role::output) o.push_back(t);
  return o;
}

void size_ref(const std::vector<TensorSpec>& outs, RefResult& res) {
  res.method = "certified:double-enclosure";
  res.outputs.resize(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    res.outputs[o].name = outs[o].name;
    res.outputs[o].v.resize(static_cast<size_t>(numel(outs[o].shape)));
    res.outputs[o].err.resize(static_cast<size_t>(numel(outs[o].shape)));
  }
}

RefResult make_ref(const std::vector<TensorSpec>& outs) {
  RefResult res;
  size_ref(outs, res);
  return res;
}

void size_enclosures(const std::vector<TensorSpec>& outs, std::vector<OutputEnclosure>& out) {
  out.resize(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    const size_t n = static_cast<size_t>(numel(outs[o].shape));
    out[o].name = outs[o].name;
    out[o].lo.resize(n);
    out[o].hi.resize(n);
    out[o].unverifiable.resize(n);
    out[o].may_nan.resize(n);
  }
}

void size_ref(const std::vector<TensorSpec>& outs, RefResult& res, const std::vector<char>& keep) {
  res.method = "certified:double-enclosure";
  res.outputs.resize(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    OutputRef& r = res.outputs[o];
    r.name = outs[o].name;
    if (!keep[o]) {
      DoubleBuf().swap(r.v), DoubleBuf().swap(r.err);
      continue;
    }
    r.v.resize(static_cast<size_t>(numel(outs[o].shape)));
    r.err.resize(static_cast<size_t>(numel(outs[o].shape)));
  }
}

void size_enclosures(const std::vector<TensorSpec>& outs, std::vector<OutputEnclosure>& out,
                     const std::vector<char>& keep) {
  out.resize(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    OutputEnclosure& e = out[o];
    e.name = outs[o].name;
    if (!keep[o]) {
      DoubleBuf().swap(e.lo), DoubleBuf().swap(e.hi), ByteBuf().swap(e.unverifiable), ByteBuf().swap(e.may_nan);
      continue;
    }
    const size_t n = static_cast<size_t>(numel(outs[o].shape));
    e.lo.resize(n), e.hi.resize(n), e.unverifiable.resize(n), e.may_nan.resize(n);
  }
}

std::vector<char> wanted(const std::vector<TensorSpec>& outs, const std::set<std::string>& want) {
  std::vector<char> keep(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) keep[o] = want.count(outs[o].name) != 0;
  return keep;
}

std::map<std::string, int> dim0_slices(std::initializer_list<std::string> names) {
  std::map<std::string, int> m;
  for (auto& n : names) m[n] = 0;
  return m;
}

const DoubleBuf& OpInputs::operator[](const std::string& name) const {
  auto it = v_.find(name);
  if (it == v_.end()) throw HarnessError("no input tensor '" + name + "'");
  return it->second;
}

void check_shape_nonneg(const Case& c) {
  if (c.shape.empty()) throw UsageError(c.op + " needs a shape");
  for (auto d : c.shape)
    if (d < 0) throw UsageError("negative dimension in shape " + shape_str(c.shape));
}

void normalize_attrs(const std::string& op, const std::vector<AttrSpec>& specs, Case& c) {
  for (auto& [k, v] : c.attrs)
    if (std::none_of(specs.begin(), specs.end(), [&](auto& s) { return s.name == k; })) {
      std::vector<std::string> known;
      for (auto& s : specs) known.push_back(s.name);
      throw UsageError(unknown_name("attribute", k, known, " for " + op));
    }
  for (auto& s : specs) {
    auto it = c.attrs.find(s.name);
    if (it == c.attrs.end()) {
      c.attrs[s.name] = s.def;
    } else if (s.real) {
      double v = parse_real(it->second, "attribute " + s.name);
      if (!std::isfinite(v)) throw UsageError("attribute " + s.name + " must be finite");
      it->second = hex_float(v);
    } else if (s.integer) {
      it->second = std::to_string(parse_int(it->second, "attribute " + s.name));
    } else if (!s.text && std::find(s.choices.begin(), s.choices.end(), it->second) == s.choices.end()) {
      std::string all;
      for (auto& ch : s.choices) append_sep(all, ", ", ch);
      throw UsageError("invalid " + s.name + " '" + it->second + "' for " + op + " (" + all + ")");
    }
  }
}

void check_dist(const Case& c, const std::vector<std::string>& dists) {
  if (std::find(dists.begin(), dists.end(), c.dist) == dists.end())
    throw UsageError(unknown_name("value distribution", c.dist, dists, " for " + c.op));
}

void normalize_dtypes(const std::string& op, const std::vector<std::pair<std::string, char>>& rules, Case& c) {
  auto rule = [&](const std::string& n) -> const char* {
    for (auto& [name, r] : rules)
      if (name == n) return &r;
    return nullptr;
  };
  for (auto& [k, v] : c.dtypes)
    if (k != "x" && !rule(k)) throw UsageError(op + " has no tensor '" + k + "'");
  const DType def = c.dtypes.count("x") ? c.dtypes.at("x") : DType::f32;
  if (def == DType::i32) throw UsageError(op + ": i32 is for integer inputs only");
  for (auto& [name, r] : rules) {
    auto it = c.dtypes.find(name);
    if (r == 'i') {
      if (it != c.dtypes.end() && it->second != DType::i32) throw UsageError(op + ": " + name + " is an i32 tensor");
      c.dtypes[name] = DType::i32;
    } else if (it == c.dtypes.end()) {
      c.dtypes[name] = r == 'x' ? def : DType::f32;
    } else if (it->second == DType::i32) {
      throw UsageError(op + ": " + name + " is a floating-point tensor");
    }
  }
  if (!rule("x")) c.dtypes.erase("x");
}

void check_layouts(const Case& c, const std::vector<TensorSpec>& ts) {
  auto find = [&](const std::string& n) -> const TensorSpec* {
    for (auto& t : ts)
      if (t.name == n) return &t;
    return nullptr;
  };
  for (auto& [name, l] : c.layout) {
    auto* t = find(name);
    if (!t) throw UsageError("layout names unknown tensor '" + name + "'");
    if (l.strides.empty()) continue;
    if (l.strides.size() != t->shape.size())
      throw UsageError("layout of " + name + " needs " + std::to_string(t->shape.size()) + " strides");
    std::vector<size_t> order(t->shape.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l.strides[a] < l.strides[b]; });
    int64_t extent = 1;
    for (size_t i : order) {
      if (l.strides[i] < 1) throw UsageError("layout of " + name + ": strides must be >= 1");
      if (t->shape[i] > 1 && l.strides[i] < extent) throw UsageError("layout of " + name + ": strides overlap");
      extent = l.strides[i] * t->shape[i];
    }
  }
  for (auto& [out, in] : c.alias) {
    auto *o = find(out), *i = find(in);
    if (!o || !i || o->role != Role::output || i->role != Role::input)
      throw UsageError("alias " + out + ":" + in + " must name an output and an input");
    if (o->shape != i->shape || o->dtype != i->dtype)
      throw UsageError("alias " + out + ":" + in + " needs the same shape and dtype");
    if (c.layout.count(out) || c.layout.count(in))
      throw UsageError("aliased tensors take the input's layout; give no layout for " + out + " or " + in);
  }
}

}  // namespace kv
