// The CUDA cross-entropy impls: configs (num_warps, block_v), contracts, determinism
// claims, layouts, launches.
#include "kernels/cross_entropy/cuda.hpp"

#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "kernels/cross_entropy/cuda_plan.hpp"
#include "kernels/cuda_row_impl.hpp"

namespace kv {

namespace {

class CudaCrossEntropy : public CudaRowImpl {
 public:
  explicit CudaCrossEntropy(bool bwd) : CudaRowImpl(bwd ? "cross_entropy.bwd" : "cross_entropy.fwd", false), bwd_(bwd) {}
  std::string version() const override { return impl_version("cuda_cross_entropy"); }
  std::vector<ConfigKnob> knobs() const override {
    // 32 warps by default: a block takes a whole row (block_v=row) and keeps what fits of
    // it in shared memory, one block per SM for the long rows of large vocabularies.
    return {{"num_warps", {"32", "1", "2", "4", "8", "16"}}, cecuda::block_v_knob()};
  }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    // fp32 throughout, every operation of the definition rounded where it rounds (the _rn
    // intrinsics: no fused multiply-add where the definition has two roundings; nvcc may
    // still fuse elsewhere, and a fused result lies inside the separate roundings'
    // enclosure). Division is IEEE. expf, logf and tanhf carry CUDA's documented maximum
    // errors (Programming Guide, Mathematical Functions: 2, 1 and 2 ulp).
    Contract k;
    k.acc = DType::f32;
    k.fma = true;
    k.ftz = false;
    k.math_ulps = {{"exp", 2.0}, {"log", 1.0}, {"tanh", 2.0}};
    const int64_t v = c.shape.back(), rows = v == 0 ? 0 : numel(c.shape) / v;
    k.reductions["row"] = cecuda::row_shape(cecuda::plan(c, v, row_dtype(c), p), v);
    k.reductions["rows"] = cecuda::rows_shape(rows);
    // Rows are independent of each other and of where the GPU runs them, except through
    // the sums over rows (the loss under mean/sum, the gradient's scale under mean), whose
    // fixed shape does not follow the GPU either: rowwise_claims leaves batch_invariant out.
    const std::string out = bwd_ ? "dlogits" : "loss";
    k.determinism[out] = rowwise_claims(c, out);
    return k;
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const override {
    std::vector<Threshold> t = {row_threshold(c, cecuda::row_thresholds(c, row_dtype(c), p),
                                              "16-byte chunks; a row (segment) kept whole in shared memory, staged and "
                                              "pipelined; one more block of a row's cluster")};
    // The sums over rows (the forward's loss total, the backward's weight sum under mean):
    // one block of kRowsThreads threads, one row each, then two.
    const std::string red = c.attr("reduction");
    if (bwd_ ? red == "mean" : red != "none")
      t.push_back(rows_threshold(c, {cecuda::kRowsThreads, 2 * cecuda::kRowsThreads},
                                 "the rows reduction's threads holding one row each, then two"));
    return t;
  }

  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile&) const override {
    const int64_t v = c.shape.back(), rows = v == 0 ? 0 : numel(c.shape) / v;
    std::vector<WorkspaceReq> w = {{"stats", 4 * sizeof(float), DType::f32}};
    if (!bwd_ && c.attr("reduction") != "none") w.push_back({"row_loss", static_cast<size_t>(rows) * sizeof(float), DType::f32});
    return w;
  }

  std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const override {
    if (auto why = layout_reason(c)) return why;
    const int64_t v = c.shape.back();
    const DType x = row_dtype(c);
    const cecuda::Plan pl = cecuda::plan(c, v, x, p);
    if (auto why = cecuda::plan_reason(pl, v, x, x, bwd_, false)) return why;
    if (auto why = CudaRowImpl::invalid_reason(c, p)) return why;
    if (auto why = check_block_size("cross_entropy_rows_reduce", cecuda::rows_kernel(), cecuda::kRowsThreads, 0, p,
                                    "the rows reduction's block"))
      return why;
    return cecuda::plan_reason(pl, v, x, x, bwd_, true);
  }

 protected:
  std::vector<std::pair<std::string, RowRole>> roles() const override {
    if (bwd_)
      return {{"logits", RowRole::rows},   {"dlogits", RowRole::rows}, {"target", RowRole::per_row},
              {"weight", RowRole::cols},   {"dloss", RowRole::per_row}};
    return {{"logits", RowRole::rows}, {"target", RowRole::per_row}, {"weight", RowRole::cols}, {"loss", RowRole::per_row}};
  }
  std::vector<KernelRef> kernels(const Case& c) const override {
    // The shared-memory cache is taken only where the profile holds it (plan): no
    // dynamic shared memory is required.
    const DType x = row_dtype(c);
    const std::string t = "<" + std::string(dtype_name(x)) + ">";
    return {{op() + t, cecuda::row_kernel(x, x, bwd_, false), 0}, {op() + "_piped" + t, cecuda::row_kernel(x, x, bwd_, true), 0}};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    if (c.shape.back() > (int64_t(1) << 24))
      return "V = " + std::to_string(c.shape.back()) + " > 2^24 is not exact in fp32 (the kernels divide by it)";
    return CudaRowImpl::layout_reason(c);
  }

  void launch(DevSet& d, const Case& c, const DeviceProfile& p) const override {
    const DType x = row_dtype(c);
    const int64_t v = c.shape.back(), rows = v == 0 ? 0 : numel(c.shape) / v;
    const cecuda::Plan pl = cecuda::plan(c, v, x, p);
    const cecuda::Params q = cecuda::params(c, v);
    const rowcuda::Mat none{nullptr, 0, 0, 0, 0};
    auto ws = [&](const char* n) { return static_cast<float*>(d.ws.at(n).first); };
    const rowcuda::Mat target = view(d, c, "target");
    const rowcuda::Mat weight = q.weighted ? view(d, c, "weight") : none;
    float* stats = ws("stats");
    cecuda::RowsArgs ra{q, static_cast<const int32_t*>(target.base), target.rs, weight, nullptr, none, stats, rows};
    cecuda::RowArgs a{q,    view(d, c, "logits"), none, ra.target, target.rs, weight, none, none, nullptr, stats, none,
                      rows, 0, pl.block_v, pl.ctas, pl.threads, pl.cache_bytes, pl.piped_bytes};
    if (bwd_) {
      a.dloss = view(d, c, "dloss");
      a.g = view(d, c, "dlogits");
      if (q.reduction == 1) cecuda::launch_rows_reduce(ra, d.stream);
      if (q.weighted && q.ls > 0.0f)
        cecuda::launch_wbar({weight, stats, v, pl.block_v, pl.chunk, pl.ctas, pl.threads}, d.stream);
      cecuda::launch_rows(x, x, true, a, d.stream);
      return;
    }
    a.loss = view(d, c, "loss");
    if (q.reduction != 0) a.row_loss = ws("row_loss");
    cecuda::launch_rows(x, x, false, a, d.stream);
    if (q.reduction != 0) {
      ra.row_loss = a.row_loss;
      ra.loss = a.loss;
      cecuda::launch_rows_reduce(ra, d.stream);
    }
  }

 private:
  bool bwd_;
};

}  // namespace

void register_cuda_cross_entropy(Registry& r) {
  r.add(std::make_unique<CudaCrossEntropy>(false));
  r.add(std::make_unique<CudaCrossEntropy>(true));
}

}  // namespace kv
