// What every op binding shares: exact input values, row sets, parallel row and column
// drivers, normalization of attributes, dtypes and layouts, and PolicyOp, which turns one
// definition written over a scalar policy into the reference, its refinement and the
// enclosure under a contract.
#pragma once
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/inputs.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "reference/dual_policy.hpp"
#include "reference/mpfi_policy.hpp"
#include "reference/policy.hpp"
#include "core/par.hpp"

namespace kv {

/// Exact values of a case's input tensors (every stored number is exact in double), in
/// buffers the parallel read touches first (no serial zero fill; huge pages when large).
class OpInputs {
 public:
  static OpInputs read(const std::vector<TensorSpec>& specs, const TensorSet& ts);
  const DoubleBuf& operator[](const std::string& name) const;
  bool has(const std::string& name) const { return v_.count(name) != 0; }
  DoubleBuf& mut(const std::string& name) { return v_[name]; }

 private:
  std::map<std::string, DoubleBuf> v_;
};

/// The rows a computation covers: all, or those a refinement recomputes.
struct RowSet {
  const std::vector<char>* mask = nullptr;
  bool all() const { return mask == nullptr; }
  bool has(int64_t r) const { return !mask || (*mask)[static_cast<size_t>(r)]; }
};

template <class F>
void par_rows(int64_t n, bool parallel, F&& f) {
  if (!parallel || n < 2) {
    for (int64_t r = 0; r < n; ++r) f(r);
    return;
  }
  par_for(int64_t(0), n, [&](int64_t r) { f(r); });
}

/// Rows per chunk of a column reduction (dW, dB, FLCE's grad W).
inline constexpr int64_t kColChunk = 64;

/// Column sums over rows: rows in fixed chunks of kColChunk, each chunk's k*cols sums
/// taken in row order, chunk sums merged in chunk order, so the result does not depend on
/// the thread count. body(r, sums) adds row r's terms to sums[kk*cols + j]; out(kk, j, v)
/// receives each finished sum. Rows outside `rows` are skipped and nothing is finished
/// (a partial column sum means nothing).
template <class P, class Body, class Out>
void column_sums(const P& p, int64_t nrows, int64_t cols, int k, RowSet rows, bool parallel, const char* axis,
                 Body&& body, Out&& out) {
  using Sum = decltype(p.sum());
  const int64_t nchunks = (nrows + kColChunk - 1) / kColChunk;
  std::vector<std::vector<Sum>> part(static_cast<size_t>(nchunks));
  par_rows(nchunks, parallel, [&](int64_t ch) {
    part[ch].assign(static_cast<size_t>(k * cols), p.sum());
    for (int64_t r = ch * kColChunk; r < std::min(nrows, (ch + 1) * kColChunk); ++r)
      if (rows.has(r)) body(r, part[ch].data());
  });
  if (!rows.all()) return;
  par_rows(k * cols, parallel, [&](int64_t kj) {
    Sum s = p.sum();
    for (auto& pc : part) s.merge(pc[kj]);
    out(static_cast<int>(kj / cols), kj % cols, p.finish(s, axis));
  });
}

/// The output specs among an op's tensors, in order.
std::vector<TensorSpec> output_specs(const std::vector<TensorSpec>& tensors);
/// Reference buffers for `outs` (uninitialized: the computation writes every element).
RefResult make_ref(const std::vector<TensorSpec>& outs);
/// The same into res, reusing its storage.
void size_ref(const std::vector<TensorSpec>& outs, RefResult& res);
/// Enclosure buffers for `outs`, reusing out's storage.
void size_enclosures(const std::vector<TensorSpec>& outs, std::vector<OutputEnclosure>& out);
/// The same for the outputs `keep` marks (in outs' order); the others get no elements.
void size_ref(const std::vector<TensorSpec>& outs, RefResult& res, const std::vector<char>& keep);
void size_enclosures(const std::vector<TensorSpec>& outs, std::vector<OutputEnclosure>& out, const std::vector<char>& keep);
/// Per output of `outs`, whether `want` names it.
std::vector<char> wanted(const std::vector<TensorSpec>& outs, const std::set<std::string>& want);
/// slice_dims for an op whose tensors named run along the case's first dimension at
/// their dim 0 (OpBinding::slice_dims).
std::map<std::string, int> dim0_slices(std::initializer_list<std::string> names);
inline void put_ref(OutputRef& o, int64_t i, const Enc& e) { o.v[i] = e.m, o.err[i] = e.r; }
inline void put_enc(OutputEnclosure& o, int64_t i, const Enc& e) {
  o.lo[i] = enc_lo(e), o.hi[i] = enc_hi(e), o.unverifiable[i] = e.unv, o.may_nan[i] = e.nan;
}

// Normalization shared by the bindings; each throws UsageError with the reason.
/// Fills defaults, rejects unknown attributes and values, canonicalizes reals (hex) and
/// integers (decimal).
void normalize_attrs(const std::string& op, const std::vector<AttrSpec>& specs, Case& c);
void check_dist(const Case& c, const std::vector<std::string>& dists);
/// Dtype rules per tensor: 'x' follows the case's default dtype (`dtypes=x:..`, fp32 when
/// unset), 'f' defaults to fp32, 'i' is i32 only. Unknown names are rejected.
void normalize_dtypes(const std::string& op, const std::vector<std::pair<std::string, char>>& rules, Case& c);
/// Layouts name known tensors with matching rank and non-overlapping strides; aliases
/// pair an output with an input of the same shape and dtype.
void check_layouts(const Case& c, const std::vector<TensorSpec>& ts);
void check_shape_nonneg(const Case& c);

/// The definition evaluated over the other scalar types (for the reference tests): per
/// output, per element (elements the definition does not reach keep a zero).
class PolicyEval {
 public:
  virtual ~PolicyEval() = default;
  virtual std::vector<std::vector<double>> eval_double(const Case& c, const TensorSet& ts) const = 0;
  virtual std::vector<std::vector<dd_real>> eval_dd(const Case& c, const TensorSet& ts) const = 0;
  virtual std::vector<std::vector<mpfr_float>> eval_mpfr(const Case& c, const TensorSet& ts, unsigned bits) const = 0;
  virtual std::vector<std::vector<mpfi_float>> eval_mpfi(const Case& c, const TensorSet& ts, unsigned bits) const = 0;
};

/// One definition over a scalar policy, turned into the binding's reference, refinement
/// and enclosure. D supplies name(), attrs(), dists(), tensors(), generate() and:
///   void check(Case&) const;                  // shape and attribute constraints
///   std::vector<std::pair<std::string, char>> dtype_rules(const Case&) const;
///   int64_t rows(const Case&) const;           // independent rows
///   int64_t row_of(const Case&, int out, int64_t i) const;  // -1: depends on every row
///   bool output_row_local(const Case&, int out) const;       // OpBinding::row_local
///   template <class P, class S>
///   void compute(const Case&, const OpInputs&, const P&, S& sink, RowSet, bool parallel) const;
/// where sink(out, i, value) receives output `out` (in tensors() order) at element i.
template <class D>
class PolicyOp : public OpBinding, public PolicyEval {
 public:
  std::vector<std::vector<double>> eval_double(const Case& c, const TensorSet& ts) const override {
    return eval(c, ts, ValuePolicy<double>{});
  }
  std::vector<std::vector<dd_real>> eval_dd(const Case& c, const TensorSet& ts) const override {
    return eval(c, ts, ValuePolicy<dd_real>{});
  }
  std::vector<std::vector<mpfr_float>> eval_mpfr(const Case& c, const TensorSet& ts, unsigned bits) const override {
    set_mpfr_bits(bits);
    return eval(c, ts, ValuePolicy<mpfr_float>{});
  }
  std::vector<std::vector<mpfi_float>> eval_mpfi(const Case& c, const TensorSet& ts, unsigned bits) const override {
    set_mpfi_bits(bits);
    set_mpfr_bits(bits);
    return eval(c, ts, MpfiPolicy{});
  }

