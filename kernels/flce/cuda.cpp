// The CUDA fused-linear-cross-entropy impls: the matrix products through cuBLAS, chunked
// over rows so the BT x V logits never exist whole, with the CUDA cross-entropy kernel in
// between. Per chunk of rows: logits = x W^T in fp32; CE writes the loss or the gradient G
// (in x's dtype: grad_rounding=x_dtype); dx = G W (fp32, then rounded into dx); dW += G^T x
// into an fp32 (or bf16: dw_acc) accumulator; db += G's column sums. The accumulators are
// rounded into dweight and dbias at the end, after the last product read W and b, so the
// gradients may be written over their inputs.
#include "kernels/flce/cuda.hpp"

#include <algorithm>

#include "device/cuda_check.hpp"
#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "kernels/cross_entropy/cuda_plan.hpp"
#include "kernels/cuda_impl.hpp"
#include "kernels/cuda_row_impl.hpp"
#include "kernels/flce/cuda_gemm.hpp"
#include "kernels/flce/cuda_launch.hpp"
#include "kernels/rms_norm/contract.hpp"

namespace kv {

namespace {

using rowcuda::Mat;

int64_t round_up(int64_t n, int64_t m) { return ceil_div(n, m) * m; }

/// Sizes of a case and its config.
struct Geom {
  int64_t bt, h, v;
  int64_t chunk;     // rows per chunk (at least 1)
  int64_t nch;       // chunks
  int64_t ldl, ldg;  // leading dimensions of the logits (fp32) and G buffers: 16-byte rows
  DType x, g;        // operands' dtype; G's dtype (x's for 16-bit operands)
  DType dw;          // dW's accumulator
  bool bias;
};

Geom geom(const Case& c) {
  Geom g;
  g.bt = c.shape[0], g.h = c.shape[1], g.v = c.shape[2];
  g.chunk = std::max<int64_t>(1, std::min<int64_t>(c.config_int("chunk", 1024), g.bt));
  g.nch = ceil_div(g.bt, g.chunk);
  g.x = c.dtypes.at("x");
  g.g = g.x;
  g.dw = c.config_or("dw_acc", "fp32") == "bf16" ? DType::bf16 : DType::f32;
  g.ldl = round_up(g.v, 4);
  g.ldg = round_up(g.v, 8);
  g.bias = c.attr("bias") == "true";
  return g;
}

/// A tensor as rows x cols (2-D) or a vector (1-D: rs = cs = its stride), its dtype's code.
Mat mat(const DevView& v) {
  const auto st = v.desc.effective_strides();
  const int64_t esz = static_cast<int64_t>(dtype_size(v.desc.dtype));
  auto* base = static_cast<uint8_t*>(v.base) + v.desc.offset * esz;
  const int64_t cs = st.empty() ? 1 : st.back();
  const int64_t rs = st.size() == 2 ? st[0] : cs;
  const int64_t unit = 4 * esz;  // the copy kernel's four values
  const bool vec = st.size() == 2 && cs == 1 && reinterpret_cast<uintptr_t>(base) % unit == 0 && (rs * esz) % unit == 0;
  return Mat{base, rowcuda::dt_code(v.desc.dtype), vec ? 1 : 0, rs, cs};
}

/// A cuBLAS operand from a row-major tensor (rows x cols, unit column stride).
flcecuda::Operand operand(const Mat& m, DType t, int64_t rows, int64_t cols, int64_t row0, bool trans) {
  const int64_t ld = rows == 1 ? cols : m.rs;
  return {static_cast<const uint8_t*>(m.base) + row0 * ld * static_cast<int64_t>(dtype_size(t)), t, ld, trans};
}

class CudaFlce : public CudaImpl {
 public:
  explicit CudaFlce(bool bwd) : bwd_(bwd) {}
  std::string op() const override { return bwd_ ? "fused_linear_cross_entropy.bwd" : "fused_linear_cross_entropy.fwd"; }
  std::string name() const override { return "cuda"; }
  std::string version() const override { return impl_version("cuda_flce"); }
  std::vector<ConfigKnob> knobs() const override {
    // 16 warps by default: the CE step's blocks (block_v=row) keep what fits of a row of
    // fp32 logits in shared memory, one block per SM, so more threads share a row's work.
    std::vector<ConfigKnob> k = {{"num_warps", {"16", "1", "2", "4", "8", "32"}},
                                 cecuda::block_v_knob(),
                                 {"chunk", {"1024", "256", "512", "2048", "4096"}}};
    if (bwd_) k.push_back({"dw_acc", {"fp32", "bf16"}});
    return k;
  }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    // The CE step as the cross_entropy impls declare it (fp32, _rn operations, expf 2 ulp,
    // logf 1, tanhf 2). The products: bf16/fp16 operands multiply exactly into fp32 sums
    // that kverify calibrate-mma measured on an H100 (reports/gpus/.../tensor-core): blocked
    // sums rounded to nearest with alignment losses inside a 32-product block, within
    // gamma_{K+64}(2^-23) sum|a b| ("any order, each rounding by truncation or nearest, up
    // to 64 alignment losses"); as the contract's unit is fp32's 2^-24, an axis of K such
    // products declares 2K + 128 steps (gamma_{2n}(2^-24) = gamma_n(2^-23)). fp32 operands
    // sum in IEEE fp32 in an order cuBLAS does not state: K steps cover any order. The
    // tensor cores' handling of subnormal sums was not probed: ftz is declared.
    const Geom g = geom(c);
    const bool tc = g.x != DType::f32;
    Contract k;
    k.acc = DType::f32;
    k.fma = true;
    k.ftz = true;
    k.math_ulps = {{"exp", 2.0}, {"log", 1.0}, {"tanh", 2.0}};
    auto products = [&](int64_t n) { return tc ? ReductionShape{2 * n, 128, 0, std::nullopt} : ReductionShape{n, 0, 0, std::nullopt}; };
    k.reductions["h"] = products(g.h);
    k.reductions["v"] = products(g.v);
    k.reductions["row"] = cecuda::row_shape(cecuda::plan(c, g.v, DType::f32, p), g.v);
    ReductionShape rows = cecuda::rows_shape(g.bt);  // the loss total and the weight sum
    if (bwd_) {
      // dW: a product over each chunk's rows, added to the accumulator in the product's
      // epilogue (beta = 1: one more rounding per chunk, by truncation or nearest); db:
      // each chunk's rows summed serially, then added to its fp32 sum.
      ReductionShape dw = tc ? ReductionShape{2 * g.chunk, 128, 2 * g.nch, std::nullopt}
                             : ReductionShape{g.chunk, 0, g.nch, std::nullopt};
      ReductionShape db{g.chunk, 0, g.nch, std::nullopt};
      for (const ReductionShape& s : {dw, db})
        if (s.n_eff() > rows.n_eff()) rows = s;
      if (g.dw == DType::bf16) {
        // Each chunk's sum is rounded to bf16 as it joins the accumulator (2 steps of
        // 2^-8 each: truncation or nearest); the fp32 steps above count 2^-16 of a bf16
        // step each (Higham, Lemma 3.3: (1 + gamma_a(u1))(1 + gamma_b(u2)) <= 1 +
        // gamma_{a'+b}(u2) where a u1 <= a' u2).
        rows = ReductionShape{ceil_div(rows.n_eff(), int64_t(1) << 16), 0, 2 * g.nch, DType::bf16};
      }
    }
    k.reductions["rows"] = rows;
    // cuBLAS picks its algorithms per GPU and shape: the same bits run to run only.
    std::vector<const char*> outs = {"loss"};
    if (bwd_) outs = g.bias ? std::vector<const char*>{"dx", "dweight", "dbias"} : std::vector<const char*>{"dx", "dweight"};
    for (const char* t : outs) k.determinism[t] = {"run_to_run"};
    return k;
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile& p) const override {
    const Geom g = geom(c);
    const int64_t chunk = c.config_int("chunk", 1024);
    // V: the CE step's plan over fp32 logits, and the logits' and G's rows padded to 4 and
    // 8 elements; H: rows of x and W in whole 16 bytes (cuBLAS's aligned paths); BT: the
    // chunks of rows, and the sums over rows (one block of kRowsThreads).
    std::vector<int64_t> v = cecuda::row_thresholds(c, DType::f32, p);
    v.push_back(8);
    std::vector<Threshold> t = {{0, 1, {chunk, 2 * chunk}, "chunks of rows: one, then two", true},
                                {1, 2, {16 / static_cast<int64_t>(dtype_size(g.x))}, "16-byte rows of x and W"},
                                {2, 3, v, "the CE step's plan over V; padded logits and G rows"}};
    const std::string red = c.attr("reduction");
    if (bwd_ ? red == "mean" : red != "none")
      t.push_back({0, 1, {cecuda::kRowsThreads}, "the rows reduction's threads holding one row each", true});
    return t;
  }

