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
#include "check/judge_elems.hpp"
#include "reference/enclosure.hpp"
#include "core/par.hpp"

namespace kv {

using namespace judge_detail;


std::vector<int64_t> ref_target_misses(const OutputRef& ref, const OutputEnclosure& enc, DType out) {
  // Fixed chunks scanned in parallel, joined in chunk order: the indices come out sorted.
  const int64_t n = static_cast<int64_t>(ref.v.size()), chunk = int64_t(1) << 16;
  std::vector<std::vector<int64_t>> part(static_cast<size_t>((n + chunk - 1) / chunk));
  par_for(int64_t(0), static_cast<int64_t>(part.size()), [&](int64_t c) {
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
  par_for(c0, c1 + 1, [&](int64_t c) {
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
