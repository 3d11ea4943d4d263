// The audit's probes (ops/audit_probe.hpp): the table of design §2 for the ops probed so
// far, rms_norm.bwd (row, rows), layer_norm.bwd (rows: dw and db), layer_norm.fwd (row,
// through the mean) and softmax.bwd (row) by masking; rms_norm.fwd and softmax.fwd (row) by
// positive triplets.
#include "ops/audit_probe.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "ops/rms_norm.hpp"

namespace kv {

namespace {

int64_t row_len(const Case& c) { return c.shape.empty() ? 1 : c.shape.back(); }
int64_t row_count(const Case& c) {
  const int64_t n = row_len(c);
  return n == 0 ? 0 : numel(c.shape) / n;
}
bool is_flce(const Case& c) { return c.op.rfind("fused_linear_cross_entropy", 0) == 0; }

/// The pattern's grid (rows, columns): the case's shape as rows x its last dim, or FLCE's
/// x (BT x H) and weight (V x H) from the shape BT x H x V.
std::pair<int64_t, int64_t> grid(const AxisProbe& p, const Case& c) {
  if (is_flce(c)) return {p.pattern == "x" ? c.shape.at(0) : c.shape.at(2), c.shape.at(1)};
  return {row_count(c), row_len(c)};
}

/// The inputs other than the pattern, each one value throughout (design §2): the sum's
/// terms reach the accumulator unchanged (x = 1, rstd = 1, w = 1 so W' = 1 ...).
std::map<std::string, double> fixed_values(const Case& c) {
  if (c.op == "rms_norm.bwd")  // W' = offset + w = 1 (reference/rms_norm.hpp rms_wprime)
    return {{"x", 1.0}, {"w", 1.0 - rms_params(c).offset}, {"rstd", 1.0}};
  if (c.op == "layer_norm.bwd")  // xhat = (x - mean) * rstd = 1 (reference/layer_norm.hpp)
    return {{"x", 1.0}, {"w", 1.0}, {"mean", 0.0}, {"rstd", 1.0}};
  if (c.op == "softmax.bwd") return {{"y", 1.0}};  // dx = y * (dy - t) (reference/softmax.hpp)
  if (c.op == "layer_norm.fwd") return {{"w", 1.0}, {"b", 0.0}};  // only mean is read
  if (c.op == "rms_norm.fwd") return {{"w", 1.0}};  // only rstd is read
  if (c.op.rfind("cross_entropy", 0) == 0) return {{"weight", 1.0}, {"dloss", 1.0}};  // target: per lane
  // FLCE backward: weight = 0 or x = 0, so the logits are 0 and dlogits[r, j] = g (1/V - [j = t_r]).
  if (is_flce(c)) return {{"weight", 0.0}, {"x", 0.0}, {"bias", 0.0}, {"dloss", 1.0}, {"target", double(c.shape.at(2) - 1)}};
  return {};
}

/// S = (the value read) * this: dx[r, z] = -fl(S / N) for rms_norm's row (c = rstd^3 S / N,
/// x_z = 1, m_z = 0), dx[r, z] = -S for softmax's, dw[j] = db[j] = S for column sums.
double read_scale(const AxisProbe& p, const Case& c) {
  if (is_flce(c))  // dweight[0, k], dx[z, k] = S g / V with g = dloss (/ BT under reduction mean)
    return static_cast<double>(c.shape.at(2)) * (c.attr("reduction") == "mean" ? static_cast<double>(c.shape.at(0)) : 1.0);
  if (p.over_rows) return 1.0;
  if (p.lane_out) return static_cast<double>(row_len(c));  // mean[r] = fl(S / N)
  if (p.indirect) return -static_cast<double>(row_len(c));
  return -1.0;
}

}  // namespace

int significand_bits(DType d) { return static_cast<int>(std::lround(-std::log2(unit_roundoff(d)))); }

ProbeScale probe_scale(DType in, DType acc, DType out, bool indirect, int64_t divisor) {
  const Format fi = format_of(in), fa = format_of(acc), fo = format_of(out);
  ProbeScale s;
  s.max_in = std::ldexp(1.0, std::min(fi.emax, 60));
  s.floor = indirect ? std::ldexp(1.0, std::max(fo.emin, fa.emin)) * static_cast<double>(std::max<int64_t>(divisor, 1))
                     : std::ldexp(1.0, fo.emin - fo.p + 1);
  for (int lb = indirect ? std::min(fa.p, fo.p) - 4 : std::min(fo.p, fa.p - 1); lb >= 1; --lb) {
    // ceil(log2(2^lb + 1)) = lb + 1: M = u0 2^(lb + 1 + p_acc + 2) <= max_in
    const int e = std::min(0, std::min(fi.emax, 60) - (lb + fa.p + 3));
    const double u0 = std::ldexp(1.0, e);
    if (u0 < s.floor || e < fi.emin - fi.p + 1) continue;
    s.u0 = u0, s.M = std::ldexp(u0, lb + fa.p + 3), s.B = int64_t(1) << lb;
    return s;
  }
  return s;
}

int64_t AxisProbe::length(const Case& c) const {
  if (loss_rows) return c.shape.at(0);
  return over_rows ? grid(*this, c).first : grid(*this, c).second;
}
int64_t AxisProbe::lanes(const Case& c) const {
  if (loss_rows) return 1;
  if (is_flce(c) && positive && pattern == "weight") return std::min(c.shape.at(0), c.shape.at(1));  // x[r] = e_r
  return over_rows ? grid(*this, c).second : grid(*this, c).first;
}

void AxisProbe::fill_fixed(TensorSet& ts, const Case& c) const {
  auto vals = fixed_values(c);
  for (auto& [name, v] : fixed) vals[name] = v;
  for (auto& s : ts.slots) {
    if (s.role != Role::input || s.desc.name == pattern) continue;
    auto it = vals.find(s.desc.name);
    const double v = it == vals.end() ? 0.0 : it->second;
    TensorView t = s.view();
    for (int64_t i = 0, e = t.desc.numel(); i < e; ++i) t.store(i, v);
  }
  if (hidden) {  // logits[r, 0] = x[r, :] . kHiddenWeight, the other logits 0
    TensorView w = ts.view("weight");
    for (int64_t k = 0; k < c.shape.at(1); ++k) w.store(k, kHiddenWeight);
  }
  if (is_flce(c) && positive && pattern == "weight") {  // x[r, :] = e_r: logits[r, j] = weight[j, r], exactly
    TensorView x = ts.view("x");
    for (int64_t r = 0, l = loss_rows ? std::min(c.shape.at(0), c.shape.at(1)) : lanes(c); r < l; ++r)
      x.store(r * c.shape.at(1) + r, 1.0);
  }
}

void AxisProbe::fill(TensorSet& ts, const Case& c, const std::vector<LaneTerms>& lanes) const {
  TensorView t = ts.view(pattern);
  for (int64_t i = 0, e = t.desc.numel(); i < e; ++i) t.store(i, zero_in);
  if (loss_rows) {  // row r's logits: logits[r, :] (cross_entropy) or weight[:, r] (FLCE, x[r] = e_r)
    const int64_t h = is_flce(c) ? c.shape.at(1) : 0, v = is_flce(c) ? c.shape.at(2) : c.shape.at(1);
    auto at = [&](int64_t r, int64_t j) { return is_flce(c) ? j * h + r : r * v + j; };
    for (int64_t r = 0; r < c.shape.at(0); ++r) t.store(at(r, 0), 0.0);  // target 0 alone: loss 0
    if (!lanes.empty())
      for (auto& [r, code] : lanes[0].terms) {
        if (code <= -100) t.store(at(r, 0), code), t.store(at(r, 1), 0.0);  // loss = -code
        else t.store(at(r, 1), code);                                        // loss = log(1 + e^code)
      }
    return;
  }
  const int64_t n = grid(*this, c).second;
  for (size_t l = 0; l < lanes.size(); ++l)
    for (auto& [pos, v] : lanes[l].terms) {
      const int64_t lane = static_cast<int64_t>(l);
      t.store(over_rows ? pos * n + lane : lane * n + pos, v);
    }
  if (is_flce(c) && pattern == "weight" && !positive) {  // rows whose targets are the lanes' zero slots (few distinct)
    std::vector<int64_t> zs;
    for (auto& l : lanes)
      if (l.zero_slot >= 0 && std::find(zs.begin(), zs.end(), l.zero_slot) == zs.end()) zs.push_back(l.zero_slot);
    TensorView g = ts.view("target");
    for (int64_t r = 0, e = g.desc.numel(); r < e; ++r)
      g.store(r, zs.empty() ? 0.0 : static_cast<double>(zs[static_cast<size_t>(std::min<int64_t>(r, static_cast<int64_t>(zs.size()) - 1))]));
  }
  if (!target.empty()) {
    TensorView g = ts.view(target);
    for (int64_t i = 0, e = g.desc.numel(); i < e; ++i)
      g.store(i, i < static_cast<int64_t>(lanes.size()) ? static_cast<double>(std::max<int64_t>(lanes[static_cast<size_t>(i)].zero_slot, 0)) : 0.0);
  }
}

double AxisProbe::read(const TensorSet& ts, const Case& c, int64_t lane, const LaneTerms& t) const {
  const TensorView o = ts.view(out);
  const int64_t cols = grid(*this, c).second;
  int64_t row = 0;
  if (is_flce(c) && pattern == "weight" && !positive) {  // dx[r, k] at the row whose target is the zero slot: the -g term drops
    const TensorView g = ts.view("target");
    for (row = 0; row < g.desc.numel() && g.get(row) != static_cast<double>(t.zero_slot); ++row) {
    }
    if (row == g.desc.numel()) return std::nan("");  // more distinct zero slots than rows
  }
  if (positive && over_rows && !lane_out) row = t.zero_slot;  // FLCE dweight[a, r]
  const double v = lane_out                            ? o.get(lane)
                   : is_flce(c) && pattern == "weight" ? o.get(row * cols + lane)
                   : over_rows                         ? o.get(lane)
                                                       : o.get(lane * cols + t.zero_slot);
  if (positive) return std::isfinite(v) ? v : std::nan("");
  return std::isfinite(v) ? v * read_scale(*this, c) / times : std::nan("");
}

std::vector<PositiveLeaves> positive_leaves(const AxisProbe& p, DType in, DType acc) {
  const int pa = significand_bits(acc);
  auto unit = [&](double M) { return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(M))) + 1 - pa); };
  auto inside = [](double t, double U, double lo, double hi) { return t > lo * U && t < hi * U; };
  std::vector<PositiveLeaves> out;
  if (p.op == "rms_norm.fwd") {
    // Terms x^2: x_a of a few bits so M = x_a^2 is exact; x_v, x_w on the input grid, squared exactly in fp32.
    for (double xa : {1.0, 1.5, 1.25, 1.75, 1.125, 1.375, 1.625, 1.875}) {
      const double M = xa * xa, U = unit(M);
      const double v = round_to(in, std::sqrt(0.375 * U)), w = round_to(in, std::sqrt(0.75 * U));
      if (round_to(in, xa) != xa || !inside(v * v, U, 0.27, 0.48) || !inside(w * w, U, 0.55, 0.95)) continue;
      out.push_back({xa, v, w, M, U});
    }
  } else if (p.hidden) {
    // Terms x * 29/8 with x on the input grid: M = 261/16 (a bf16 tie), U = 2^-19 in fp32. The
    // first set fits sums that round to nearest (v < U/2 absorbed, 2v > U/2 not); the second
    // tensor-core blocks that truncate (v < U absorbed, 2v >= U not): the calibration rows
    // tell which one the impl's sums read.
    const double M = 4.5 * kHiddenWeight, U = unit(M);
    for (auto [lo, hi, wl, wh] : {std::array<double, 4>{0.27, 0.48, 0.55, 0.95}, std::array<double, 4>{0.55, 0.95, 1.1, 1.9}}) {
      const double v = round_to(in, (lo + hi) / 2 * U / kHiddenWeight), w = round_to(in, (wl + wh) / 2 * U / kHiddenWeight);
      if (round_to(in, 4.5) == 4.5 && inside(v * kHiddenWeight, U, lo, hi) && inside(w * kHiddenWeight, U, wl, wh))
        out.push_back({4.5, v, w, M, U});
    }
  } else if (p.loss_rows) {
    // Losses: M = 1024 (target logit -1024 beside a 0), v and w = log(1 + e^d) for a logit d.
    const double M = 1024, U = unit(M);
    auto logit = [&](double loss) { return round_to(in, std::log(std::expm1(loss))); };
    const double v = logit(0.375 * U), w = logit(0.75 * U);
    if (inside(std::log1p(std::exp(v)), U, 0.27, 0.48) && inside(std::log1p(std::exp(w)), U, 0.55, 0.95))
      out.push_back({-M, v, w, M, U});
  } else if (p.op == "softmax.fwd" || p.op.rfind("cross_entropy", 0) == 0 || p.op.rfind("fused_linear", 0) == 0) {
    // Terms exp(x - 0): the exp's own error (a few ulps) leaves the margins below intact.
    const double U = unit(1.0);
    const double v = round_to(in, std::log(0.375 * U)), w = round_to(in, std::log(0.75 * U));
    if (inside(std::exp(v), U, 0.27, 0.48) && inside(std::exp(w), U, 0.55, 0.95)) out.push_back({0.0, v, w, 1.0, U});
  }
  return out;
}

