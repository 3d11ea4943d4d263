// Per-element verdicts and the measurements reports render.
#include "check/judge.hpp"

#include <tbb/combinable.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "check/results.hpp"
#include "core/error.hpp"
#include "core/inputs.hpp"
#include "reference/enclosure.hpp"

namespace kv {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

double half_width(double lo, double hi) { return (hi - lo) * 0.5; }
/// Whether element i admits NaN although its bounds may be finite (OutputEnclosure::may_nan).
bool may_nan(const OutputEnclosure& enc, int64_t i) { return !enc.may_nan.empty() && enc.may_nan[i]; }
}  // namespace

std::vector<int64_t> ref_target_misses(const OutputRef& ref, const OutputEnclosure& enc, DType out) {
  // Fixed chunks scanned in parallel, joined in chunk order: the indices come out sorted.
  const int64_t n = static_cast<int64_t>(ref.v.size()), chunk = int64_t(1) << 16;
  std::vector<std::vector<int64_t>> part(static_cast<size_t>((n + chunk - 1) / chunk));
  tbb::parallel_for(int64_t(0), static_cast<int64_t>(part.size()), [&](int64_t c) {
    for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) {
      // NaN and ±inf values are exact (IEEE rules on the defined computation): nothing to refine.
      // An element that admits NaN is unverifiable whatever the reference: not refined either
      // (its bounds stay sound, widened by the reference's own error).
      if (enc.unverifiable[i] || may_nan(enc, i) || !std::isfinite(ref.v[i])) continue;
      double scale = std::max(half_width(enc.lo[i], enc.hi[i]), ulp(out, ref.v[i]) * 0.5);
      if (!(ref.err[i] <= kRefTargetFraction * scale)) part[c].push_back(i);
    }
  });
  std::vector<int64_t> miss;
  for (auto& p : part) miss.insert(miss.end(), p.begin(), p.end());
  return miss;
}

