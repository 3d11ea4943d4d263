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

inline RmsSource RmsSource::of(const RmsData& d, int64_t n) {
  RmsSource s;
  s.x_row = [&d, n](int64_t r, double* out) { std::copy(d.x.begin() + r * n, d.x.begin() + (r + 1) * n, out); };
  if (!d.dy.empty())
    s.dy_row = [&d, n](int64_t r, double* out) { std::copy(d.dy.begin() + r * n, d.dy.begin() + (r + 1) * n, out); };
  s.w = d.w;
  s.rstd = d.rstd;
  return s;
}

template <class P, class Sink>
void rms_fwd_into(const P& p, const RmsParams& q, const RmsSource& d, bool parallel, Sink& sink) {
  using T = typename P::T;
  const auto wp = rms_wprime(p, q, d.w.data());
  for_rows(q.rows, parallel, [&](int64_t r) {
    std::vector<double> x(static_cast<size_t>(q.n));
    std::vector<T> y(static_cast<size_t>(q.n));
    T rstd;
    d.x_row(r, x.data());
    rms_fwd_row(p, q, x.data(), wp.data(), y.data(), rstd);
    for (int64_t j = 0; j < q.n; ++j) sink.y(r * q.n + j, y[j]);
    sink.rstd(r, rstd);
  });
}

template <class P, class Sink>
void rms_bwd_into(const P& p, const RmsParams& q, const RmsSource& d, bool parallel, Sink& sink) {
  using T = typename P::T;
  using Sum = decltype(p.sum());
  const int64_t chunk = kRmsDwChunkRows, nchunks = (q.rows + chunk - 1) / chunk;
  std::vector<std::vector<Sum>> partial(static_cast<size_t>(nchunks));
  const auto wp = rms_wprime(p, q, d.w.data());
  for_rows(nchunks, parallel, [&](int64_t c) {
    auto& dw = partial[c];
    dw.assign(static_cast<size_t>(q.n), p.sum());
    std::vector<double> x(static_cast<size_t>(q.n)), dy(static_cast<size_t>(q.n));
    std::vector<T> dx(static_cast<size_t>(q.n));
    for (int64_t r = c * chunk; r < std::min(q.rows, (c + 1) * chunk); ++r) {
      d.x_row(r, x.data());
      d.dy_row(r, dy.data());
      rms_bwd_row(p, q, dy.data(), x.data(), wp.data(), d.rstd[r], dx.data(), dw.data());
      for (int64_t j = 0; j < q.n; ++j) sink.dx(r * q.n + j, dx[j]);
    }
  });
  for (int64_t j = 0; j < q.n; ++j) {
    Sum s = p.sum();
    for (auto& part : partial) s.merge(part[j]);
    sink.dw(j, p.finish(s, "rows"));
  }
}

template <class P>
RmsFwdOut<typename P::T> rms_fwd(const P& p, const RmsParams& q, const RmsData& d, bool parallel) {
  RmsFwdOut<typename P::T> o;
  o.y.resize(static_cast<size_t>(q.rows * q.n));
  o.rstd.resize(static_cast<size_t>(q.rows));
  struct {
    RmsFwdOut<typename P::T>& o;
    void y(int64_t i, const typename P::T& v) { o.y[i] = v; }
    void rstd(int64_t i, const typename P::T& v) { o.rstd[i] = v; }
  } sink{o};
  RmsSource src = RmsSource::of(d, q.n);
  rms_fwd_into(p, q, src, parallel, sink);
  return o;
}

template <class P>
RmsBwdOut<typename P::T> rms_bwd(const P& p, const RmsParams& q, const RmsData& d, bool parallel) {
  RmsBwdOut<typename P::T> o;
  o.dx.resize(static_cast<size_t>(q.rows * q.n));
  o.dw.resize(static_cast<size_t>(q.n));
  struct {
    RmsBwdOut<typename P::T>& o;
    void dx(int64_t i, const typename P::T& v) { o.dx[i] = v; }
    void dw(int64_t i, const typename P::T& v) { o.dw[i] = v; }
  } sink{o};
  RmsSource src = RmsSource::of(d, q.n);
  rms_bwd_into(p, q, src, parallel, sink);
  return o;
}

}  // namespace kv