std::string probe_unfit(const AxisProbe& p, const Case& c) {
  if (p.loss_rows) {
    if (c.attr("reduction") == "none") return "no batch sum under reduction none";
    if (is_flce(c) && c.shape.at(0) > c.shape.at(1)) return "BT > H: x[r, :] = e_r needs a hidden column per row";
    if (is_flce(c) && c.attr("bias") == "true") return "a bias moves the logits: audit without bias";
    for (const char* a : {"softcap", "label_smoothing", "z_loss"})
      if (c.attr_real(a) != 0) return std::string(a) + " changes the rows' losses: audit with " + a + " 0";
    return {};
  }
  if (is_flce(c) && p.positive) {
    if (p.lane_out && c.attr("reduction") != "none")
      return "the loss is one value per batch under reduction " + c.attr("reduction") + ": audit with --attrs reduction=none";
    for (const char* a : {"softcap", "label_smoothing"})
      if (c.attr_real(a) != 0) return std::string(a) + " changes the readout of the sum: audit with " + a + " 0";
    if (c.attr("bias") == "true") return "a bias moves the logits: audit without bias";
    return {};
  }
  if (is_flce(c)) {
    auto pow2 = [](int64_t n) { return n > 0 && (n & (n - 1)) == 0; };
    if (!pow2(c.shape.at(2))) return "V = " + std::to_string(c.shape.at(2)) + " is no power of two: g / V would round";
    if (c.attr("reduction") == "mean" && !pow2(c.shape.at(0)))
      return "BT = " + std::to_string(c.shape.at(0)) + " is no power of two: the mean's 1 / BT would round";
    for (const char* a : {"softcap", "label_smoothing", "z_loss"})
      if (c.attr_real(a) != 0) return std::string(a) + " moves dlogits off g (1/V - [j = t]): audit with " + a + " 0";
    return {};
  }
  if (p.op.rfind("cross_entropy", 0) != 0) return {};
  if (p.lane_out && c.attr("reduction") != "none")
    return "the loss is one value per batch under reduction " + c.attr("reduction") + ": audit with --attrs reduction=none";
  if (c.attr_real("softcap") != 0) return "softcap's tanh moves the zero terms (-1e4) off 0: audit with softcap 0";
  if (c.attr_real("label_smoothing") != 0) return "label smoothing adds a signed sum to the readout: audit with label_smoothing 0";
  return {};
}

