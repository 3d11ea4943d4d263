// The CUDA rope impls: configs, contracts, determinism claims, layouts,
// launches (kernels in cuda_kernels.cu).
#include "kernels/rope/cuda.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/impl_version.hpp"
#include "kernels/cuda_impl.hpp"
#include "kernels/cuda_rows.hpp"
#include "kernels/rope/cuda_launch.hpp"
#include "reference/rope_geom.hpp"

namespace kv {

namespace {

/// Every output of an elementwise kernel whose operations do not depend on the config,
/// the GPU or the row's neighbours (batch_invariant where the op's rows are independent).
DeterminismClaims elementwise_claims(const Case& c, const std::string& out) {
  return with_batch_claim(c, out, {"run_to_run", "config_invariant", "gpu_invariant"});
}

uint8_t* payload(const DevView& v) {
  return static_cast<uint8_t*>(v.base) + v.desc.offset * static_cast<int64_t>(dtype_size(v.desc.dtype));
}

}  // namespace

bool rope_whole_chunks(const TensorDesc& d, uintptr_t addr, bool interleaved) {
  const auto st = d.effective_strides();
  const int64_t esz = static_cast<int64_t>(dtype_size(d.dtype)), span = interleaved ? d.shape[3] : d.shape[3] / 2;
  if (st[3] != 1 || addr % 16 != 0 || (span * esz) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)
    if (d.shape[i] > 1 && (st[i] * esz) % 16 != 0) return false;
  return true;
}

namespace {

class CudaRope : public CudaImpl {
 public:
  explicit CudaRope(bool bwd) : bwd_(bwd) {}
  std::string op() const override { return bwd_ ? "rope.bwd" : "rope.fwd"; }
  std::string name() const override { return "cuda"; }
  std::string version() const override { return impl_version("cuda_rope"); }
  /// Warps per block; each warp rotates one token at a time, so this is also the tokens
  /// per block in flight.
  std::vector<ConfigKnob> knobs() const override { return {{"num_warps", {"4", "1", "2", "8", "16", "32"}}}; }

  Contract contract(const Case& c, const DeviceProfile&) const override {
    // The definition's own fp32 operations (__fmul_rn, __fadd_rn/__fsub_rn: no FMA
    // contraction), no math function (the tables are inputs), no reduction: every output
    // is the same bits under any config, on any GPU, at any batch size.
    Contract k;
    k.acc = DType::f32;
    k.fma = false;
    k.ftz = false;
    for (auto& t : io(2)) k.determinism[t] = elementwise_claims(c, t);
    return k;
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile&) const override {
    // A head moves in 16-byte units of each half (rotate_half) or of the whole head
    // (interleaved) where D allows: the head dim of whole units, one then two; a block of
    // num_warps warps takes one token each (B*S tokens: one block, then two).
    const DType x = c.dtypes.at(io(0)[0]);
    const int64_t v = 16 / static_cast<int64_t>(dtype_size(x));
    const int64_t unit = c.attr("layout") == "interleaved" ? v : 2 * v;
    const int64_t warps = c.config_int("num_warps", 4);
    return {{3, 4, {unit, 2 * unit}, "head dims of whole 16-byte units: one, then two"},
            {0, 2, {warps, 2 * warps}, "tokens of one block's warps, then two blocks", true}};
  }

