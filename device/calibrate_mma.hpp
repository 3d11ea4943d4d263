// Tensor-core accumulation probe (`kverify calibrate-mma`): how cuBLAS's bf16 x bf16 ->
// fp32 products round and block their sums on this GPU, and whether the contract FLCE's
// GPU products will declare holds on adversarial inputs (see calibrate_mma.cpp).
#pragma once
#include <nlohmann/json.hpp>

namespace kv {

/// Runs the probes on the current CUDA device (throws DeviceError on a CUDA or cuBLAS failure).
nlohmann::json calibrate_mma();

}  // namespace kv
