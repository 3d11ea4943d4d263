// Case strings: formatting, parsing and identities.
#include "core/case.hpp"

#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <sstream>

#include "core/error.hpp"

namespace kv {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

template <class M, class F>
std::string join_map(const M& m, F&& value) {
  std::string out;
  for (auto& [k, v] : m) {
    if (!out.empty()) out += ',';
    out += k + ":" + value(v);
  }
  return out;
}

std::string layout_str(const std::map<std::string, TensorLayout>& l) {
  std::string out;
  for (auto& [name, t] : l) {
    if (!out.empty()) out += ';';
    out += name + "+" + std::to_string(t.offset);
    if (!t.strides.empty()) {
      std::string st;
      for (int64_t v : t.strides) append_sep(st, ",", std::to_string(v));
      out += "/" + st;
    }
  }
  return out;
}

}  // namespace

std::map<std::string, TensorLayout> parse_layout(std::string_view s) {
  std::map<std::string, TensorLayout> out;
  for (auto item : split(s, ';')) {
    size_t plus = item.find('+');
    if (plus == std::string_view::npos || plus == 0)
      throw UsageError("malformed layout '" + std::string(item) + "' (expected name+offset[/stride,...])");
    TensorLayout t;
    std::string_view rest = item.substr(plus + 1);
    size_t slash = rest.find('/');
    t.offset = parse_int(rest.substr(0, slash), "layout offset");
    if (t.offset < 0) throw UsageError("negative layout offset in '" + std::string(item) + "'");
    if (slash != std::string_view::npos)
      for (auto st : split(rest.substr(slash + 1), ',')) t.strides.push_back(parse_int(st, "layout stride"));
    out[std::string(item.substr(0, plus))] = t;
  }
  return out;
}

std::string hex_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

double parse_real(std::string_view s, std::string_view what) {
  std::string str(s);
  if (str.empty()) throw UsageError("empty " + std::string(what));
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size()) throw UsageError("malformed " + std::string(what) + " '" + str + "'");
  return v;
}

int64_t parse_int(std::string_view s, std::string_view what) {
  std::string str(s);
  if (str.empty()) throw UsageError("empty " + std::string(what));
  char* end = nullptr;
  errno = 0;
  // Base 10 only: a leading zero is not octal.
  long long v = std::strtoll(str.c_str(), &end, 10);
  if (end != str.c_str() + str.size() || errno == ERANGE)
    throw UsageError("malformed " + std::string(what) + " '" + str + "'");
  return v;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) append_sep(out, "x", std::to_string(d));
  return out;
}

