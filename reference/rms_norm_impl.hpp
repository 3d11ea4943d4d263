// Row drivers for the RMSNorm reference (parallel over rows with oneTBB).
#pragma once
#include <tbb/parallel_for.h>

#include <algorithm>

namespace kv {

template <class F>
void for_rows(int64_t rows, bool parallel, F&& f) {
  if (!parallel || rows < 2) {
    for (int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
  tbb::parallel_for(int64_t(0), rows, [&](int64_t r) { f(r); });
}

template <class P>
RmsFwdOut<typename P::T> rms_fwd(const P& p, const RmsParams& q, const RmsData& d, bool parallel) {
  RmsFwdOut<typename P::T> o;
  o.y.resize(static_cast<size_t>(q.rows * q.n));
  o.rstd.resize(static_cast<size_t>(q.rows));
  const auto wp = rms_wprime(p, q, d.w.data());
  for_rows(q.rows, parallel, [&](int64_t r) {
    rms_fwd_row(p, q, d.x.data() + r * q.n, wp.data(), o.y.data() + r * q.n, o.rstd[r]);
  });
  return o;
}

template <class P>
RmsBwdOut<typename P::T> rms_bwd(const P& p, const RmsParams& q, const RmsData& d, bool parallel) {
  using Sum = decltype(p.sum());
  RmsBwdOut<typename P::T> o;
  o.dx.resize(static_cast<size_t>(q.rows * q.n));
  const int64_t chunk = 64, nchunks = (q.rows + chunk - 1) / chunk;
  std::vector<std::vector<Sum>> partial(static_cast<size_t>(nchunks));
  const auto wp = rms_wprime(p, q, d.w.data());
  for_rows(nchunks, parallel, [&](int64_t c) {
    auto& dw = partial[c];
    dw.assign(static_cast<size_t>(q.n), p.sum());
    for (int64_t r = c * chunk; r < std::min(q.rows, (c + 1) * chunk); ++r)
      rms_bwd_row(p, q, d.dy.data() + r * q.n, d.x.data() + r * q.n, wp.data(), d.rstd[r], o.dx.data() + r * q.n,
                  dw.data());
  });
  o.dw.resize(static_cast<size_t>(q.n));
  for (int64_t j = 0; j < q.n; ++j) {
    Sum s = p.sum();
    for (auto& part : partial) s.merge(part[j]);
    o.dw[j] = p.finish(s, "rows");
  }
  return o;
}

}  // namespace kv
