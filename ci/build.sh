#!/usr/bin/env bash
# Sets up dependencies, configures and builds (incremental, ccache). With nvcc present
# the CUDA preset is built (so CI compiles the CUDA code), else the host-only preset.
# Prints the preset name on the last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh >&2
preset="${KVERIFY_PRESET:-}"
if [ -z "$preset" ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then preset=cuda; else preset=host; fi
fi
[ -f "build/$preset/CMakeCache.txt" ] || cmake --preset "$preset" >&2
cmake --build --preset "$preset" -j "$(nproc)" >&2
echo "$preset"