namespace {

/// Ratios are counted in a histogram for the p99: bin 0 holds exact zeros, then 64 bins
/// per octave from 2^-40 to 2^24, then one for anything larger (inf included). The p99
/// reported is the upper edge of its bin: at most 1.1% above the exact percentile.
constexpr int kOctaves = 64, kPerOctave = 64, kMinExp = -40;
constexpr int kBins = 2 + kOctaves * kPerOctave;

int ratio_bin(double r) {
  if (r == 0) return 0;
  constexpr double lo = 0x1p-40, hi = 0x1p24;  // 2^kMinExp, 2^(kMinExp + kOctaves)
  static_assert(kMinExp == -40 && kMinExp + kOctaves == 24);
  if (!(r < hi)) return kBins - 1;
  if (r < lo) return 1;
  // r = (1 + f) 2^e: the octave from the exponent bits, the bin from the top 6 fraction bits.
  uint64_t b;
  std::memcpy(&b, &r, 8);
  const int e = static_cast<int>((b >> 52) & 0x7FF) - 1023;
  const int sub = static_cast<int>((b >> (52 - 6)) & (kPerOctave - 1));
  return 1 + (e - kMinExp) * kPerOctave + sub;
}

double bin_upper(int b) {
  if (b == 0) return 0;
  if (b == kBins - 1) return kInf;
  int k = b - 1, e = k / kPerOctave + kMinExp, sub = k % kPerOctave;
  return std::ldexp(1.0 + static_cast<double>(sub + 1) / kPerOctave, e);
}

/// The upper edge of the bin holding the q-quantile (0-based rank q * (n - 1)).
double hist_quantile(const std::vector<int64_t>& hist, double q, int64_t n) {
  const int64_t k = static_cast<int64_t>(q * static_cast<double>(n - 1));
  int64_t seen = 0;
  for (int b = 0; b < kBins; ++b) {
    seen += hist[b];
    if (seen > k) return bin_upper(b);
  }
  return kInf;
}

/// The ratio and ulps histograms: counts, so a thread's share of the chunks may hold them
/// (merged in any order, the counts come out the same).
struct Hists {
  std::vector<int64_t> ratio = std::vector<int64_t>(kBins, 0), ulps = std::vector<int64_t>(kBins, 0);
};

/// Measurements of one chunk of elements, merged in chunk order.
struct Partial {
  int64_t n_fail = 0, n_unv = 0, n_unv_fail = 0, n_nan = 0, n_nan_admitted = 0, n_nan_expected = 0, n_unwritten = 0, n_diff_rn = 0;
  int64_t worst = -1, first_fail = -1;
  double max_ratio = 0, max_ulps = 0, max_used = 0;
  double sum_signed_ulps = 0, sum_abs_ulps = 0;  // over elements with finite out and reference
  int64_t n_finite = 0;
  double w_out = 0, w_v = 0, w_lo = 0, w_hi = 0, w_err = 0, w_hw = 0;
  double w_ratio = 0;  // the shown worst's ratio; a failing element outranks any that passes (an admitted NaN: inf)
  bool w_failed = false;
};

/// Whether an element (failed, ratio) is to be shown before the worst one so far.
inline bool worse(bool failed, double ratio, bool w_failed, double w_ratio) { return failed != w_failed ? failed : ratio > w_ratio; }

/// An element's admissible set: its enclosure widened by the reference's error and rounded
/// to the output's dtype, and what the set says about NaN.
struct Admissible {
  double a_lo = 0, a_hi = 0;
  double lo_w = 0, hi_w = 0;  // the enclosure widened by the reference's error, before rounding to the dtype
  bool unbounded = false;    // unbounded on a side while the value is finite, or all of it around ±inf
  bool flagged_nan = false;  // the enclosure admits NaN with finite bounds
  bool nan_ok = false;       // NaN admitted (never verified)
};

/// The admissible set of element l of ref and enc (element i of the output, named in errors).
Admissible admissible_at(const TensorView& out, const OutputRef& ref, const OutputEnclosure& enc, int64_t i, int64_t l) {
  const DType dt = out.desc.dtype;
  const double v = ref.v[l], err = ref.err[l];
  const double e_lo = enc.lo[l], e_hi = enc.hi[l];
  // An infinite bound stays as it is (stepping outward from +inf would give inf - inf).
  double lo_w = std::isinf(e_lo) && err == 0 ? e_lo : enc_detail::down(e_lo - err);
  double hi_w = std::isinf(e_hi) && err == 0 ? e_hi : enc_detail::up(e_hi + err);
  // Enclosure arithmetic on an infinite input (inf - inf in a midpoint) gives NaN bounds
  // where IEEE arithmetic gives a finite value (exp(-inf) = 0): such a bound bounds nothing.
  if (std::isnan(lo_w)) lo_w = -kInf;
  if (std::isnan(hi_w)) hi_w = kInf;
  if (std::isfinite(v) && !(lo_w <= v && v <= hi_w))
    throw HarnessError("reference value of " + out.desc.name + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                       " lies outside its own enclosure [" + std::to_string(lo_w) + ", " + std::to_string(hi_w) + "]");
  Admissible a;
  a.a_lo = round_to(dt, lo_w), a.a_hi = round_to(dt, hi_w);
  a.lo_w = lo_w, a.hi_w = hi_w;
  // An admissible set unbounded on a side while the value is finite (the contract's own
  // arithmetic overflows, e.g. rstd^3 in fp16) bounds nothing: such an element is not
  // verified by lying in it. There an intermediate a correct impl computes may be ±inf
  // (DESIGN.md), and IEEE rules take inf * 0 or inf - inf to NaN, so a NaN output is
  // admitted but never verified: it counts as unverifiable, not as a pass.
  // With v = ±inf (an infinite input reached it exactly), the contract may still admit
  // anything (an infinity times a rounded factor whose sign the contract leaves open):
  // such an element is unbounded too.
  a.unbounded = std::isfinite(v) ? (std::isinf(lo_w) || std::isinf(hi_w)) : (std::isinf(v) && lo_w == -kInf && hi_w == kInf);
  // The enclosure may also admit NaN with finite bounds (an intermediate that may overflow
  // both ways, then a transform to finite values such as softcap): admitted, unverifiable.
  // Where the defined value is NaN, NaN is required whatever the contract admits.
  a.flagged_nan = !std::isnan(v) && may_nan(enc, l);
  a.nan_ok = a.unbounded || a.flagged_nan;
  return a;
}

/// Whether output o (its bits) lies in the admissible set of reference value v; counts
/// unwritten elements and NaN mismatches on the way.
bool lies_in(uint32_t bits, uint32_t poison, double o, double v, const Admissible& a, Partial& p) {
  if (bits == poison) {
    ++p.n_unwritten;
    return false;
  }
  if (std::isnan(v)) {
    ++p.n_nan_expected;
    const bool ok = std::isnan(o);
    if (!ok) ++p.n_nan;
    return ok;
  }
  if (std::isnan(o)) {
    // Admitted (see count_verdict) where the admissible set is unbounded or admits NaN; a mismatch elsewhere.
    if (a.nan_ok) ++p.n_nan_admitted; else ++p.n_nan;
    return false;
  }
  if (std::isinf(v)) return o == v;  // the defined computation reaches ±inf (an infinite input): infinities match in sign
  return a.a_lo <= o && o <= a.a_hi;  // NaN bounds make this false
}

/// Counts element i as unverifiable or failing (ok: it lies in the admissible set).
void count_verdict(bool ok, bool unverifiable, const Admissible& a, bool unwritten, double o, int64_t i, Partial& p) {
  if (unverifiable || a.unbounded) {
    ++p.n_unv;
    const bool nan_admitted = a.nan_ok && std::isnan(o);
    // Unwritten elements fail even here, and so does NaN where the bound is finite.
    if (!ok && (unwritten || (std::isnan(o) && !nan_admitted))) ++p.n_fail, ++p.n_unv_fail;
  } else if (a.flagged_nan) {
    // Never a pass; NaN is admitted, while a number outside the finite bounds (or an
    // unwritten element) still fails.
    ++p.n_unv;
    if (!ok && (unwritten || !std::isnan(o))) {
      ++p.n_fail, ++p.n_unv_fail;
      if (p.first_fail < 0) p.first_fail = i;
    }
  } else if (!ok) {
    ++p.n_fail;
    if (p.first_fail < 0) p.first_fail = i;
  }
}

/// The share of its admissible half-width an output's own value uses before its final
/// rounding: the distance from v to the near edge of o's rounding interval over the
/// continuous bound on that side. 0 for the correctly rounded value, above 1 only outside the
/// set. Unlike the ratio (which reads 1 for a correctly rounded value whose set holds one
/// float), it tells how much of the contract's room the kernel's arithmetic takes.
double used_share(DType dt, double o, double v, const Admissible& a) {
  if (o == v) return 0;
  const double half_gap = ulp(dt, std::nextafter(o, v)) / 2;
  const double pre = std::fabs(o - v) - half_gap;
  if (pre <= 0) return 0;
  const double side = o > v ? a.hi_w - v : v - a.lo_w;
  return side > 0 ? pre / side : kInf;
}

/// Output elements [b, e) against ref and enc, which hold the elements from `base` on.
void judge_range(const TensorView& out, const OutputRef& ref, const OutputEnclosure& enc, int64_t base, int64_t b,
                 int64_t e, Partial& p, Hists& hs, TolBuckets& tol) {
  const DType dt = out.desc.dtype;
  const uint32_t poison = poison_bits(dt);
  for (int64_t i = b; i < e; ++i) {
    const int64_t l = i - base;  // the element in ref and enc
    const uint32_t bits = out.bits(i);
    const double o = decode(dt, bits), v = ref.v[l];
    const Admissible a = admissible_at(out, ref, enc, i, l);
    const bool ok = lies_in(bits, poison, o, v, a, p);
    double dist = (o == v || (std::isnan(o) && std::isnan(v))) ? 0.0 : std::fabs(o - v);
    if (std::isnan(dist)) dist = kInf;
    const double hw = std::max(a.a_hi - v, v - a.a_lo);
    double ratio = dist == 0 ? 0.0 : (hw > 0 ? dist / hw : kInf);
    if (std::isnan(ratio)) ratio = kInf;
    const double ulps = dist == 0 ? 0.0 : dist / ulp(dt, std::isfinite(v) ? v : max_finite(dt));
    if (!std::isnan(v) && bits != encode(dt, round_to(dt, v))) ++p.n_diff_rn;
    if (std::isfinite(o) && std::isfinite(v) && bits != poison) {
      const double s_ulps = (o - v) / ulp(dt, v);
      p.sum_signed_ulps += s_ulps, p.sum_abs_ulps += std::fabs(s_ulps), ++p.n_finite;
      tol.add(std::fabs(v), dist);
    }
    const int64_t failed_before = p.n_fail;
    count_verdict(ok, enc.unverifiable[l], a, bits == poison, o, i, p);
    if (p.n_fail > failed_before) p.max_used = kInf;  // unwritten, NaN or outside: no headroom, whatever the distance
    ++hs.ratio[ratio_bin(ratio)];
    ++hs.ulps[ratio_bin(ulps)];
    p.max_ratio = std::max(p.max_ratio, ratio);
    const bool failed_now = p.n_fail > failed_before;
    if (p.worst < 0 || worse(failed_now, ratio, p.w_failed, p.w_ratio)) {
      p.w_ratio = ratio, p.w_failed = failed_now, p.worst = i;
      p.w_out = o, p.w_v = v, p.w_lo = a.a_lo, p.w_hi = a.a_hi, p.w_err = ref.err[l], p.w_hw = half_width(enc.lo[l], enc.hi[l]);
    }
    p.max_ulps = std::max(p.max_ulps, ulps);
    if (std::isfinite(o) && std::isfinite(v) && bits != poison && !a.unbounded && !enc.unverifiable[l])
      p.max_used = std::max(p.max_used, used_share(dt, o, v, a));
  }
}

/// Elements of the storage the view does not cover that no longer hold the poison. A
/// contiguous view with an offset leaves the storage before it (its length: the offset);
/// a strided one, the gaps its strides skip.
int64_t padding_written(const TensorView& out) {
  const DType dt = out.desc.dtype;
  const int64_t total = out.desc.storage_elems(), n = out.desc.numel();
  TensorView raw{TensorDesc{out.desc.name, dt, {total}, {}, 0}, out.base};
  const uint32_t poison = poison_bits(dt);
  int64_t written = 0;
  if (out.desc.contiguous()) {
    for (int64_t s = 0; s < out.desc.offset; ++s) written += raw.bits(s) != poison;
    for (int64_t s = out.desc.offset + n; s < total; ++s) written += raw.bits(s) != poison;
    return written;
  }
  std::vector<uint8_t> covered(static_cast<size_t>(total), 0);
  for (int64_t i = 0; i < n; ++i) covered[static_cast<size_t>(out.storage_index(i))] = 1;
  for (int64_t s = 0; s < total; ++s)
    if (!covered[s] && raw.bits(s) != poison) ++written;
  return written;
}

}  // namespace