std::vector<int64_t> parse_shape(std::string_view s) {
  std::vector<int64_t> out;
  if (s.empty()) throw UsageError("empty shape");
  for (auto d : split(s, 'x')) {
    int64_t v = parse_int(d, "dimension");
    if (v < 0) throw UsageError("negative dimension " + std::to_string(v) + " in shape '" + std::string(s) + "'");
    out.push_back(v);
  }
  return out;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::map<std::string, std::string> parse_kv_list(std::string_view s, std::string_view what) {
  std::map<std::string, std::string> out;
  for (auto item : split(s, ',')) {
    size_t p = item.find_first_of(":=");
    if (p == std::string_view::npos || p == 0)
      throw UsageError("malformed " + std::string(what) + " entry '" + std::string(item) + "' (expected key=value)");
    // A key given twice is a mistake either way (which one was meant?): never keep the last.
    if (!out.emplace(std::string(item.substr(0, p)), std::string(item.substr(p + 1))).second)
      throw UsageError(std::string(what) + " key '" + std::string(item.substr(0, p)) + "' given twice in '" +
                       std::string(s) + "'");
  }
  return out;
}

uint64_t parse_seed(std::string_view s) {
  std::string sv(s);
  char* end = nullptr;
  errno = 0;
  const bool digits = !sv.empty() && sv.find_first_not_of("0123456789") == std::string::npos;
  const uint64_t v = digits ? std::strtoull(sv.c_str(), &end, 10) : 0;
  if (!digits || end != sv.c_str() + sv.size() || errno == ERANGE)
    throw UsageError("malformed seed '" + sv + "' (a decimal integer from 0 to 18446744073709551615)");
  return v;
}

namespace {
/// Edits (insert, delete, substitute, swap two neighbours) from a to b: a swap is the
/// commonest typo (mdoe for mode) and counts one.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}
}  // namespace

std::string did_you_mean(std::string_view word, const std::vector<std::string>& known) {
  const size_t limit = std::max<size_t>(1, (word.size() + 2) / 3);
  std::string best;
  size_t best_d = limit + 1;
  for (auto& k : known) {
    const size_t d = edit_distance(word, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string unknown_name(std::string_view what, std::string_view word, const std::vector<std::string>& known,
                         std::string_view where) {
  std::string all;
  for (auto& k : known) append_sep(all, ", ", k);
  return "unknown " + std::string(what) + " '" + std::string(word) + "'" + std::string(where) + did_you_mean(word, known) +
         " (known: " + (all.empty() ? "none" : all) + ")";
}

std::string Case::str() const {
  std::ostringstream o;
  o << "kv1 op=" << op << " impl=" << impl << " config=" << join_map(config, [](auto& v) { return v; })
    << " shape=" << shape_str(shape)
    << " dtypes=" << join_map(dtypes, [](DType d) { return std::string(dtype_name(d)); })
    << " attrs=" << join_map(attrs, [](auto& v) { return v; });
  if (!layout.empty()) o << " layout=" << layout_str(layout);
  if (!alias.empty()) o << " alias=" << join_map(alias, [](auto& v) { return v; });
  o << " dist=" << dist << " seed=" << seed << " gen=" << gen;
  return o.str();
}

Case Case::parse(std::string_view s) {
  auto toks = split(s, ' ');
  if (toks.empty() || toks[0] != "kv1")
    throw UsageError("malformed case string: it must start with 'kv1' (case grammar version 1)");
  Case c;
  bool have_op = false, have_shape = false;
  std::vector<std::string> seen;
  for (size_t i = 1; i < toks.size(); ++i) {
    auto t = toks[i];
    if (t.empty()) continue;
    size_t eq = t.find('=');
    if (eq == std::string_view::npos) throw UsageError("malformed case field '" + std::string(t) + "' (expected key=value)");
    std::string_view k = t.substr(0, eq), v = t.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), k) != seen.end())
      throw UsageError("case field '" + std::string(k) + "' given twice");
    seen.emplace_back(k);
    if (k == "op") {
      c.op = v, have_op = true;
    } else if (k == "impl") {
      c.impl = v;
    } else if (k == "config") {
      c.config = parse_kv_list(v, "config");
    } else if (k == "shape") {
      c.shape = parse_shape(v), have_shape = true;
    } else if (k == "dtypes") {
      for (auto& [name, d] : parse_kv_list(v, "dtypes")) {
        auto dt = parse_dtype(d);
        if (!dt) throw UsageError("unknown dtype '" + d + "' for tensor " + name + " (fp32, fp16, bf16)");
        c.dtypes[name] = *dt;
      }
    } else if (k == "attrs") {
      c.attrs = parse_kv_list(v, "attrs");
    } else if (k == "layout") {
      c.layout = parse_layout(v);
    } else if (k == "alias") {
      c.alias = parse_kv_list(v, "alias");
    } else if (k == "dist") {
      c.dist = v;
    } else if (k == "seed") {
      c.seed = parse_seed(v);
    } else if (k == "gen") {
      c.gen = static_cast<int>(parse_int(v, "generator version"));
      if (c.gen != kGeneratorVersion)
        throw UsageError("case needs input generator version " + std::to_string(c.gen) + ", this build has " +
                         std::to_string(kGeneratorVersion));
    } else {
      throw UsageError(unknown_name("case field", k, {"op", "impl", "config", "shape", "dtypes", "attrs", "layout",
                                                         "alias", "dist", "seed", "gen"}));
    }
  }
  if (!have_op) throw UsageError("malformed case string: no op=");
  if (!have_shape) throw UsageError("malformed case string: no shape=");
  return c;
}

uint64_t Case::case_id() const {
  std::string s = str();
  return XXH64(s.data(), s.size(), 0);
}

uint64_t Case::input_id() const {
  Case c = *this;
  c.impl.clear();
  c.config.clear();
  c.layout.clear();
  c.alias.clear();
  std::string s = c.str();
  for (auto& [name, d] : sites) s += " site:" + name + "=" + std::string(dtype_name(d));
  for (auto& [name, f] : forms) s += " form:" + name + "=" + f;
  return XXH64(s.data(), s.size(), 1);
}

const std::string& Case::attr(const std::string& name) const {
  auto it = attrs.find(name);
  if (it == attrs.end()) throw UsageError("case has no attribute '" + name + "'");
  return it->second;
}

double Case::attr_real(const std::string& name) const { return parse_real(attr(name), "attribute " + name); }

std::string Case::config_or(const std::string& key, const std::string& def) const {
  auto it = config.find(key);
  return it == config.end() ? def : it->second;
}

int64_t Case::config_int(const std::string& key, int64_t def) const {
  auto it = config.find(key);
  return it == config.end() ? def : parse_int(it->second, "config " + key);
}

}  // namespace kv
