// Tolerance evidence for `torch.testing.assert_close`-style checks (|out - v| <= atol +
// rtol * |v|): per output, a few points (|v|, err) that bound the error of every element,
// and the smallest (atol, rtol) pair those points allow.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

namespace kv {

struct TolPoint {
  double v = 0;    // |reference|: the smallest of the elements the point stands for
  double err = 0;  // |out - reference|: the largest of them
};

/// Elements binned by |v| (8 bins per binade, one for |v| = 0 and one each for |v| below
/// and above the range): each bin keeps its smallest |v| and largest error, so a pair
/// (atol, rtol) that covers the bins' points covers every element added. Order-free.
class TolBuckets {
 public:
  TolBuckets();
  void add(double abs_v, double err);
  void merge(const TolBuckets& o);
  /// The bins' points that can bind a pair with rtol >= 0 (see tol_frontier).
  std::vector<TolPoint> frontier() const;

 private:
  std::vector<TolPoint> bins_;
  std::vector<char> used_;
};

/// The points that bind for some rtol >= 0: the upper convex hull of the points, from the
/// one of smallest |v| to the one of largest error. Any pair covering them covers all.
std::vector<TolPoint> tol_frontier(std::vector<TolPoint> pts);

struct TolPair {
  double atol = 0, rtol = 0;
};

/// Whether atol + rtol * v >= err at every point.
bool tol_covers(const std::vector<TolPoint>& pts, TolPair p);

/// The largest err / (atol + rtol * v) over the points: how much of a pair's allowance the
/// worst element takes (above 1: not covered). Over binned points (each bin's smallest |v|
/// with its largest error) an upper bound on the elements' share.
double tol_share(const std::vector<TolPoint>& pts, TolPair p);

/// The covering pair that minimizes atol / atol_unit + rtol / rtol_unit (the units are
/// PyTorch's defaults for the dtype, so neither term dominates by its scale alone).
TolPair smallest_pair(const std::vector<TolPoint>& pts, double atol_unit, double rtol_unit);

nlohmann::json tol_points_json(const std::vector<TolPoint>& pts);
/// Reads what tol_points_json wrote; throws std::runtime_error on anything else.
std::vector<TolPoint> tol_points_from_json(const nlohmann::json& j);

}  // namespace kv
