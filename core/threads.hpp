// The host threads a process's parallel loops may use (oneTBB): every core by default, or
// KV_THREADS. Several campaign workers on one machine (kverify fuzz --jobs-per-device) each
// get their share, so that their loops do not oversubscribe the cores.
#pragma once

namespace kv {

/// Applies KV_THREADS (a positive integer) for the rest of the process; UsageError on
/// another value. Unset or empty: no limit.
void apply_thread_limit();
/// The threads a parallel loop may use now (result lines' host_threads).
int host_threads();

}  // namespace kv