/// Fixed chunks judged in parallel, merged in order: the measurements depend neither on the
/// thread count nor on how the elements come in blocks (a chunk that spans two blocks
/// carries its partial over, judged in the same order).
struct JudgeStream::State {
  static constexpr int64_t kChunk = int64_t(1) << 16;
  TensorView out;
  int64_t n = 0, next = 0;
  Partial open;  // the chunk `next` lies in, when next is inside it
  tbb::combinable<TolBuckets> tol;  // bins keep a min and a max: the thread split does not matter
  tbb::combinable<Hists> hists;     // counts: neither does it here
  TensorVerdict tv;
  bool worst_failed = false;                         // tv's worst element: failing,
  double worst_ratio = 0, sum_signed = 0, sum_abs = 0;  // and its ratio
  int64_t n_finite = 0;

  void merge(const Partial& p) {
    sum_signed += p.sum_signed_ulps, sum_abs += p.sum_abs_ulps, n_finite += p.n_finite;
    tv.n_fail += p.n_fail, tv.n_unverifiable += p.n_unv, tv.n_nan_mismatch += p.n_nan, tv.n_nan_admitted += p.n_nan_admitted;
    tv.n_nan_expected += p.n_nan_expected, tv.n_fail_unverifiable += p.n_unv_fail;
    tv.n_unwritten += p.n_unwritten, tv.n_diff_rn += p.n_diff_rn;
    if (tv.first_fail_index < 0) tv.first_fail_index = p.first_fail;
    tv.max_ulps = std::max(tv.max_ulps, p.max_ulps), tv.max_used = std::max(tv.max_used, p.max_used);
    tv.max_ratio = std::max(tv.max_ratio, p.max_ratio);
    if (p.worst >= 0 && (tv.worst_index < 0 || worse(p.w_failed, p.w_ratio, worst_failed, worst_ratio))) {
      worst_failed = p.w_failed, worst_ratio = p.w_ratio, tv.worst_index = p.worst;
      tv.worst_out = p.w_out, tv.worst_v = p.w_v, tv.worst_lo = p.w_lo, tv.worst_hi = p.w_hi;
      tv.worst_ref_err = p.w_err, tv.worst_half_width = p.w_hw;
    }
  }
};

