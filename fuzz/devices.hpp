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
/// of the W = n*jobs runs `--shard w/W` on device w % n (CUDA_VISIBLE_DEVICES when cuda)
/// into out/<name> with its output in out/<name>.log, where <name> is device-<d> for one job
/// per device and device-<d>.job-<k> otherwise; then joins the shards' results and failures
/// into out/results.jsonl and out/failures.jsonl. With an outer shard i/N (a Slurm array
/// task's) worker w runs `--shard (i + N*w)/(N*W)`: the indices k = i mod N split W ways.
/// args are the fuzz command's own arguments; --devices, --jobs-per-device, --out and --shard
/// are dropped from them. Returns the largest worker exit code.
int run_fuzz_on_devices(const std::vector<std::string>& args, const std::string& out, int n, int jobs, bool cuda,
                        const std::string& outer_shard = "0/1");

/// The n-th device for a worker's CUDA_VISIBLE_DEVICES: the n-th entry of `visible` (the
/// parent's CUDA_VISIBLE_DEVICES, e.g. "2,3" from a scheduler) when that has one, else n.
std::string visible_device(const char* visible, int n);

}  // namespace kv