namespace {

/// The probes of sums whose terms are all positive (triplets, run/audit_positive.cpp).
std::vector<AxisProbe> positive_probes(const std::string& op, const std::string& axis) {
  if (op == "rms_norm.fwd" && axis == "row") {
    AxisProbe p{op, axis, "rstd", "x[r, :] = triple (a, b, c), the rest 0, w = 1; rstd[r] = rsqrt(S / N + eps) against calibration rows",
                false, false, false, "x"};
    p.lane_out = true, p.positive = true;
    return {p};
  }
  if (op == "softmax.fwd" && axis == "row") {
    AxisProbe p{op, axis, "y", "x[r, :] = triple (a: x = 0, b, c), the rest -1e4 (exp gives 0); y[r, a] = 1 / S against calibration rows",
                false, false, false, "x"};
    p.positive = true, p.zero_in = -1e4;
    return {p};
  }
  if ((op == "cross_entropy.fwd" || op == "cross_entropy.bwd") && axis == "row") {
    const bool fwd = op == "cross_entropy.fwd";
    AxisProbe p{op, axis, fwd ? "loss" : "dlogits",
                std::string("logits[r, :] = triple (a: x = 0, b, c), the rest -1e4, target[r] = a; ") +
                    (fwd ? "loss[r] = log S (reduction none)" : "dlogits[r, a] = (1 / S - 1) dloss") +
                    " against calibration rows",
                false, false, false, "logits"};
    p.positive = true, p.zero_in = -1e4, p.target = "target", p.lane_out = fwd;
    return {p};
  }
  if ((op == "cross_entropy.fwd" || op == "fused_linear_cross_entropy.fwd") && axis == "rows") {
    AxisProbe p{op, axis, "loss",
                std::string("one lane: row r's loss is a term (M = 1024: target logit -1024 beside a 0; v: log(1 + e^d); 0: "
                            "the target alone), the rest -1e4") +
                    (op == "cross_entropy.fwd" ? "" : ", logits[r, :] = weight[:, r] through x[r, :] = e_r") +
                    "; loss = the batch sum (/ BT under mean) against calibration rows",
                false, false, false, op == "cross_entropy.fwd" ? "logits" : "weight"};
    p.positive = true, p.loss_rows = true, p.lane_out = true, p.zero_in = -1e4, p.fixed = {{"target", 0.0}};
    return {p};
  }
  if (op == "fused_linear_cross_entropy.fwd" && axis == "h") {
    AxisProbe p{op, axis, "loss",
                "x[r, :] = triple (a = 9/2, b, c), the rest 0, weight[0, :] = 29/8, the other rows 0, target 1: "
                "loss[r] ~ logits[r, 0] (reduction none; M = 261/16 sits on a bf16 tie) against calibration rows",
                false, false, false, "x"};
    p.positive = true, p.hidden = true, p.lane_out = true, p.fixed = {{"target", 1.0}};
    return {p};
  }
  if (op.rfind("fused_linear_cross_entropy", 0) == 0 && axis == "row") {
    const bool fwd = op == "fused_linear_cross_entropy.fwd";
    AxisProbe p{op, axis, fwd ? "loss" : "dweight",
                std::string("x[r, :] = e_r, weight[:, r] = triple (a: 0, b, c), the rest -1e4, so logits[r, :] = weight[:, r]; "
                            "target[r] = a; ") +
                    (fwd ? "loss[r] = log S (reduction none)" : "dweight[a, r] = (1 / S - 1) g") + " against calibration rows",
                true, false, false, "weight"};
    p.positive = true, p.zero_in = -1e4, p.target = "target", p.lane_out = fwd;
    return {p};
  }
  return {};
}

}  // namespace