JudgeStream::JudgeStream(const TensorView& out) : s_(std::make_unique<State>()) {
  s_->out = out, s_->n = out.desc.numel(), s_->tv.name = out.desc.name, s_->tv.n = s_->n;
}
JudgeStream::~JudgeStream() = default;
JudgeStream::JudgeStream(JudgeStream&&) noexcept = default;

void JudgeStream::add(int64_t first, const OutputRef& ref, const OutputEnclosure& enc) {
  State& s = *s_;
  const int64_t len = static_cast<int64_t>(ref.v.size()), end = first + len, ch = State::kChunk;
  if (first != s.next || end > s.n || static_cast<int64_t>(enc.lo.size()) != len)
    throw HarnessError("judging " + s.tv.name + ": a block of " + std::to_string(len) + " elements at " +
                       std::to_string(first) + " after " + std::to_string(s.next) + " of " + std::to_string(s.n));
  if (len == 0) return;
  const int64_t c0 = first / ch, c1 = (end - 1) / ch;
  std::vector<Partial> parts(static_cast<size_t>(c1 - c0 + 1));
  if (first % ch != 0) parts[0] = s.open;
  tbb::parallel_for(c0, c1 + 1, [&](int64_t c) {
    judge_range(s.out, ref, enc, first, std::max(first, c * ch), std::min(end, (c + 1) * ch), parts[c - c0],
                s.hists.local(), s.tol.local());
  });
  for (int64_t c = c0; c <= c1; ++c) {
    if (std::min(s.n, (c + 1) * ch) <= end) s.merge(parts[c - c0]);
    else s.open = parts[c - c0];  // the last chunk goes on in the next block
  }
  s.next = end;
}

