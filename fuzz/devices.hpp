// `kverify fuzz --devices` (and --jobs-per-device): campaign workers per device, each a shard of the same
// campaign in its own directory, joined into the campaign directory's results.jsonl.
#pragma once
#include <string>
#include <vector>

namespace kv {

/// The number of workers `--devices` asks for: "all" is every GPU when the device is cuda
/// (1 on the host), otherwise a positive count. Throws UsageError.
int fuzz_device_count(const std::string& devices, const std::string& device_kind);

/// Runs `kverify fuzz <args>` on n devices with `jobs` workers each, in parallel: worker w
/// of the n*jobs runs `--shard w/(n*jobs)` on device w % n (CUDA_VISIBLE_DEVICES when cuda)
/// into out/<name> with its output in out/<name>.log, where <name> is device-<d> for one job
/// per device and device-<d>.job-<k> otherwise; then joins the shards' results and failures
/// into out/results.jsonl and out/failures.jsonl. args are the fuzz command's own arguments;
/// --devices, --jobs-per-device, --out and --shard are dropped from them. Returns the largest
/// worker exit code.
int run_fuzz_on_devices(const std::vector<std::string>& args, const std::string& out, int n, int jobs, bool cuda);

}  // namespace kv
