// The host RMSNorm (ops/rms_norm_host.hpp): its knobs, contract and passes.
#include "ops/rms_norm_host.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/mutant.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "ops/row_op.hpp"

namespace kv {

namespace {

int64_t lanes_of(const Case& c) { return 32 * c.config_int("num_warps", 4); }

/// dW programs: each sums a contiguous run of rows into its own fp32 partial.
int64_t partials(const Case& c, const DeviceProfile& p) {
  const std::string s = c.config_or("dw", "fixed_partials");
  if (s == "serial") return 1;
  if (s == "per_sm") return std::max<int64_t>(1, p.sm_count);
  return 64;
}

bool ascending(const Case& c) { return c.config_or("order", "asc") == "asc"; }

/// The order in which lanes take a row's elements (lane l the positions l, l + lanes, ...)
/// or dW's programs take the rows: the `order` knob, a shuffle keyed by seed and salt.
std::vector<int64_t> order(const Case& c, int64_t n, uint64_t salt) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  const std::string o = c.config_or("order", "asc");
  if (o == "desc") std::reverse(idx.begin(), idx.end());
  if (o == "shuffle") {
    std::mt19937_64 g(c.seed * 0x9E3779B97F4A7C15ull + salt);
    std::shuffle(idx.begin(), idx.end(), g);
  }
  return idx;
}

/// A row's values in the order idx gives (the row itself where idx is empty).
const double* in_order(const double* row, const std::vector<int64_t>& idx, std::vector<double>& buf) {
  if (idx.empty()) return row;
  buf.resize(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) buf[k] = row[idx[k]];
  return buf.data();
}

}  // namespace

std::vector<ConfigKnob> rms_host_knobs(bool bwd) {
  std::vector<ConfigKnob> k = {{"num_warps", {"4", "1", "2", "8", "16", "32"}}, {"order", {"asc", "desc", "shuffle"}}};
  if (bwd) k.push_back({"dw", {"fixed_partials", "per_sm", "serial"}});
  return k;
}

Contract rms_host_contract(const Case& c, const DeviceProfile& p, bool bwd) {
  // 1/sqrtf in float: sqrt then a division, each RN: 1.5 fp32 ulp at most; the 2 of the
  // shared contract also covers directed rounding. No FMA (-ffp-contract=off).
  const int64_t n = c.shape.back(), lanes = lanes_of(c);
  const bool per_sm = c.config_or("dw", "fixed_partials") == "per_sm";
  return rms_norm_contract(c, bwd, {ceil_div(n, lanes), log2_ceil(std::min(lanes, n)), 0, std::nullopt},
                           bwd ? partials(c, p) : 1,
                           per_sm ? DeterminismClaims{"run_to_run"} : DeterminismClaims{"run_to_run", "gpu_invariant"});
}

std::vector<WorkspaceReq> rms_host_workspaces(const Case& c, const DeviceProfile& p, bool bwd) {
  if (!bwd) return {};
  return {{"dw_partials", static_cast<size_t>(partials(c, p) * c.shape.back()) * sizeof(float), DType::f32}};
}

std::vector<Threshold> rms_host_thresholds(const Case& c, const DeviceProfile& p, bool bwd) {
  // A row sums over 32 * num_warps lanes; the backward's dW gives each of its partials a
  // contiguous run of ceil(rows / partials) rows: one row each at rows = partials.
  const int64_t lanes = lanes_of(c);
  std::vector<Threshold> t = {
      row_threshold(c, {lanes, 2 * lanes}, std::to_string(lanes) + " lanes holding one term each, then two")};
  if (bwd && partials(c, p) > 1)
    t.push_back(
        rows_threshold(c, {partials(c, p), 2 * partials(c, p)},
                       "dW partials (" + c.config_or("dw", "fixed_partials") + ") holding one row each, then two"));
  return t;
}

HostPolicy rms_host_policy(const Case& c) {
  HostPolicy p;
  p.lanes = lanes_of(c);
  p.acc_dt = rms_params(c).compute();
  p.tree = HostPolicy::Tree::shfl_down;
  p.rsqrt_two_roundings = true;
  return p;
}

