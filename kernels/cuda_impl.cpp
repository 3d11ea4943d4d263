// Mirroring, launching and copying back for CUDA impls.
#include "kernels/cuda_impl.hpp"

#include <algorithm>
#include <memory>

#include "device/cuda_check.hpp"
#include "core/error.hpp"

namespace kv {

namespace {

/// A device allocation freed on scope exit (errors while freeing are ignored: the
/// context may already be lost).
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { KV_CUDA(cudaMalloc(&p, n == 0 ? 1 : n)); }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { KV_CUDA(cudaEventCreate(&e)); }
  ~Event() {
    if (e) cudaEventDestroy(e);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

}  // namespace

std::optional<std::string> check_block_size(const std::string& kernel, const void* fn, int64_t threads,
                                            size_t dynamic_smem, const DeviceProfile& p, const std::string& what) {
  cudaFuncAttributes a{};
  KV_CUDA(cudaFuncGetAttributes(&a, fn));
  if (threads > a.maxThreadsPerBlock)
    return what + " = " + std::to_string(threads) + " threads per block exceeds the " +
           std::to_string(a.maxThreadsPerBlock) + "-thread limit of kernel " + kernel + " (cudaFuncGetAttributes, given its " +
           std::to_string(a.numRegs) + " registers)";
  if (threads > p.max_threads_per_block)
    return what + " = " + std::to_string(threads) + " threads per block exceeds the device's " +
           std::to_string(p.max_threads_per_block) + "-thread limit";
  size_t smem = a.sharedSizeBytes + dynamic_smem;
  if (static_cast<int64_t>(smem) > p.smem_per_block)
    return "kernel " + kernel + " needs " + std::to_string(smem) + " bytes of shared memory per block, the device allows " +
           std::to_string(p.smem_per_block);
  return std::nullopt;
}

std::optional<int64_t> collapsed_stride(const TensorDesc& d, size_t dims) {
  const auto st = d.effective_strides();
  int64_t outer = 0, inner_stride = 0, inner_size = 0;
  bool first = true;
  for (size_t i = std::min(dims, d.shape.size()); i-- > 0;) {
    if (d.shape[i] == 1) continue;  // never stepped: its stride is irrelevant
    if (first) outer = st[i], first = false;
    else if (st[i] != inner_stride * inner_size) return std::nullopt;
    inner_stride = st[i], inner_size = d.shape[i];
  }
  return outer;
}

std::optional<std::string> row_alias_reason(const Case& c, const std::vector<std::string>& row_tensors) {
  auto is_row = [&](const std::string& n) { return std::find(row_tensors.begin(), row_tensors.end(), n) != row_tensors.end(); };
  for (auto& [out, in] : c.alias)
    if (!is_row(out) || !is_row(in))
      return "output " + out + " cannot be written over " + in +
             ": only row tensors may be computed in place (every program reads the per-column and per-row inputs)";
  return std::nullopt;
}

std::optional<std::string> CudaImpl::invalid_reason(const Case& c, const DeviceProfile& p) const {
  if (auto why = layout_reason(c)) return why;
  int64_t threads = threads_per_block(c, p);
  std::string what = "num_warps=" + c.config_or("num_warps", "?") + " x warp_size " + std::to_string(p.warp_size);
  for (auto& k : kernels(c))
    if (auto why = check_block_size(k.name, k.fn, threads, k.dynamic_smem, p, what)) return why;
  return std::nullopt;
}

std::map<const Buffer*, size_t> device_canary_bytes(const TensorSet& ts) {
  std::map<const Buffer*, size_t> out;
  auto at_least = [&](const Buffer* b, size_t row) {
    size_t& c = out[b];
    c = std::max({c, kDeviceCanaryMinBytes, (row + 255) / 256 * 256});
  };
  for (auto& s : ts.slots) {
    const size_t elem = dtype_size(s.desc.dtype);
    size_t row = s.desc.shape.empty() ? elem : static_cast<size_t>(s.desc.shape.back()) * elem;
    if (s.desc.shape.size() >= 2) {  // a padded row: its stride
      const int64_t st = s.desc.effective_strides()[s.desc.shape.size() - 2];
      row = std::max(row, static_cast<size_t>(st < 0 ? -st : st) * elem);
    }
    at_least(s.buffer.get(), row);
  }
  for (auto& [n, b] : ts.workspaces) at_least(b.get(), 0);
  return out;
}

namespace {

/// The case's buffers on the device: one allocation per host buffer (aliased tensors
/// share one), the payload between canaries of at least a row each (device_canary_bytes),
/// and a stream. Every copy is ordered in that stream: cudaMemcpy from pageable memory may
/// return before its DMA lands, and the legacy stream it runs on does not order a
/// non-blocking stream's kernels after it (under several processes per GPU a kernel then
/// met its buffers half copied, and the late copy overwrote outputs it had written).
struct Mirror {
  struct Dev {
    std::unique_ptr<DevBuf> mem;
    size_t canary = 0;
    std::vector<uint8_t> before, after;  // the canaries as copied back
  };
  std::map<Buffer*, Dev> dev;
  DevSet d;
  explicit Mirror(TensorSet& ts) {
    const auto canaries = device_canary_bytes(ts);
    size_t need = 0;
    for (auto& [b, c] : canaries) need += b->payload_bytes() + 2 * c;
    size_t free_b = 0, total_b = 0;
    KV_CUDA(cudaMemGetInfo(&free_b, &total_b));
    if (need > free_b)
      throw UsageError("case needs " + std::to_string(need >> 20) + " MiB of GPU memory, " + std::to_string(free_b >> 20) +
                       " MiB free");
    KV_CUDA(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
    auto mirror = [&](Buffer* b) -> void* {
      Dev& m = dev[b];
      if (!m.mem) {
        m.canary = canaries.at(b);  // a multiple of 256: the payload keeps cudaMalloc's alignment
        const size_t n = b->payload_bytes();
        m.mem = std::make_unique<DevBuf>(n + 2 * m.canary);
        auto* p = static_cast<uint8_t*>(m.mem->p);
        KV_CUDA(cudaMemsetAsync(p, Buffer::kCanary, m.canary, d.stream));
        KV_CUDA(cudaMemcpyAsync(p + m.canary, b->payload(), n, cudaMemcpyHostToDevice, d.stream));
        KV_CUDA(cudaMemsetAsync(p + m.canary + n, Buffer::kCanary, m.canary, d.stream));
      }
      return static_cast<uint8_t*>(m.mem->p) + m.canary;
    };
    for (auto& s : ts.slots) d.t[s.desc.name] = DevView{mirror(s.buffer.get()), s.desc};
    for (auto& [n, b] : ts.workspaces) d.ws[n] = {mirror(b.get()), b->payload_bytes()};
  }
  ~Mirror() {
    if (d.stream) cudaStreamDestroy(d.stream);
  }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  /// Every payload back into its host buffer, and damage to the device canaries noted
  /// on the buffer (the host-side checks report it).
  void copy_back() {
    for (auto& [b, m] : dev) {
      auto* p = static_cast<uint8_t*>(m.mem->p);
      const size_t n = b->payload_bytes();
      m.before.resize(m.canary), m.after.resize(m.canary);
      KV_CUDA(cudaMemcpyAsync(b->payload(), p + m.canary, n, cudaMemcpyDeviceToHost, d.stream));
      KV_CUDA(cudaMemcpyAsync(m.before.data(), p, m.canary, cudaMemcpyDeviceToHost, d.stream));
      KV_CUDA(cudaMemcpyAsync(m.after.data(), p + m.canary + n, m.canary, cudaMemcpyDeviceToHost, d.stream));
    }
    KV_CUDA(cudaStreamSynchronize(d.stream));
    for (auto& [b, m] : dev) {
      const std::string of = " on the device (its canaries: " + std::to_string(m.canary) + " bytes each side)";
      for (size_t i = 1; i <= m.canary; ++i)
        if (m.before[m.canary - i] != Buffer::kCanary) {
          b->note_damage("write " + std::to_string(i) + " byte(s) before the start of the buffer" + of);
          break;
        }
      for (size_t i = 0; i < m.canary; ++i)
        if (m.after[i] != Buffer::kCanary) {
          b->note_damage("write at byte " + std::to_string(i) + " past the end of the buffer" + of);
          break;
        }
    }
  }
};

}  // namespace

void CudaImpl::run(TensorSet& ts, const Case& c, const DeviceProfile& p) const {
  Mirror m(ts);
  Event start, stop;
  KV_CUDA(cudaEventRecord(start.e, m.d.stream));
  launch(m.d, c, p);
  KV_CUDA(cudaEventRecord(stop.e, m.d.stream));
  KV_CUDA(cudaStreamSynchronize(m.d.stream));
  float ms = 0;
  KV_CUDA(cudaEventElapsedTime(&ms, start.e, stop.e));
  ts.timings["kernel_ms"] = ms;
  m.copy_back();
}

std::vector<float> CudaImpl::time_launches(TensorSet& ts, const Case& c, const DeviceProfile& p, int warmup,
                                           int reps, size_t* free_after) const {
  Mirror m(ts);
  for (int i = 0; i < warmup; ++i) launch(m.d, c, p);
  std::vector<Event> ev(static_cast<size_t>(reps) + 1);
  // Launches queue back to back behind the first event: no host gap enters the times.
  KV_CUDA(cudaEventRecord(ev[0].e, m.d.stream));
  for (int i = 0; i < reps; ++i) {
    launch(m.d, c, p);
    KV_CUDA(cudaEventRecord(ev[static_cast<size_t>(i) + 1].e, m.d.stream));
  }
  KV_CUDA(cudaStreamSynchronize(m.d.stream));
  if (free_after) {
    size_t total = 0;
    KV_CUDA(cudaMemGetInfo(free_after, &total));
  }
  std::vector<float> ms(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) KV_CUDA(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], ev[i].e, ev[i + 1].e));
  m.copy_back();
  return ms;
}

}  // namespace kv
