#!/usr/bin/env bash
# The test command: set up, build, run every test (GoogleTest + RapidCheck) with CTest.
# GPU tests skip, saying why, where there is no GPU. KVERIFY_TEST_LEVEL=full raises the
# RapidCheck case count (nightly).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=$(ci/build.sh | tail -n 1)
if [ "${KVERIFY_TEST_LEVEL:-fast}" = "full" ]; then export RC_PARAMS="max_success=1000"; fi
ctest --preset "$preset"