TensorVerdict JudgeStream::finish(bool check_padding) {
  State& s = *s_;
  if (s.next != s.n)
    throw HarnessError("judging " + s.tv.name + ": " + std::to_string(s.next) + " of " + std::to_string(s.n) +
                       " elements judged");
  TensorVerdict tv = std::move(s.tv);
  const TensorView& out = s.out;
  const int64_t n = s.n;
  TolBuckets all;
  s.tol.combine_each([&](const TolBuckets& t) { all.merge(t); });
  tv.tol_points = all.frontier();
  std::vector<int64_t> hist(kBins, 0), ulps_hist(kBins, 0);
  s.hists.combine_each([&](const Hists& h) { for (int b = 0; b < kBins; ++b) hist[b] += h.ratio[b], ulps_hist[b] += h.ulps[b]; });
  if (n > 0) {
    tv.p50_ratio = std::min(hist_quantile(hist, 0.5, n), tv.max_ratio);
    tv.p99_ratio = std::min(hist_quantile(hist, 0.99, n), tv.max_ratio);
    tv.p50_ulps = std::min(hist_quantile(ulps_hist, 0.5, n), tv.max_ulps);
    tv.p99_ulps = std::min(hist_quantile(ulps_hist, 0.99, n), tv.max_ulps);
  }
  if (s.n_finite > 0)
    tv.bias_ulps = s.sum_signed / static_cast<double>(s.n_finite), tv.mean_abs_ulps = s.sum_abs / static_cast<double>(s.n_finite);
  if (tv.worst_index >= 0) unravel(tv.worst_index, out.desc.shape, tv.worst_coords);
  if (check_padding && (!out.desc.contiguous() || out.desc.offset > 0)) tv.n_padding_written = padding_written(out);
  tv.digest = digest(out);
  tv.verdict = tv.n_fail > 0 || tv.n_padding_written > 0 ? "fail" : (tv.n_unverifiable > 0 ? "unverifiable" : "pass");
  return tv;
}

