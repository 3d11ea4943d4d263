#!/usr/bin/env bash
# The test command: set up, build, run every test (GoogleTest + RapidCheck) with CTest.
# KVERIFY_TEST_LEVEL=full raises the RapidCheck case count for nightly runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/build.sh
if [ "${KVERIFY_TEST_LEVEL:-fast}" = "full" ]; then export RC_PARAMS="max_success=1000"; fi
ctest --preset host