std::vector<AxisProbe> axis_probes(const std::string& op, const std::string& axis) {
  const std::string cols = "x = 1, rstd = 1 (mean = 0), w = 1: the rows' terms are dy[:, j] as given";
  if (op == "rms_norm.bwd" && axis == "row")
    return {{op, axis, "dx", "dy[r, :] = pattern, x = 1, W' = 1, rstd = 1; dx[r, z] = -fl(S / N) at a zero slot",
             false, true, true, "dy"}};
  if (op == "rms_norm.bwd" && axis == "rows") return {{op, axis, "dw", cols + "; dw[j] = S", true, false, false, "dy"}};
  if (op == "layer_norm.bwd" && axis == "rows")
    return {{op, axis, "dw", cols + "; dw[j] = S", true, false, false, "dy"},
            {op, axis, "db", cols + "; db[j] = S", true, false, false, "dy"}};
  if (op == "layer_norm.bwd" && axis == "row") {
    // mean = 0, rstd = 1, w = 1: xhat = x, wdy = dy; dx[r, z] = -(xhat_z c1 + c2) at a zero slot.
    // x = 0: s1 = 0, the readout is -fl(S2 / N). x = 1: s1 and s2 both sum dy, the readout is
    // -fl(fl(S1 / N) + fl(S2 / N)), read as S once halved; sums in different trees make it
    // read off the grid or inconsistent, never a tree of their own.
    const std::string base = "dy[r, :] = pattern, mean = 0, rstd = 1, w = 1; ";
    return {{op, axis, "dx", base + "x = 0: dx[r, z] = -fl(S2 / N)", false, true, true, "dy", {{"x", 0.0}}, 1, "dx:s2"},
            {op, axis, "dx", base + "x = 1: dx[r, z] = -fl(fl(S1 / N) + fl(S2 / N))", false, true, true, "dy", {}, 2,
             "dx:s1+s2"}};
  }
  if (op == "layer_norm.fwd" && axis == "row")
    return {{op, axis, "mean",
             "x[r, :] = pattern, w = 1, b = 0; mean[r] = fl(S / N) (the mean's sum; the variance's sum of squares "
             "has positive terms only and is taken to share its shape)",
             false, false, true, "x", {}, 1, "", true}};
  if (auto p = positive_probes(op, axis); !p.empty()) return p;
  if (op == "fused_linear_cross_entropy.bwd" && axis == "rows")
    return {{op, axis, "dweight",
             "x[:, k] = pattern, weight = 0 (logits 0, p = 1/V), target = V - 1; dweight[0, k] = S g / V (g = dloss, / BT "
             "under mean)",
             true, false, false, "x"}};
  if (op == "fused_linear_cross_entropy.bwd" && axis == "v")
    return {{op, axis, "dx",
             "weight[:, k] = pattern, x = 0 (logits 0, p = 1/V); dx[r, k] = S g / V at a row whose target is the "
             "lane's zero slot (weight[t_r, k] = 0 drops the -g term)",
             true, true, false, "weight"}};
  if (op == "softmax.bwd" && axis == "row")
    return {{op, axis, "dx", "dy[r, :] = pattern, y = 1; dx[r, z] = -S at a zero slot", false, true, false, "dy"}};
  return {};
}

std::string unmeasurable_why(const std::string& op, const std::string& axis) {
  const std::string key = op + " " + axis;
  if (op == "cross_entropy.bwd" && axis == "rows")
    return "the backward sums no floats over rows: under mean it divides by the count of rows (exact without class "
           "weights); the forward's batch sum of the losses is audited on cross_entropy.fwd";
  if (op == "fused_linear_cross_entropy.fwd" && axis == "v")
    return "the forward computes no sum over the vocabulary but its sum of exp (row): v is the backward's dx = "
           "dlogits W (audit fused_linear_cross_entropy.bwd)";
  if (op.rfind("fused_linear_cross_entropy", 0) == 0)
    return op == "fused_linear_cross_entropy.bwd" && axis == "h"
               ? "the backward's logits are the forward's sum over h again: audited on fused_linear_cross_entropy.fwd "
                 "(reduction none)"
               : "no probe for this axis";
  return "no probe for this axis";
}

}  // namespace kv
