// Test-only impls that each break one determinism claim the way kernels do, for the
// negative controls of `kverify audit`'s determinism audit (tests/run/test_audit_determinism.cpp).
// Each is the host RMSNorm forward with its fp32 rstd one ulp higher in the rows a hidden
// condition picks (inside the enclosure, as test_impls.cpp's ClaimBreaker: every case alone
// passes, only the claim's check sees it). Claims are the host's (run_to_run, gpu_invariant,
// batch_invariant on y and rstd) unless said otherwise.
//   test.det.call_order     rows of one parity, alternating with a call counter: other bits
//                           on every call
//   test.det.process_order  row r where bit r % 32 of getpid() is set: the same bits within
//                           a process, other bits in another (an autotuner that picks per
//                           process; any two processes differ once there are 32 rows)
//   test.det.knob           also claims config_invariant, yet rows r < log2(num_warps) move
//   test.det.rows           every row above sm_count rows, none at or below (a split heuristic)
//   test.det.atomics        as call_order, but claims neither run_to_run nor batch_invariant
//                           (a kernel with atomics that says so: informational, not a failure)
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>

#include "faults/faults.hpp"
#include "test_impls.hpp"

namespace kvtest {

namespace {

class DeterminismBreaker : public HostWrapper {
 public:
  enum Kind { call_order, process_order, knob, rows_, atomics };
  DeterminismBreaker(const kv::Impl& base, Kind k) : HostWrapper(base), kind_(k) {}
  std::string name() const override {
    static const char* names[] = {"test.det.call_order", "test.det.process_order", "test.det.knob", "test.det.rows",
                                  "test.det.atomics"};
    return names[kind_];
  }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override {
    kv::Contract k = base_.contract(c, p);
    if (kind_ == knob)
      for (const char* t : {"y", "rstd"}) k.determinism[t].push_back("config_invariant");
    if (kind_ == atomics)
      for (const char* t : {"y", "rstd"}) k.determinism[t] = {"gpu_invariant"};
    return k;
  }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override {
    static std::atomic<uint64_t> calls{0};
    base_.run(ts, c, p);
    auto rstd = ts.view("rstd");
    if (rstd.desc.dtype != kv::DType::f32) return;
    const uint64_t call = calls++, pid = static_cast<uint64_t>(getpid());
    const int64_t rows = rstd.desc.numel();
    for (int64_t r = 0; r < rows; ++r) {
      bool bump = false;
      switch (kind_) {
        case atomics:
        case call_order: bump = ((static_cast<uint64_t>(r) + call) & 1) != 0; break;
        case process_order: bump = ((pid >> (r % 32)) & 1) != 0; break;
        case knob: bump = r < 6 && (int64_t(1) << r) < c.config_int("num_warps", 4); break;
        case rows_: bump = rows > p.sm_count; break;
      }
      if (!bump) continue;
      double v = 0;
      rstd.read(r, 1, &v);
      rstd.store(r, std::nextafter(static_cast<float>(v), std::numeric_limits<float>::infinity()));
    }
  }

 private:
  Kind kind_;
};

}  // namespace

void register_determinism_impls(kv::Registry& r) {
  const kv::Impl& host = r.impl("rms_norm.fwd", "host");
  for (auto k : {DeterminismBreaker::call_order, DeterminismBreaker::process_order, DeterminismBreaker::knob,
                 DeterminismBreaker::rows_, DeterminismBreaker::atomics})
    r.add(std::make_unique<DeterminismBreaker>(host, k));
}

}  // namespace kvtest
