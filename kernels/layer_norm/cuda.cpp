// The CUDA LayerNorm impls: configs, contracts, determinism claims, layouts, launches.
#include "kernels/layer_norm/cuda.hpp"

#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "kernels/cuda_row_impl.hpp"
#include "kernels/layer_norm/cuda_launch.hpp"

namespace kv {

namespace {

// Default num_warps: fwd 4 (small blocks; at 1536 every num_warps up to 8 is within 8% of
// the best, and rows up to 4 warps x 32 lanes x 8 chunks stay in registers); bwd 16 (the
// fastest on an H100 at 32760x1536: reports/gpus/.../rows-speed2-7843d14).
class CudaLayerNorm : public CudaTeamImpl {
 public:
  explicit CudaLayerNorm(bool bwd) : CudaTeamImpl(bwd ? "layer_norm.bwd" : "layer_norm.fwd", bwd, bwd ? 16 : 4), bwd_(bwd) {}
  std::string version() const override { return impl_version("cuda_layer_norm"); }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    // fp32 throughout; nvcc fuses products into sums and into + b (fma): the enclosure of
    // the separate roundings contains the fused results. Division is IEEE (__fdiv_rn).
    // fwd calls rsqrtf only: CUDA's documented maximum error, 2 ulp (Programming Guide,
    // Mathematical Functions; calibrate-math measures it); bwd takes rstd as given.
    Contract k;
    k.acc = DType::f32;
    k.fma = true;
    k.ftz = false;
    if (!bwd_) k.math_ulps = {{"rsqrt", 2.0}};
    // A team of P = 32*wpr lanes per row (cuda_launch.hpp): row_reduction's shape with P;
    // in the backward each team is a dW/dB program.
    const int64_t n = c.shape.back();
    k.reductions["row"] = row_reduction(n, 32 * wpr(c), rowcuda::chunk_elems(row_dtype(c)));
    if (bwd_) {
      k.reductions["rows"] = dw_rows_reduction(numel(c.shape) / n, programs(c, p), dw_strategy(c));
      k.determinism["dx"] = rowwise_claims(c, "dx");
      k.determinism["dw"] = k.determinism["db"] = dw_claims(c);
    } else {
      for (const char* t : {"y", "mean", "rstd"}) k.determinism[t] = rowwise_claims(c, t);
    }
    return k;
  }

  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile& p) const override {
    if (!bwd_) return {};
    return dw_workspaces({"dw", "db"}, programs(c, p), c.shape.back());
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const override {
    const DType x = row_dtype(c);
    const int cap = bwd_ ? lncuda::bwd_chunks(threads(c)) : lncuda::fwd_chunks(x, threads(c));
    return team_thresholds(c, x, num_warps(c), cap, wpr(c), bwd_ ? programs(c, p) : 0);
  }

 protected:
  std::vector<std::pair<std::string, RowRole>> roles() const override {
    if (bwd_)
      return {{"dy", RowRole::rows},      {"x", RowRole::rows},       {"dx", RowRole::rows}, {"w", RowRole::cols},
              {"dw", RowRole::cols},      {"db", RowRole::cols},      {"mean", RowRole::per_row},
              {"rstd", RowRole::per_row}};
    return {{"x", RowRole::rows},       {"y", RowRole::rows},       {"w", RowRole::cols}, {"b", RowRole::cols},
            {"mean", RowRole::per_row}, {"rstd", RowRole::per_row}};
  }
  KernelRef kernel_at(const Case& c, int threads) const override {
    const DType x = row_dtype(c);
    const std::string t = "<" + std::string(dtype_name(x)) + ">";
    if (bwd_) return {"layer_norm_bwd" + t, lncuda::bwd_kernel(x, threads), 0};
    return {"layer_norm_fwd" + t, lncuda::fwd_kernel(x, threads), 0};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    // The kernels divide by N in fp32, where the definition's N is exact.
    if (c.shape.back() > (int64_t(1) << 24))
      return "N = " + std::to_string(c.shape.back()) + " > 2^24 is not exact in fp32 (the kernels divide by it)";
    return CudaRowImpl::layout_reason(c);
  }

  void launch(DevSet& d, const Case& c, const DeviceProfile& p) const override {
    const DType x = row_dtype(c);
    const int64_t n = c.shape.back(), rows = numel(c.shape) / n;
    const bool whole = n % rowcuda::chunk_elems(x) == 0;
    auto v = [&](const char* t) { return view(d, c, t); };
    if (!bwd_) {
      lncuda::FwdArgs a{v("x"), v("w"), v("b"), v("y"), v("mean"), v("rstd"), rows, n,
                        static_cast<float>(round_to(DType::f32, c.attr_real("eps"))), threads(c), wpr(c), 0};
      a.fast = whole && a.x.vec && a.y.vec && a.w.vec && a.b.vec;
      lncuda::launch_fwd(x, a, d.stream);
      return;
    }
    auto ws = [&](const char* name) { return static_cast<float*>(d.ws.at(name).first); };
    lncuda::BwdArgs a{v("dy"), v("x"), v("w"), v("mean"), v("rstd"), v("dx"), v("dw"), v("db"), rows, n, threads(c),
                      wpr(c), dw_strategy(c), programs(c, p), ws("dw_partials"), ws("db_partials"), ws("dw_acc"),
                      ws("db_acc"), 0};
    a.fast = whole && a.dy.vec && a.x.vec && a.dx.vec && a.w.vec;
    lncuda::launch_bwd(x, a, d.stream);
  }

 private:
  /// Warps per row (a team), as the kernels choose it.
  int wpr(const Case& c) const {
    const int64_t n = c.shape.back();
    return bwd_ ? lncuda::bwd_wpr(n, row_dtype(c), num_warps(c)) : lncuda::fwd_wpr(n, row_dtype(c), num_warps(c));
  }
  /// dW/dB programs: the blocks (dw_partials: the SM count or 64) times the teams in each.
  int64_t programs(const Case& c, const DeviceProfile& p) const { return dw_partials(c, p) * (num_warps(c) / wpr(c)); }

  bool bwd_;
};

}  // namespace

void register_cuda_layer_norm(Registry& r) {
  r.add(std::make_unique<CudaLayerNorm>(false));
  r.add(std::make_unique<CudaLayerNorm>(true));
}

}  // namespace kv
