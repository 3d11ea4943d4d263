// `kverify fuzz --devices`: one campaign worker per device, each a shard of the same
// campaign in its own directory, joined into the campaign directory's results.jsonl.
#pragma once
#include <string>
#include <vector>

namespace kv {

/// The number of workers `--devices` asks for: "all" is every GPU when the device is cuda
/// (1 on the host), otherwise a positive count. Throws UsageError.
int fuzz_device_count(const std::string& devices, const std::string& device_kind);

/// Runs `kverify fuzz <args>` n times in parallel, worker i with `--shard i/n --out
/// out/device-i` (and CUDA_VISIBLE_DEVICES=i when cuda), its output in out/device-i.log;
/// then joins the shards' results and failures into out/results.jsonl and
/// out/failures.jsonl. args are the fuzz command's own arguments; --devices and --out are
/// dropped from them. Returns the largest worker exit code.
int run_fuzz_on_devices(const std::vector<std::string>& args, const std::string& out, int n, bool cuda);

}  // namespace kv
