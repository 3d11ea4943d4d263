#!/usr/bin/env bash
# The main job: set up, build, and run kverify (the default suite unless arguments are
# given) on the GPU when there is one, else on the host. Writes out/results.jsonl and
# out/summary.html.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=$(ci/build.sh | tail -n 1)
if [ $# -eq 0 ]; then set -- run --out out; fi
exec "build/$preset/kverify" "$@"
