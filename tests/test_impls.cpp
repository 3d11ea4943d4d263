// Registration of the test-only impls.
#include "test_impls.hpp"

#include "ops/cross_entropy.hpp"
#include "ops/flce.hpp"
#include "ops/glu.hpp"
#include "ops/layer_norm.hpp"
#include "ops/rope.hpp"
#include "ops/rope_table.hpp"
#include "ops/softmax.hpp"

#include <cfenv>
#include <cmath>
#include <limits>
#include <csignal>
#include <thread>

namespace kvtest {

namespace {

/// Wraps the host impl's knobs and contract but misbehaves when run.
class Misbehaving : public kv::Impl {
 public:
  enum Kind { crash, hang };
  Misbehaving(Kind k) : kind_(k), base_(kv::make_host_rms_norm(false)) {}
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override { return kind_ == crash ? "test.crash" : "test.hang"; }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_->contract(c, p); }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    if (kind_ == crash) std::raise(SIGSEGV);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

 private:
  Kind kind_;
  std::unique_ptr<kv::Impl> base_;
};

/// The host impl run under upward rounding, declaring u = 2^(1-p) for its accumulator.
class Upward : public kv::Impl {
 public:
  explicit Upward(bool bwd) : base_(kv::make_host_rms_norm(bwd)) {}
  std::string op() const override { return base_->op(); }
  std::string name() const override { return "host.upward"; }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k = base_->contract(c, p);
    k.u = 2 * kv::unit_roundoff(k.acc);
    return k;
  }
  std::vector<kv::WorkspaceReq> workspaces(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_->workspaces(c, p);
  }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    std::fesetround(FE_UPWARD);
    base_->run(ts, c, p);
    std::fesetround(FE_TONEAREST);
  }

 private:
  std::unique_ptr<kv::Impl> base_;
};

/// The host RMSNorm claiming batch_invariant (its contract) while, for about half of the
/// row counts (a hash of it), its fp32 rstd comes out one ulp higher: inside the
/// enclosure (every case passes), but the bits of a row change with the batch size.
class BatchDependent : public kv::Impl {
 public:
  BatchDependent() : base_(kv::make_host_rms_norm(false)) {}
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override { return "test.batch_dependent"; }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_->contract(c, p); }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    base_->run(ts, c, p);
    const uint64_t rows = static_cast<uint64_t>(kv::numel(c.shape) / std::max<int64_t>(c.shape.back(), 1));
    auto rstd = ts.view("rstd");
    if (!(((rows * 2654435761u) >> 7) & 1) || rstd.desc.dtype != kv::DType::f32) return;
    for (int64_t r = 0; r < rstd.desc.numel(); ++r) {
      double v = 0;
      rstd.read(r, 1, &v);
      rstd.store(r, std::nextafter(static_cast<float>(v), std::numeric_limits<float>::infinity()));
    }
  }

 private:
  std::unique_ptr<kv::Impl> base_;
};

/// The host RMSNorm backward declaring thresholds the way a CUDA row kernel does, from its
/// dtype and the profile (read by the generator's tests; it runs as the host impl): on the
/// row, the 16-byte chunk of x and a made-up register limit of 300 chunks (1200 or 2400
/// elements, none of them a special size the generator draws anyway); on the rows, dW
/// programs of two per SM (one row each).
class CudaLikeThresholds : public kv::Impl {
 public:
  CudaLikeThresholds() : base_(kv::make_host_rms_norm(true)) {}
  std::string op() const override { return "rms_norm.bwd"; }
  std::string name() const override { return "test.thresholds"; }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_->contract(c, p); }
  std::vector<kv::WorkspaceReq> workspaces(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_->workspaces(c, p);
  }
  std::vector<kv::Threshold> thresholds(const kv::Case& c, const kv::DeviceProfile& p) const override {
    const int64_t chunk = 16 / static_cast<int64_t>(kv::dtype_size(c.dtypes.at("x")));
    return {kv::row_threshold(c, {chunk, 300 * chunk}, "16-byte chunks; 300 of them"),
            kv::rows_threshold(c, {2 * p.sm_count}, "two programs per SM")};
  }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override { base_->run(ts, c, p); }

 private:
  std::unique_ptr<kv::Impl> base_;
};

}  // namespace

const std::vector<PlantedBug>& planted_bugs() {
  using kv::RmsBug;
  static const std::vector<PlantedBug> b = {
      {RmsBug::bf16_accumulation, "bf16_accumulation", false},
      {RmsBug::drop_last_square, "drop_last_square", false},
      {RmsBug::eps_outside_sqrt, "eps_outside_sqrt", false},
      {RmsBug::divide_by_n_minus_1, "divide_by_n_minus_1", false},
      {RmsBug::gemma_for_llama, "gemma_for_llama", false},
      {RmsBug::drop_last_dw_row, "drop_last_dw_row", true},
      {RmsBug::truncate_to_bf16, "truncate_to_bf16", false},
      {RmsBug::write_nan, "write_nan", false},
      {RmsBug::leave_unwritten, "leave_unwritten", false},
      {RmsBug::write_past_end, "write_past_end", false},
  };
  return b;
}

void register_test_impls() {
  static bool done = false;
  if (done) return;
  done = true;
  auto& r = kv::registry();
  for (auto& b : planted_bugs()) r.add(kv::make_host_rms_norm(b.bwd, b.bug, "host.bug." + b.name));
  // Not among planted_bugs(): it shows only at some N (of the sensitivity test's N, 123 is
  // shorter than a block of the default num_warps and 1536, 4096, 16384 are whole blocks);
  // the fuzz tests find it.
  r.add(kv::make_host_rms_norm(false, kv::RmsBug::drop_tail, "host.bug.drop_tail"));
  kv::register_glu_faults(r);
  kv::register_softmax_faults(r);
  kv::register_layer_norm_faults(r);
  kv::register_cross_entropy_faults(r);
  kv::register_rope_faults(r);
  kv::register_rope_table_faults(r);
  kv::register_flce_faults(r);
  r.add(std::make_unique<Upward>(false));
  r.add(std::make_unique<Upward>(true));
  r.add(std::make_unique<BatchDependent>());
  r.add(std::make_unique<CudaLikeThresholds>());
  r.add(std::make_unique<Misbehaving>(Misbehaving::crash));
  r.add(std::make_unique<Misbehaving>(Misbehaving::hang));
#ifdef KV_HAVE_CUDA
  register_cuda_test_impls();
#endif
}

}  // namespace kvtest
