// Registration of the test-only impls.
#include "test_impls.hpp"

#include "core/device.hpp"
#include "core/sites.hpp"
#include "faults/faults.hpp"

#include <cfenv>
#include <cmath>
#include <limits>
#include <csignal>
#include <random>
#include <thread>

namespace kvtest {

namespace {

/// A copy of the registered host impl of rms_norm's forward or backward.
std::unique_ptr<kv::Impl> host_rms_norm(bool bwd) {
  return faultable_host(kv::registry(), bwd ? "rms_norm.bwd" : "rms_norm.fwd").with_fault("host", {});
}

/// Wraps the host impl's knobs and contract but misbehaves when run.
class Misbehaving : public kv::Impl {
 public:
  enum Kind { crash, hang };
  Misbehaving(Kind k) : kind_(k), base_(host_rms_norm(false)) {}
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

/// The host RMSNorm, then one 4-byte write outside output y's storage: `at` bytes past its
/// end (0: the element just past it) or, negative, that many bytes before its start. Every
/// one must end in a verdict that names the out-of-bounds write (a guard-page fault or
/// canary damage), never a pass.
class OutOfBounds : public kv::Impl {
 public:
  OutOfBounds(std::string name, int64_t at) : name_(std::move(name)), at_(at), base_(host_rms_norm(false)) {}
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override { return name_; }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_->contract(c, p); }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    base_->run(ts, c, p);
    kv::TensorSlot& y = ts.at("y");
    uint8_t* start = y.buffer->payload();
    volatile uint8_t* at = at_ >= 0 ? start + y.buffer->payload_bytes() + at_ : start + at_;
    for (int i = 0; i < 4; ++i) at[i] = 0;
  }

 private:
  std::string name_;
  int64_t at_;
  std::unique_ptr<kv::Impl> base_;
};

/// The host impl run under upward rounding, declaring u = 2^(1-p) for its accumulator.
class Upward : public kv::Impl {
 public:
  explicit Upward(bool bwd) : base_(host_rms_norm(bwd)) {}
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

/// The host RMSNorm forward at one fixed blocking (num_warps=4, order=asc, whatever its
/// knobs say), so that every determinism claim holds for it and it makes all four, but the
/// one it is built to break: where that claim's condition shows, its fp32 rstd comes out
/// one ulp higher (inside the enclosure: a case alone passes, only the claim's check can
/// see it). The negative controls of the determinism checks; `test.claims_kept` breaks
/// none (their positive control).
class ClaimBreaker : public kv::Impl {
 public:
  enum Breaks { none, run_to_run, config_invariant, gpu_invariant, batch_invariant };
  explicit ClaimBreaker(Breaks b) : breaks_(b), base_(host_rms_norm(false)) {}
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override {
    static const char* names[] = {"test.claims_kept", "test.breaks_run_to_run", "test.breaks_config_invariant",
                                  "test.breaks_gpu_invariant", "test.batch_dependent"};
    return names[breaks_];
  }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k = base_->contract(fixed(c), p);
    for (const char* t : {"y", "rstd"})
      k.determinism[t] = {"run_to_run", "config_invariant", "gpu_invariant", "batch_invariant"};
    return k;
  }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    base_->run(ts, fixed(c), p);
    auto rstd = ts.view("rstd");
    if (rstd.desc.dtype != kv::DType::f32) return;
    const uint64_t rows = static_cast<uint64_t>(kv::numel(c.shape) / std::max<int64_t>(c.shape.back(), 1));
    std::random_device rd;  // run_to_run: a fresh draw per row and run
    for (int64_t r = 0; r < rstd.desc.numel(); ++r) {
      bool bump = false;
      switch (breaks_) {
        case none: break;
        case run_to_run: bump = rd() & 1; break;
        case config_invariant: bump = c.config_int("num_warps", 4) != 4; break;
        // As a kernel that splits its work by the SM count would: other bits on another GPU.
        case gpu_invariant: bump = p.sm_count != kv::host_device().profile.sm_count; break;
        // About half of the row counts (a hash of the count).
        case batch_invariant: bump = ((rows * 2654435761u) >> 7) & 1; break;
      }
      if (!bump) continue;
      double v = 0;
      rstd.read(r, 1, &v);
      rstd.store(r, std::nextafter(static_cast<float>(v), std::numeric_limits<float>::infinity()));
    }
  }

 private:
  static kv::Case fixed(kv::Case c) {
    c.config["num_warps"] = "4";
    c.config["order"] = "asc";
    return c;
  }
  Breaks breaks_;
  std::unique_ptr<kv::Impl> base_;
};