TensorVerdict judge(const TensorView& out, const OutputRef& ref, const OutputEnclosure& enc, bool check_padding) {
  const int64_t n = out.desc.numel();
  if (static_cast<int64_t>(ref.v.size()) != n || static_cast<int64_t>(enc.lo.size()) != n)
    throw HarnessError("reference for " + out.desc.name + " has " + std::to_string(ref.v.size()) + " elements, output " +
                       std::to_string(n));
  JudgeStream js(out);
  js.add(0, ref, enc);
  return js.finish(check_padding);
}

nlohmann::json TensorVerdict::to_json() const {
  constexpr auto num = result_number;
  return {{"verdict", verdict},
          {"n", n},
          {"n_fail", n_fail},
          {"n_unverifiable", n_unverifiable},
          {"n_fail_unverifiable", n_fail_unverifiable},
          {"n_nan_mismatch", n_nan_mismatch},
          {"n_nan_admitted", n_nan_admitted},
          {"n_nan_expected", n_nan_expected},
          {"n_unwritten", n_unwritten},
          {"n_padding_written", n_padding_written},
          {"n_diff_rn", n_diff_rn},
          {"max_ratio", num(max_ratio)},
          {"max_used", num(max_used)},
          {"p50_ratio", num(p50_ratio)},
          {"p99_ratio", num(p99_ratio)},
          {"max_ulps", num(max_ulps)},
          {"p50_ulps", num(p50_ulps)},
          {"p99_ulps", num(p99_ulps)},
          {"tol_points", tol_points_json(tol_points)},
          {"bias_ulps", num(bias_ulps)},
          {"mean_abs_ulps", num(mean_abs_ulps)},
          {"worst_index", worst_index},
          {"worst_coords", worst_coords},
          {"first_fail_index", first_fail_index},
          {"bound", {{"out", num(worst_out)}, {"v", num(worst_v)}, {"admissible_lo", num(worst_lo)},
                     {"admissible_hi", num(worst_hi)}, {"ref_err", num(worst_ref_err)},
                     {"contract_half_width", num(worst_half_width)}}},
          {"digest", digest.to_json()}};
}

}  // namespace kv