  std::vector<WorkspaceReq> workspaces(const Case& c, const DeviceProfile&) const override {
    const Geom g = geom(c);
    const size_t n = static_cast<size_t>(std::min(g.chunk, g.bt));
    std::vector<WorkspaceReq> w = {{"stats", 4 * sizeof(float), DType::f32},
                                   {"cublas", flcecuda::kGemmWorkspace, DType::f32},
                                   {"logits", n * static_cast<size_t>(g.ldl) * 4, DType::f32}};
    if (!bwd_) {
      if (c.attr("reduction") != "none") w.push_back({"row_loss", static_cast<size_t>(g.bt) * 4, DType::f32});
      return w;
    }
    w.push_back({"grad", n * static_cast<size_t>(g.ldg) * dtype_size(g.g), g.g});
    w.push_back({"dx_acc", n * static_cast<size_t>(g.h) * 4, DType::f32});
    w.push_back({"dw_acc", static_cast<size_t>(g.v * g.h) * dtype_size(g.dw), g.dw});
    if (g.bias) w.push_back({"db_acc", static_cast<size_t>(g.v) * 4, DType::f32});
    return w;
  }

  std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const override {
    if (auto why = layout_reason(c)) return why;
    const Geom g = geom(c);
    const cecuda::Plan pl = cecuda::plan(c, g.v, DType::f32, p);
    if (auto why = cecuda::plan_reason(pl, g.v, DType::f32, g.g, bwd_, false)) return why;
    if (auto why = CudaImpl::invalid_reason(c, p)) return why;
    if (auto why = check_block_size("cross_entropy_rows_reduce", cecuda::rows_kernel(), cecuda::kRowsThreads, 0, p,
                                    "the rows reduction's block"))
      return why;
    return cecuda::plan_reason(pl, g.v, DType::f32, g.g, bwd_, true);
  }

