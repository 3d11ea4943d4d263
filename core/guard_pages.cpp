// Guarded host blocks and the guard-fault report (core/guard_pages.hpp).
#include "core/guard_pages.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "core/huge_pages.hpp"

namespace kv {

namespace {

constexpr size_t kG = GuardedBlock::kGuardBytes;
constexpr size_t kHugeAlign = size_t(2) << 20;

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/// A mapping: [p, p + bytes), a guard zone at each end, `data` bytes readable and
/// writable just before the trailing guard zone.
struct Mapping {
  uint8_t* p = nullptr;
  size_t bytes = 0;
  size_t data = 0;
  size_t capacity() const { return bytes - 2 * kG; }
  uint8_t* data_end() const { return p + bytes - kG; }
};

/// Released mappings, reused by the next block they can hold: large tensors then cost no
/// fresh page faults from case to case.
struct Pool {
  std::mutex mu;
  std::vector<Mapping> free;
  size_t bytes = 0;  // capacity held
  static constexpr size_t kMaxBytes = size_t(24) << 30;
  static constexpr size_t kMaxCount = 512;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: blocks may be released at exit
  return *p;
}

/// The smallest released mapping that holds `data` bytes, or none.
Mapping take(size_t data) {
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  size_t best = p.free.size();
  for (size_t i = 0; i < p.free.size(); ++i) {
    const size_t cap = p.free[i].capacity();
    if (cap >= data && (best == p.free.size() || cap < p.free[best].capacity())) best = i;
  }
  if (best == p.free.size()) return {};
  Mapping m = p.free[best];
  p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(best));
  p.bytes -= m.capacity();
  return m;
}

void give(Mapping m) {
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> g(p.mu);
    if (p.free.size() < Pool::kMaxCount && p.bytes + m.capacity() <= Pool::kMaxBytes) {
      p.bytes += m.capacity();
      p.free.push_back(m);
      return;
    }
  }
  munmap(m.p, m.bytes);
}

