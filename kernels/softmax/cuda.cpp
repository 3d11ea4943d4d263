// The CUDA softmax impls: configs, contracts, determinism claims, layouts, launches.
#include "kernels/softmax/cuda.hpp"

#include "core/impl_version.hpp"
#include "kernels/cuda_row_impl.hpp"
#include "kernels/softmax/cuda_launch.hpp"

namespace kv {

namespace {

// The default num_warps: small blocks (16 warps an SM either way), so the last wave of
// rows is small.
constexpr int kDefaultWarps = 4;

class CudaSoftmax : public CudaTeamImpl {
 public:
  explicit CudaSoftmax(bool bwd) : CudaTeamImpl(bwd ? "softmax.bwd" : "softmax.fwd", false, kDefaultWarps), bwd_(bwd) {}
  std::string version() const override { return impl_version("cuda_softmax"); }

  Contract contract(const Case& c, const DeviceProfile&) const override {
    // fp32 throughout; nvcc fuses dy*y into the sum (fma): the enclosure of the separate
    // roundings contains the fused result. Division is IEEE (__fdiv_rn). fwd calls expf
    // only: CUDA's documented maximum error, 2 ulp (Programming Guide, Mathematical
    // Functions); bwd calls no math function.
    Contract k;
    k.acc = DType::f32;
    k.fma = true;
    k.ftz = false;
    if (!bwd_) k.math_ulps = {{"exp", 2.0}};
    // A team of P = 32*wpr lanes per row (cuda_launch.hpp): row_reduction's shape with P.
    const int64_t n = c.shape.back();
    k.reductions["row"] = row_reduction(n, 32 * smcuda::wpr(n, row_dtype(c), bwd_, num_warps(c)), rowcuda::chunk_elems(row_dtype(c)));
    k.determinism[bwd_ ? "dx" : "y"] = rowwise_claims(c, bwd_ ? "dx" : "y");
    return k;
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile&) const override {
    const DType x = row_dtype(c);
    return team_thresholds(c, x, num_warps(c), smcuda::kept_chunks(x, bwd_, threads(c)),
                           smcuda::wpr(c.shape.back(), x, bwd_, num_warps(c)), 0);
  }

 protected:
  std::vector<std::pair<std::string, RowRole>> roles() const override {
    if (bwd_) return {{"dy", RowRole::rows}, {"y", RowRole::rows}, {"dx", RowRole::rows}};
    return {{"x", RowRole::rows}, {"y", RowRole::rows}};
  }
  KernelRef kernel_at(const Case& c, int threads) const override {
    const DType x = row_dtype(c);
    return {op() + "<" + std::string(dtype_name(x)) + ">", smcuda::kernel(x, bwd_, threads), 0};
  }
  void launch(DevSet& d, const Case& c, const DeviceProfile&) const override {
    const DType x = row_dtype(c);
    const int64_t n = c.shape.back(), rows = numel(c.shape) / n;
    const rowcuda::Mat none{nullptr, 0, 0, 0, 0};
    smcuda::Args a{bwd_ ? none : view(d, c, "x"), view(d, c, "y"), bwd_ ? view(d, c, "dy") : none,
                   bwd_ ? view(d, c, "dx") : none, rows, n, threads(c), smcuda::wpr(n, x, bwd_, num_warps(c)), 0};
    a.fast = n % rowcuda::chunk_elems(x) == 0 && a.y.vec && (bwd_ ? a.dy.vec && a.dx.vec : a.x.vec);
    smcuda::launch(x, bwd_, a, d.stream);
  }

 private:
  bool bwd_;
};

}  // namespace

void register_cuda_softmax(Registry& r) {
  r.add(std::make_unique<CudaSoftmax>(false));
  r.add(std::make_unique<CudaSoftmax>(true));
}

}  // namespace kv