 protected:
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override {
    return c.config_int("num_warps", 16) * p.warp_size;
  }
  std::vector<KernelRef> kernels(const Case& c) const override {
    const Geom g = geom(c);
    const std::string t = "<fp32," + std::string(dtype_name(g.g)) + ">";
    return {{"flce_cross_entropy" + t, cecuda::row_kernel(DType::f32, g.g, bwd_, false), 0},
            {"flce_cross_entropy_piped" + t, cecuda::row_kernel(DType::f32, g.g, bwd_, true), 0}};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    const Geom g = geom(c);
    if (g.x == DType::i32 || c.dtypes.at("weight") != g.x)
      return "x and weight must share one of fp32, fp16, bf16 (the products take one operand dtype)";
    if (bwd_ && g.x != DType::f32 && c.attr("grad_rounding") != "x_dtype")
      return "the products take the logits' gradient in x's dtype (" + std::string(dtype_name(g.x)) +
             " tensor-core operands): this impl computes grad_rounding=x_dtype, not fp32 (fp32 inputs take either)";
    if (g.dw == DType::bf16 && g.x != DType::bf16)
      return "dw_acc=bf16 accumulates through bf16 x bf16 -> bf16 products: bf16 inputs only";
    for (auto& [out, in] : c.alias)
      if (!((out == "dx" && in == "x") || (out == "dweight" && in == "weight") || (out == "dbias" && in == "bias")))
        return "output " + out + " cannot be written over " + in + ": only dx over x, dweight over weight, dbias over bias";
    for (const char* t : {"x", "weight"}) {
      auto l = c.layout.find(t);
      if (l == c.layout.end()) continue;
      const int64_t rows = std::string(t) == "x" ? g.bt : g.v, esz = static_cast<int64_t>(dtype_size(g.x));
      const auto& st = l->second.strides;
      const bool unit_cols = st.empty() || st[1] == 1;
      const bool aligned = (l->second.offset * esz) % 16 == 0 && (st.empty() || rows == 1 || (st[0] * esz) % 16 == 0);
      if (!unit_cols || !aligned)
        return std::string("layout of ") + t +
               ": the products take rows of unit column stride whose start and row stride are 16-byte aligned";
    }
    return std::nullopt;
  }

