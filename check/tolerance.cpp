#include "check/tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace kv {

namespace {
// Binades of |v| from 2^kMinExp to 2^kMaxExp (every finite fp32/fp16/bf16 value lies inside),
// 8 bins each: the bin's smallest |v| is within 12.5% of any of its elements'.
constexpr int kMinExp = -160, kMaxExp = 140, kPerBinade = 8;
constexpr int kZero = 0, kBelow = 1, kFirst = 2;
constexpr int kAbove = kFirst + (kMaxExp - kMinExp) * kPerBinade;
constexpr int kCount = kAbove + 1;

int bin_of(double a) {
  if (a == 0) return kZero;
  uint64_t b;
  std::memcpy(&b, &a, 8);
  const int e = static_cast<int>((b >> 52) & 0x7FF) - 1023;
  if (e < kMinExp) return kBelow;
  if (e >= kMaxExp) return kAbove;
  return kFirst + (e - kMinExp) * kPerBinade + static_cast<int>((b >> 49) & 7);
}
}  // namespace

TolBuckets::TolBuckets() : bins_(kCount), used_(kCount, 0) {}

void TolBuckets::add(double abs_v, double err) {
  if (!std::isfinite(abs_v) || !std::isfinite(err)) return;
  const int k = bin_of(abs_v);
  TolPoint& p = bins_[k];
  if (!used_[k]) {
    used_[k] = 1, p = {abs_v, err};
    return;
  }
  p.v = std::min(p.v, abs_v), p.err = std::max(p.err, err);
}

void TolBuckets::merge(const TolBuckets& o) {
  for (int k = 0; k < kCount; ++k)
    if (o.used_[k]) {
      if (!used_[k]) used_[k] = 1, bins_[k] = o.bins_[k];
      else bins_[k].v = std::min(bins_[k].v, o.bins_[k].v), bins_[k].err = std::max(bins_[k].err, o.bins_[k].err);
    }
}

std::vector<TolPoint> TolBuckets::frontier() const {
  std::vector<TolPoint> pts;
  for (int k = 0; k < kCount; ++k)
    if (used_[k]) pts.push_back(bins_[k]);
  return tol_frontier(std::move(pts));
}

std::vector<TolPoint> tol_frontier(std::vector<TolPoint> pts) {
  pts.erase(std::remove_if(pts.begin(), pts.end(), [](const TolPoint& p) { return !(p.err > 0); }), pts.end());
  if (pts.empty()) return pts;
  // Smallest |v| first; at equal |v| only the largest error can bind.
  std::sort(pts.begin(), pts.end(), [](const TolPoint& a, const TolPoint& b) { return a.v < b.v || (a.v == b.v && a.err > b.err); });
  std::vector<TolPoint> hull;
  for (const TolPoint& p : pts) {
    if (!hull.empty() && hull.back().v == p.v) continue;
    if (!hull.empty() && p.err <= hull.back().err) continue;  // beyond the largest error so far: never binds
    // Upper hull: drop the last vertex while it lies on or below the segment to p.
    while (hull.size() >= 2) {
      const TolPoint &a = hull[hull.size() - 2], &b = hull.back();
      if ((b.err - a.err) * (p.v - a.v) <= (p.err - a.err) * (b.v - a.v)) hull.pop_back();
      else break;
    }
    hull.push_back(p);
  }
  return hull;
}

bool tol_covers(const std::vector<TolPoint>& pts, TolPair p) {
  for (const TolPoint& q : pts)
    if (!(q.err <= p.atol + p.rtol * q.v)) return false;
  return true;
}

double tol_share(const std::vector<TolPoint>& pts, TolPair p) {
  double share = 0;
  for (const TolPoint& q : pts) {
    if (q.err <= 0) continue;
    const double allowed = p.atol + p.rtol * q.v;
    share = std::max(share, allowed > 0 ? q.err / allowed : __builtin_inf());
  }
  return share;
}

TolPair smallest_pair(const std::vector<TolPoint>& pts, double atol_unit, double rtol_unit) {
  auto atol_at = [&](double r) {
    double a = 0;
    for (const TolPoint& q : pts) a = std::max(a, q.err - r * q.v);
    return a;
  };
  // The cost is convex and piecewise linear in rtol: its minimum is at rtol = 0, at a slope
  // between neighbouring frontier points, or where atol reaches zero.
  std::vector<double> cand{0.0};
  for (size_t i = 0; i + 1 < pts.size(); ++i)
    if (pts[i + 1].v > pts[i].v) cand.push_back((pts[i + 1].err - pts[i].err) / (pts[i + 1].v - pts[i].v));
  bool zero_v = false;
  double r_all = 0;
  for (const TolPoint& q : pts) {
    if (q.v > 0) r_all = std::max(r_all, q.err / q.v);
    else zero_v = true;
  }
  if (!zero_v) cand.push_back(r_all);
  TolPair best{atol_at(0), 0};
  double best_cost = best.atol / atol_unit;
  for (double r : cand) {
    if (!(r >= 0) || !std::isfinite(r)) continue;
    const double a = atol_at(r), cost = a / atol_unit + r / rtol_unit;
    if (cost < best_cost) best = {a, r}, best_cost = cost;
  }
  // Rounding in atol_at may leave a point a hair outside: widen atol by the last ulps.
  while (!tol_covers(pts, best)) best.atol = best.atol > 0 ? std::nextafter(best.atol * (1 + 0x1p-40), 1e308) : 1e-300;
  return best;
}

nlohmann::json tol_points_json(const std::vector<TolPoint>& pts) {
  nlohmann::json a = nlohmann::json::array();
  for (const TolPoint& p : pts) a.push_back({p.v, p.err});
  return a;
}

std::vector<TolPoint> tol_points_from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw std::runtime_error("tol_points is not an array");
  std::vector<TolPoint> pts;
  for (const auto& p : j) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      throw std::runtime_error("tol_points entry is not a pair of numbers: " + p.dump());
    pts.push_back({p[0].get<double>(), p[1].get<double>()});
  }
  return pts;
}

}  // namespace kv