RmsParams rms_host_params(const Case& c) {
  RmsParams q = rms_params(c);
  q.offset = static_cast<float>(q.offset);
  return q;
}

void rms_host_fwd(const Case& c, const OpInputs& in, const HostPolicy& p, const HostSink& sink, const HostRun& run) {
  const RmsParams q = rms_host_params(c);
  const int64_t n = q.n;
  // The shuffle is keyed by the row's index in the whole case (HostImpl::run may pass a block).
  const int64_t row0 = c.shape.size() < 2 || c.shape[0] == 0 ? 0 : run.dim0_begin * (q.rows / c.shape[0]);
  const double* x = in["x"].data();
  const std::vector<double> w = rms_wprime(p, q, in["w"].data());
  par_rows(q.rows, true, [&](int64_t r) {
    const std::vector<int64_t> idx =
        ascending(c) ? std::vector<int64_t>{} : order(c, n, static_cast<uint64_t>(row0 + r));
    std::vector<double> xb, wb, y(static_cast<size_t>(n));
    const double *xr = in_order(x + r * n, idx, xb), *wr = in_order(w.data(), idx, wb);
    const double rstd = rms_rstd_row(p, q, xr);
    sink(1, r, rstd);
    rms_fwd_scale(p, q, xr, wr, rstd, y.data());
    for (int64_t k = 0; k < n; ++k) sink(0, r * n + (idx.empty() ? k : idx[k]), y[k]);
  });
}

void rms_host_bwd(const Case& c, const OpInputs& in, const HostPolicy& p, const HostSink& sink, const HostRun& run) {
  const RmsParams q = rms_host_params(c);
  const int64_t n = q.n, rows = q.rows, parts = partials(c, run.profile);
  const int64_t per_part = ceil_div(std::max<int64_t>(rows, 1), parts);
  float* part = reinterpret_cast<float*>(run.ts.workspaces.at("dw_partials")->payload());
  std::fill(part, part + parts * n, 0.0f);
  const double *x = in["x"].data(), *dy = in["dy"].data(), *rstd = in["rstd"].data();
  const std::vector<double> w = rms_wprime(p, q, in["w"].data());
  // Program k sums the rows at positions [k * per_part, (k + 1) * per_part) of row_order
  // into its own partial, in that order; programs are independent.
  const std::vector<int64_t> row_order = order(c, rows, 0x5157);
  par_rows(parts, true, [&](int64_t k) {
    float* pp = part + k * n;
    std::vector<double> xb, dyb, wb, dx(static_cast<size_t>(n));
    for (int64_t pos = k * per_part; pos < std::min(rows, (k + 1) * per_part); ++pos) {
      const int64_t r = row_order[pos];
      const std::vector<int64_t> idx = ascending(c) ? std::vector<int64_t>{} : order(c, n, static_cast<uint64_t>(r));
      auto col = [&](int64_t j) { return idx.empty() ? j : idx[j]; };
      rms_bwd_row(p, q, in_order(dy + r * n, idx, dyb), in_order(x + r * n, idx, xb), in_order(w.data(), idx, wb),
                  rstd[r], dx.data(), [&](int64_t j, double t) { pp[col(j)] = pp[col(j)] + static_cast<float>(t); });
      for (int64_t j = 0; j < n; ++j) sink(0, r * n + col(j), dx[j]);
    }
  });
  // Second stage: the partials summed serially in order. (Mutants: the last partial left
  // out; an order that changes from run to run, as atomics would give.)
  const int64_t rot = KV_MUTANT(rms_h_dw_run_order) ? static_cast<int64_t>(std::random_device{}() % parts) : 0;
  for (int64_t j = 0; j < n; ++j) {
    float s = 0.0f;
    for (int64_t k = 0; k < parts - KV_MUTANT(rms_h_dw_last_partial); ++k)
      s = s + part[(KV_MUTANT(rms_h_dw_run_order) ? (k + rot) % parts : k) * n + j];
    sink(1, j, s);
  }
}

}  // namespace kv