/// A fresh mapping of `data` usable bytes, all of it PROT_NONE; large ones with the data
/// region 2 MiB-aligned and huge pages requested.
Mapping fresh(size_t data) {
  const bool huge = data >= kHugeMin;
  const size_t bytes = data + 2 * kG, extra = huge ? kHugeAlign : 0;
  void* raw = mmap(nullptr, bytes + extra, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto* r = static_cast<uint8_t*>(raw);
  uint8_t* p = r;
  if (huge) {  // the data region's start on a 2 MiB boundary; the excess unmapped
    const auto a = reinterpret_cast<uintptr_t>(r + kG);
    p = r + (round_up(a, kHugeAlign) - a);
    if (p > r) munmap(r, static_cast<size_t>(p - r));
    if (r + bytes + extra > p + bytes) munmap(p + bytes, static_cast<size_t>(r + bytes + extra - (p + bytes)));
    madvise(p + kG, data, MADV_HUGEPAGE);
  }
  return Mapping{p, bytes, 0};
}

/// Makes exactly the last `data` bytes before the trailing guard readable and writable.
bool set_data(Mapping& m, size_t data) {
  uint8_t* end = m.data_end();
  int rc = 0;
  if (data > m.data) rc = mprotect(end - data, data - m.data, PROT_READ | PROT_WRITE);
  else if (data < m.data) rc = mprotect(end - m.data, m.data - data, PROT_NONE);
  if (rc != 0) return false;
  m.data = data;
  return true;
}

// The table the fault handler reads: for each live block its whole leading guard zone
// [lo, start - lead), its payload [start, end) and its trailing zone [end, hi). Written
// under a mutex, read by the handler without one (atomics: a torn entry can only be one
// that is being added or removed, not the block the faulting code was writing).
struct Watch {
  std::atomic<uintptr_t> lo{0}, start{0}, end{0}, hi{0};
  char label[48] = {};
};
constexpr int kWatches = 4096;
Watch g_watch[kWatches];
std::mutex g_watch_mu;
std::atomic<int> g_report_fd{-1};

int watch_add(uintptr_t lo, uintptr_t start, uintptr_t end, uintptr_t hi) {
  std::lock_guard<std::mutex> g(g_watch_mu);
  for (int i = 0; i < kWatches; ++i) {
    Watch& w = g_watch[i];
    if (w.hi.load(std::memory_order_relaxed) != 0) continue;
    w.label[0] = '\0';
    w.lo.store(lo, std::memory_order_relaxed);
    w.start.store(start, std::memory_order_relaxed);
    w.end.store(end, std::memory_order_relaxed);
    w.hi.store(hi, std::memory_order_release);
    return i;
  }
  return -1;  // full: faults in this block are reported by signal alone
}

void watch_remove(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> g(g_watch_mu);
  g_watch[slot].hi.store(0, std::memory_order_release);
}

// Formatting without malloc or stdio, for the signal handler.
struct Line {
  char buf[256];
  size_t n = 0;
  void add(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
  }
  void add(uint64_t v) {
    char d[24];
    int k = 0;
    do d[k++] = static_cast<char>('0' + v % 10), v /= 10;
    while (v);
    while (k && n + 1 < sizeof buf) buf[n++] = d[--k];
  }
};

void on_fault(int sig, siginfo_t* si, void* ctx) {
  const int fd = g_report_fd.load(std::memory_order_relaxed);
  // si_code <= 0: sent by a process (raise, kill), not a fault: no address to look up.
  if (fd >= 0 && si && si->si_code > 0) {
    const auto a = reinterpret_cast<uintptr_t>(si->si_addr);
    const char* what = "access";
#if defined(__x86_64__)
    // The page fault's error code: bit 1 set for a write.
    if (ctx) what = (static_cast<ucontext_t*>(ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#else
    (void)ctx;
#endif
    for (int i = 0; i < kWatches; ++i) {
      const Watch& w = g_watch[i];
      const uintptr_t hi = w.hi.load(std::memory_order_acquire);
      if (hi == 0 || a >= hi || a < w.lo.load(std::memory_order_relaxed)) continue;
      const uintptr_t start = w.start.load(std::memory_order_relaxed), end = w.end.load(std::memory_order_relaxed);
      if (a >= start && a < end) continue;  // not a guard zone
      Line l;
      l.add("{\"crash\": \"out-of-bounds ");
      l.add(what);
      if (a >= end) {
        l.add(" at byte "), l.add(a - end), l.add(" past the end of ");
      } else {
        l.add(" "), l.add(start - a), l.add(" byte(s) before the start of ");
      }
      l.add(w.label[0] ? w.label : "a buffer");
      l.add(" (its guard page faulted)\"}\n");
      ssize_t ignored = write(fd, l.buf, l.n);
      (void)ignored;
      break;
    }
  }
  // Die of the signal as without the handler: the default action once this returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

}  // namespace

GuardedBlock::GuardedBlock(size_t payload_bytes, size_t min_lead) : payload_bytes_(payload_bytes) {
  const size_t data = round_up(payload_bytes + min_lead, page_size());
  Mapping m = take(data);
  if (!m.p) m = fresh(data);
  if (!set_data(m, data)) {
    munmap(m.p, m.bytes);
    throw std::bad_alloc();
  }
  map_ = m.p, map_bytes_ = m.bytes;
  payload_ = m.data_end() - payload_bytes;
  lead_bytes_ = data - payload_bytes;
  slot_ = watch_add(reinterpret_cast<uintptr_t>(m.p), reinterpret_cast<uintptr_t>(payload_),
                    reinterpret_cast<uintptr_t>(m.data_end()), reinterpret_cast<uintptr_t>(m.p + m.bytes));
}

GuardedBlock::~GuardedBlock() {
  watch_remove(slot_);
  give(Mapping{map_, map_bytes_, payload_bytes_ + lead_bytes_});
}

void GuardedBlock::set_label(const std::string& label) {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> g(g_watch_mu);
  char* d = g_watch[slot_].label;
  size_t n = 0;
  for (char ch : label) {
    if (n + 1 >= sizeof g_watch[slot_].label) break;
    // Tensor names; anything else is replaced so the report stays one valid JSON line.
    d[n++] = (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20) ? '?' : ch;
  }
  d[n] = '\0';
}

void install_guard_fault_report(int fd) {
  g_report_fd.store(fd, std::memory_order_relaxed);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
}

}  // namespace kv