  std::vector<std::string> dists() const override { return known_dists(); }
  void normalize(Case& c) const override {
    check_shape_nonneg(c);
    normalize_attrs(name(), attrs(), c);
    check_dist(c, dists());
    normalize_dtypes(name(), self().dtype_rules(c), c);
    self().check(c);
    check_layouts(c, tensors(c));
  }

  bool row_local(const Case& c, const std::string& out) const override {
    const auto outs = outputs(c);
    for (size_t o = 0; o < outs.size(); ++o)
      if (outs[o].name == out) return self().output_row_local(c, static_cast<int>(o));
    return false;
  }

  std::map<std::string, int64_t> reduced_axes(const Case& c) const override {
    std::map<std::string, int64_t> r;
    for (auto& a : self().axes(c)) r[a.name] = a.len;
    return r;
  }

  RefResult reference(const Case& c, const TensorSet& ts) const override {
    RefResult res = make_ref(outputs(c));
    OpInputs in = OpInputs::read(tensors(c), ts);
    auto sink = [&](int o, int64_t i, const Enc& e) { put_ref(res.outputs[o], i, e); };
    self().compute(c, in, EncPolicy{}, sink, RowSet{}, true);
    return res;
  }

  void enclose(const Case& c, const TensorSet& ts, const Contract& k,
               std::vector<OutputEnclosure>& out) const override {
    size_enclosures(outputs(c), out);
    OpInputs in = OpInputs::read(tensors(c), ts);
    auto sink = [&](int o, int64_t i, const Enc& e) { put_enc(out[o], i, e); };
    self().compute(c, in, EncPolicy{&k}, sink, RowSet{}, true);
  }

  void evaluate(const Case& c, const TensorSet& ts, const Contract& k, RefResult& ref,
                std::vector<OutputEnclosure>& out) const override {
    size_ref(outputs(c), ref);
    size_enclosures(outputs(c), out);
    OpInputs in = OpInputs::read(tensors(c), ts);
    auto sink = [&](int o, int64_t i, const Dual& e) {
      put_ref(ref.outputs[o], i, e.ref);
      put_enc(out[o], i, e.con);
    };
    self().compute(c, in, DualPolicy{&k}, sink, RowSet{}, true);
  }