 protected:
  int64_t threads_per_block(const Case& c, const DeviceProfile& p) const override {
    return c.config_int("num_warps", 4) * p.warp_size;
  }
  std::vector<KernelRef> kernels(const Case& c) const override {
    const DType x = c.dtypes.at(io(0)[0]);
    const bool il = c.attr("layout") == "interleaved";
    const size_t smem = static_cast<size_t>(ropecuda::smem_bytes(c.shape[3], x, il, static_cast<int>(c.config_int("num_warps", 4))));
    const std::string n = op() + "<" + std::string(dtype_name(x)) + (il ? ",interleaved" : ",rotate_half");
    // Both: which one runs depends on the buffers' alignment.
    return {{n + ",16-byte>", ropecuda::kernel(x, il, bwd_, true), smem},
            {n + ",elementwise>", ropecuda::kernel(x, il, bwd_, false), smem}};
  }
  std::optional<std::string> layout_reason(const Case& c) const override {
    const auto in = io(0), out = io(1);
    const DType x = c.dtypes.at(in[0]);
    for (const auto& n : {in[0], in[1], out[0], out[1]})
      if (c.dtypes.at(n) != x)
        return "q, k and their outputs must share one dtype (the kernels' template parameter): " + n + " differs";
    for (auto& [o, i] : c.alias)
      if (!((o == out[0] && i == in[0]) || (o == out[1] && i == in[1])))
        return "output " + o + " cannot be written over " + i + ": only " + out[0] + " over " + in[0] + " and " + out[1] +
               " over " + in[1] + " (each unit is read, then written, by one lane)";
    const RopeGeom g = rope_geom(c);
    const int64_t lim = (int64_t(1) << 31) - 1;
    if (g.s > lim) return "S = " + std::to_string(g.s) + ": the kernels take a sample's positions in 32 bits";
    if ((g.hq + g.hk) * g.d > lim)
      return "a token's q and k hold " + std::to_string((g.hq + g.hk) * g.d) + " elements: the kernels index them in 32 bits";
    return std::nullopt;
  }
  void launch(DevSet& d, const Case& c, const DeviceProfile&) const override {
    const RopeGeom g = rope_geom(c);
    const auto in = io(0), out = io(1);
    ropecuda::Args a{};
    bool vec = true;
    for (int t = 0; t < 2; ++t)
      for (int o = 0; o < 2; ++o) {
        const DevView& v = d.t.at(o ? out[t] : in[t]);
        const auto st = v.desc.effective_strides();
        (o ? a.out : a.in)[t] = ropecuda::Heads{payload(v), st[0], st[1], st[2], st[3]};
        vec = vec && rope_whole_chunks(v.desc, reinterpret_cast<uintptr_t>(payload(v)), g.interleaved);
      }
    a.heads[0] = g.hq, a.heads[1] = g.hk;
    a.b = g.b, a.s = g.s, a.d = g.d;
    const int64_t half = g.d / 2;
    auto table = [&](const std::string& n, int64_t section) {
      const DevView& v = d.t.at(n);
      const auto st = v.desc.effective_strides();
      const int dt = rowcuda::dt_code(v.desc.dtype);
      if (g.mode == "1d") return ropecuda::Table{payload(v), dt, 0, st[1], 0, st[2]};  // (1, S, D)
      if (g.mode == "mrope")                                                          // (3, B, S, D)
        return ropecuda::Table{payload(v) + section * st[0] * static_cast<int64_t>(dtype_size(v.desc.dtype)), dt, st[1],
                               st[2], 0, st[3]};
      return ropecuda::Table{payload(v), dt, 0, 0, st[0], st[1]};  // 3d: axis `section`'s (S, c_a)
    };
    const char* ax[3] = {"f", "h", "w"};
    for (int k = 0; k < 3; ++k) {
      const bool three = g.mode == "3d";
      a.cos[k] = table(three ? std::string("cos_") + ax[k] : "cos", k);
      a.sin[k] = table(three ? std::string("sin_") + ax[k] : "sin", k);
      a.sec[k] = static_cast<int>(g.mode == "1d" ? (k == 0 ? half : 0) : g.sec[k]);
    }
    if (g.mode == "3d") {
      const DevView &gr = d.t.at("grid"), &sl = d.t.at("seq_len");
      a.mode3d = 1;
      a.grid = reinterpret_cast<const int32_t*>(payload(gr));
      a.grid_sb = gr.desc.effective_strides()[0], a.grid_sa = gr.desc.effective_strides()[1];
      a.seq_len = reinterpret_cast<const int32_t*>(payload(sl));
      a.len_sb = sl.desc.effective_strides()[0];
    }
    a.warps = static_cast<int>(c.config_int("num_warps", 4));
    a.vec = vec ? 1 : 0;
    ropecuda::launch(c.dtypes.at(in[0]), g.interleaved, bwd_, a, d.stream);
  }

 private:
  bool bwd_;
  /// 0: the rotated inputs (q, k), 1: their outputs, 2: the outputs (for claims).
  std::vector<std::string> io(int which) const {
    if (which == 0) return bwd_ ? std::vector<std::string>{"dq_out", "dk_out"} : std::vector<std::string>{"q", "k"};
    return bwd_ ? std::vector<std::string>{"dq", "dk"} : std::vector<std::string>{"q_out", "k_out"};
  }
};

}  // namespace

void register_cuda_rope(Registry& r) {
  r.add(std::make_unique<CudaRope>(false));
  r.add(std::make_unique<CudaRope>(true));
}

}  // namespace kv