  void launch(DevSet& d, const Case& c, const DeviceProfile& p) const override {
    const Geom g = geom(c);
    const cecuda::Plan pl = cecuda::plan(c, g.v, DType::f32, p);
    const cecuda::Params q = cecuda::params(c, g.v);
    const Mat none{nullptr, 0, 0, 0, 0};
    auto t = [&](const char* n) { return mat(d.t.at(n)); };
    auto ws = [&](const char* n) { return d.ws.at(n).first; };
    const Mat x = t("x"), w = t("weight"), target = t("target");
    float* stats = static_cast<float*>(ws("stats"));
    void* cublas_ws = ws("cublas");
    const size_t cublas_bytes = d.ws.at("cublas").second;
    const cecuda::RowsArgs ra{q, static_cast<const int32_t*>(target.base), target.rs, none, nullptr, none, stats, g.bt};
    cecuda::RowArgs a{q,    Mat{ws("logits"), rowcuda::dt_code(DType::f32), 1, g.ldl, 1}, g.bias ? t("bias") : none, ra.target,
                      target.rs, none, none, none, nullptr, stats, none, 0, 0, pl.block_v, pl.ctas, pl.threads,
                      pl.cache_bytes, pl.piped_bytes};
    if (bwd_) {
      a.dloss = t("dloss");
      a.g = Mat{ws("grad"), rowcuda::dt_code(g.g), 1, g.ldg, 1};
      if (q.reduction == 1) cecuda::launch_rows_reduce(ra, d.stream);
    } else {
      a.loss = t("loss");
      if (q.reduction != 0) a.row_loss = static_cast<float*>(ws("row_loss"));
    }
    for (int64_t r0 = 0; r0 < g.bt; r0 += g.chunk) {
      const int64_t n = std::min(g.chunk, g.bt - r0);
      // logits (V x n, column-major) = W x_c^T
      flcecuda::gemm(d.stream, cublas_ws, cublas_bytes, g.v, n, g.h, operand(w, g.x, g.v, g.h, 0, true),
                     operand(x, g.x, g.bt, g.h, r0, false), 0.0f, a.x.base, DType::f32, g.ldl);
      a.rows = n, a.row0 = r0;
      cecuda::launch_rows(DType::f32, g.g, bwd_, a, d.stream);
      if (!bwd_) continue;
      const flcecuda::Operand gm{a.g.base, g.g, g.ldg, false};
      // dx_c (H x n) = W^T G^T; dW (H x V) += x_c^T G
      flcecuda::gemm(d.stream, cublas_ws, cublas_bytes, g.h, n, g.v, operand(w, g.x, g.v, g.h, 0, false), gm, 0.0f,
                     ws("dx_acc"), DType::f32, g.h);
      flcecuda::Operand gt = gm;
      gt.trans = true;
      flcecuda::gemm(d.stream, cublas_ws, cublas_bytes, g.h, g.v, n, operand(x, g.x, g.bt, g.h, r0, false), gt,
                     r0 > 0 ? 1.0f : 0.0f, ws("dw_acc"), g.dw, g.h);
      if (g.bias)
        flcecuda::launch_colsum({a.g.base, a.g.dtype, g.ldg, static_cast<float*>(ws("db_acc")), n, g.v, r0 == 0}, d.stream);
      Mat dx = t("dx");
      dx.base = static_cast<uint8_t*>(dx.base) + r0 * dx.rs * static_cast<int64_t>(dtype_size(c.dtypes.at("dx")));
      flcecuda::launch_copy({ws("dx_acc"), rowcuda::dt_code(DType::f32), g.h, dx, n, g.h}, d.stream);
    }
    if (!bwd_) {
      if (q.reduction != 0) {
        cecuda::RowsArgs fin = ra;
        fin.row_loss = a.row_loss;
        fin.loss = a.loss;
        cecuda::launch_rows_reduce(fin, d.stream);
      }
      return;
    }
    if (g.bt == 0) {  // no product ran: the sums are zero
      KV_CUDA(cudaMemsetAsync(ws("dw_acc"), 0, d.ws.at("dw_acc").second, d.stream));
      if (g.bias) KV_CUDA(cudaMemsetAsync(ws("db_acc"), 0, d.ws.at("db_acc").second, d.stream));
    }
    flcecuda::launch_copy({ws("dw_acc"), rowcuda::dt_code(g.dw), g.h, t("dweight"), g.v, g.h}, d.stream);
    if (g.bias) {
      Mat db = t("dbias");
      db.vec = 0;
      flcecuda::launch_copy({ws("db_acc"), rowcuda::dt_code(DType::f32), g.v, db, 1, g.v}, d.stream);
    }
  }

 private:
  bool bwd_;
};

}  // namespace

void register_cuda_flce(Registry& r) {
  r.add(std::make_unique<CudaFlce>(false));
  r.add(std::make_unique<CudaFlce>(true));
}

}  // namespace kv