  /// evaluate() for some outputs: the definition's one pass with the others' values
  /// dropped (the same bits). All of them: evaluate(), which an op may specialize.
  void evaluate_only(const Case& c, const TensorSet& ts, const Contract& k, const std::set<std::string>& want,
                     RefResult& ref, std::vector<OutputEnclosure>& out) const override {
    const auto outs = outputs(c);
    const std::vector<char> keep = wanted(outs, want);
    if (std::find(keep.begin(), keep.end(), 0) == keep.end()) return this->evaluate(c, ts, k, ref, out);
    size_ref(outs, ref, keep);
    size_enclosures(outs, out, keep);
    OpInputs in = OpInputs::read(tensors(c), ts);
    auto sink = [&](int o, int64_t i, const Dual& e) {
      if (!keep[static_cast<size_t>(o)]) return;
      put_ref(ref.outputs[o], i, e.ref);
      put_enc(out[o], i, e.con);
    };
    self().compute(c, in, DualPolicy{&k}, sink, RowSet{}, true);
  }

  /// Rows holding a missed element are recomputed over MPFI at rising precision; the
  /// result is "certified:mpfi-<bits>". A miss in an output that depends on every row
  /// recomputes everything (small cases only).
  void refine(const Case& c, const TensorSet& ts, RefResult& ref,
              const std::map<std::string, std::vector<int64_t>>& misses) const override {
    auto outs = outputs(c);
    const int64_t nrows = self().rows(c);
    std::vector<char> mask(static_cast<size_t>(nrows), 0);
    bool all = false;
    int64_t nmiss = 0;
    for (size_t o = 0; o < outs.size(); ++o) {
      auto it = misses.find(outs[o].name);
      if (it == misses.end()) continue;
      for (int64_t i : it->second) {
        int64_t r = self().row_of(c, static_cast<int>(o), i);
        if (r < 0) all = true;
        else mask[static_cast<size_t>(r)] = 1;
        ++nmiss;
      }
    }
    if (nmiss == 0) return;
    int64_t total = 0;
    for (auto& t : tensors(c)) total += numel(t.shape);
    // total >= numel(c.shape) for every op that slices (its shape is a tensor's).
    if (all && total > kRefineAllMaxElements) return;
    RowSet rs{all ? nullptr : &mask};
    OpInputs in = OpInputs::read(tensors(c), ts);
    // Recompute over MPFI intervals, doubling the precision until every recomputed interval
    // is narrower than 2^-64 of its magnitude (far inside any target: an enclosure is at
    // least half an output ulp wide), up to 4096 bits. Two MPFR precisions that merely
    // agree are not enough: deep in the softcap's saturation 1 - tanh^2 is exactly 0 at
    // both 128 and 256 bits while its value is ~1e-88.
    unsigned bits = 128;
    std::vector<std::unordered_map<int64_t, mpfi_float>> got(outs.size());
    auto at = [&](unsigned b) {
      set_mpfi_bits(b);
      set_mpfr_bits(b);
      for (auto& g : got) g.clear();
      auto sink = [&](int o, int64_t i, const mpfi_float& v) { got[o][i] = v; };
      self().compute(c, in, MpfiPolicy{}, sink, rs, false);
    };
    auto narrow = [&] {
      for (auto& g : got)
        for (auto& [i, v] : g) {
          mpfr_float lo = boost::multiprecision::lower(v), hi = boost::multiprecision::upper(v);
          if (!(hi - lo <= std::max(abs(lo), abs(hi)) * mpfr_float(0x1p-64))) return false;
        }
      return true;
    };
    at(bits);
    while (!narrow() && bits < 4096) at(bits *= 2);
    int64_t rows_done = all ? nrows : std::count(mask.begin(), mask.end(), 1);
    for (size_t o = 0; o < outs.size(); ++o)
      for (auto& [i, v] : got[o]) {
        double vh, vl;
        split_hi_lo(boost::multiprecision::median(v), vh, vl);
        mpfr_float d = std::max(boost::multiprecision::upper(v) - vh, vh - boost::multiprecision::lower(v));
        ref.outputs[o].v[i] = vh;
        ref.outputs[o].err[i] = enc_detail::rup(d.convert_to<double>());
      }
    ref.method += "+certified:mpfi-" + std::to_string(bits) + "(" + std::to_string(rows_done) + " rows)";
  }

 protected:
  std::vector<TensorSpec> outputs(const Case& c) const { return output_specs(tensors(c)); }

 private:
  const D& self() const { return static_cast<const D&>(*this); }
  template <class P>
  std::vector<std::vector<typename P::T>> eval(const Case& c, const TensorSet& ts, const P& p) const {
    using T = typename P::T;
    std::vector<std::vector<T>> out;
    for (auto& t : outputs(c)) out.emplace_back(static_cast<size_t>(numel(t.shape)), T(0));
    OpInputs in = OpInputs::read(tensors(c), ts);
    auto sink = [&](int o, int64_t i, const T& v) { out[o][i] = v; };
    self().compute(c, in, p, sink, RowSet{}, false);
    return out;
  }
};

}  // namespace kv
