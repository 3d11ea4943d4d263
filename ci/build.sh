#!/usr/bin/env bash
# Sets up dependencies, configures and builds the host preset (incremental, ccache).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
[ -f build/host/CMakeCache.txt ] || cmake --preset host >/dev/null
cmake --build --preset host -j "$(nproc)"
