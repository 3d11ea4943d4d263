// Host memory for tensor buffers between PROT_NONE guard zones, so an out-of-bounds write
// faults at once instead of landing in a canary that is looked at only after the run (or
// beyond it, where nothing looked), and the fault report that names the buffer it hit.
//
//   [guard >= kGuardBytes][slack: >= min_lead bytes][payload][guard kGuardBytes]
//                          ^ page-aligned                    ^ page-aligned: flush with the end
//
// The payload ends exactly at a page boundary, so its start is aligned to the largest
// power of two dividing its size (at least the element size of a tensor's storage; the
// 16-byte vector loads of CUDA kernels use the device mirror, kernels/cuda_impl.cpp). The
// slack before it (min_lead to min_lead + page - 1 bytes) is where Buffer keeps its
// canaries. Guard zones cost address space only. Large blocks ask for huge pages
// (core/huge_pages.hpp) and released blocks are kept for reuse, as malloc'd buffers were.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kv {

class GuardedBlock {
 public:
  /// Every access this far past the end or before the slack faults.
  static constexpr size_t kGuardBytes = size_t(2) << 20;

  /// Throws std::bad_alloc when the mapping fails.
  GuardedBlock(size_t payload_bytes, size_t min_lead);
  ~GuardedBlock();
  GuardedBlock(const GuardedBlock&) = delete;
  GuardedBlock& operator=(const GuardedBlock&) = delete;

  uint8_t* payload() const { return payload_; }
  size_t payload_bytes() const { return payload_bytes_; }
  /// The slack between the leading guard and the payload.
  uint8_t* lead() const { return payload_ - lead_bytes_; }
  size_t lead_bytes() const { return lead_bytes_; }
  /// What a fault report calls this block (e.g. "y", "workspace dw_partials").
  void set_label(const std::string& label);

 private:
  uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint8_t* payload_ = nullptr;
  size_t payload_bytes_ = 0, lead_bytes_ = 0;
  int slot_ = -1;  // in the table the fault report reads
};

/// Installs a SIGSEGV handler that, when the fault hit a GuardedBlock's guard zone, writes
/// one line `{"crash": "out-of-bounds write at byte N past the end of y (guard page)"}` to
/// fd (the worker's protocol stream) and then dies of the signal as it would have.
void install_guard_fault_report(int fd);

}  // namespace kv