/// The host RMSNorm forward with two bugs at different row lengths: below 64 it writes NaN
/// over each row's first y, from 64 on it scales y by 17/16 (out of its enclosure). A
/// failure found at a long row must shrink to a long row: the short rows fail too, but
/// another way (fuzz/failure_class.hpp).
class TwoBugs : public kv::Impl {
 public:
  TwoBugs() : base_(host_rms_norm(false)) {}
  std::string op() const override { return "rms_norm.fwd"; }
  std::string name() const override { return "test.two_bugs"; }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_->knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_->contract(c, p); }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    base_->run(ts, c, p);
    auto y = ts.view("y");
    const int64_t n = c.shape.back();
    for (int64_t i = 0; i < y.desc.numel(); ++i) {
      if (n < 64) {
        if (i % n == 0) y.store(i, std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      double v = 0;
      y.read(i, 1, &v);
      y.store(i, v * 17 / 16);
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
  CudaLikeThresholds() : base_(host_rms_norm(true)) {}
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

/// NaN over element i of the first output that has more than i elements.
void plant_nan(kv::TensorSet& ts, int64_t i) {
  for (auto& s : ts.slots)
    if (s.role == kv::Role::output && s.desc.numel() > i) {
      s.view().store(i, std::numeric_limits<double>::quiet_NaN());
      return;
    }
}

/// An op's host impl with NaN written over the first element of its first output: it
/// must fail wherever that element's bound is finite and admits no NaN, and is admitted
/// (unverifiable) only where the enclosure admits NaN there.
class NanFirst : public HostWrapper {
 public:
  using HostWrapper::HostWrapper;
  std::string name() const override { return "test.nan_first"; }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    base_.run(ts, c, p);
    plant_nan(ts, 0);
  }
};

/// An op's host impl judged under the contract in $KV_TEST_CONTRACT (a contract's JSON as
/// results lines carry it; unset: the host impl's own): a diagnostic that shows which
/// elements another impl's declared contract leaves unbounded, without that impl's device.
/// $KV_TEST_NAN_AT=i plants NaN at element i of the first output (a negative control);
/// $KV_TEST_UNWRITTEN=name poisons that output again after the run (an impl that does not
/// compute it).
class ContractFromEnv : public HostWrapper {
 public:
  using HostWrapper::HostWrapper;
  std::string name() const override { return "test.contract_env"; }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    const char* j = std::getenv("KV_TEST_CONTRACT");
    return j ? kv::Contract::from_json(nlohmann::json::parse(j)) : base_.contract(c, p);
  }
  /// The rounding sites and forms its contract declares are computed ($KV_TEST_IGNORE_SITES:
  /// not, a contract that claims roundings the impl does not do; $KV_TEST_RUN_CONTRACT: those
  /// of that contract instead, one the declared contract does not describe).
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    const char* rk = std::getenv("KV_TEST_RUN_CONTRACT");
    const kv::Contract k = rk ? kv::Contract::from_json(nlohmann::json::parse(rk)) : contract(c, p);
    base_.run(ts, std::getenv("KV_TEST_IGNORE_SITES") ? c : kv::with_sites(c, k), p);
    if (const char* at = std::getenv("KV_TEST_NAN_AT")) plant_nan(ts, std::stoll(at));
    if (const char* n = std::getenv("KV_TEST_UNWRITTEN")) ts.at(n).buffer->poison(ts.at(n).desc.dtype);
  }
};

/// Sums a row over 32 lanes (num_warps = 1) under the contract of 1024 (num_warps = 32): right
/// results, a reduction shape that understates the serial runs (the audit's negative control
/// for positive sums, rms_norm.fwd and softmax.fwd).
class WarpsUnderstated : public HostWrapper {
 public:
  using HostWrapper::HostWrapper;
  std::string name() const override { return "test.audit.warps_understated"; }
  std::vector<kv::ConfigKnob> knobs() const override {
    std::vector<kv::ConfigKnob> k = base_.knobs();
    std::erase_if(k, [](const kv::ConfigKnob& x) { return x.name == "num_warps"; });
    return k;
  }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_.contract(warps(c, 32), p); }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override { base_.run(ts, warps(c, 1), p); }

 private:
  static kv::Case warps(kv::Case c, int w) {
    c.config["num_warps"] = std::to_string(w);
    return c;
  }
};

}  // namespace

const std::vector<std::pair<std::string, int64_t>>& out_of_bounds_writes() {
  static const std::vector<std::pair<std::string, int64_t>> w = {
      {"test.oob.after_1elem", 0},    {"test.oob.after_256", 256},     {"test.oob.after_1200", 1200},
      {"test.oob.after_4096", 4096},  {"test.oob.before_1200", -1200}, {"test.oob.before_4096", -4096},
  };
  return w;
}

void register_test_impls() {
  static bool done = false;
  if (done) return;
  done = true;
  auto& r = kv::registry();
  register_faults(r);
  r.add(std::make_unique<Upward>(false));
  r.add(std::make_unique<Upward>(true));
  for (auto b : {ClaimBreaker::none, ClaimBreaker::run_to_run, ClaimBreaker::config_invariant,
                 ClaimBreaker::gpu_invariant, ClaimBreaker::batch_invariant})
    r.add(std::make_unique<ClaimBreaker>(b));
  register_determinism_impls(r);
  r.add(std::make_unique<TwoBugs>());
  for (auto& [name, at] : out_of_bounds_writes()) r.add(std::make_unique<OutOfBounds>(name, at));
  r.add(std::make_unique<CudaLikeThresholds>());
  for (const char* base : {"rms_norm", "layer_norm", "rope", "softmax", "cross_entropy", "fused_linear_cross_entropy",
                           "swiglu", "geglu"})
    for (const char* dir : {".fwd", ".bwd"}) {
      r.add(std::make_unique<NanFirst>(r.impl(std::string(base) + dir, "host")));
      r.add(std::make_unique<ContractFromEnv>(r.impl(std::string(base) + dir, "host")));
    }
  r.add(std::make_unique<ContractFromEnv>(r.impl("rope_table.fwd", "host")));
  for (const char* op : {"rms_norm.fwd", "softmax.fwd"}) r.add(std::make_unique<WarpsUnderstated>(r.impl(op, "host")));
  r.add(std::make_unique<Misbehaving>(Misbehaving::crash));
  r.add(std::make_unique<Misbehaving>(Misbehaving::hang));
#ifdef KV_HAVE_CUDA
  register_cuda_test_impls();
#endif
}

}  // namespace kvtest
