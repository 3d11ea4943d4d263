// Math calibration: the measured ulp error of the device math functions that contracts
// cite, exhaustively over fp32 inputs on the GPU, against a correctly rounded reference.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace kv {

struct MathCalibration {
  /// Measured max ulp error per function name as contracts cite it ("rsqrt", ...).
  std::map<std::string, double> max_ulps;
  nlohmann::json detail;  // per function: inputs tested, worst input, method, MPFR spot check
};

/// Runs the calibration on the current CUDA device (throws DeviceError on CUDA failure).
MathCalibration calibrate_math();

}  // namespace kv
