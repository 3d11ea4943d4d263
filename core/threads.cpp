// KV_THREADS (core/threads.hpp).
#include "core/threads.hpp"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.hpp"

namespace kv {

void apply_thread_limit() {
  const char* s = std::getenv("KV_THREADS");
  if (!s || !*s) return;
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  if (*end || n < 1 || n > 4096) throw UsageError(std::string("KV_THREADS must be a thread count from 1 to 4096, not '") + s + "'");
  static std::unique_ptr<tbb::global_control> limit;
  limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(n));
}

int host_threads() {
  return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

}  // namespace kv
