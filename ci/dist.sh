#!/usr/bin/env bash
# Builds the self-contained GPU binaries (release preset: sm_80/90/100, static libstdc++,
# libgcc, MPFR/GMP, qd, xxhash and cudart) and gathers them in .dist/ with the one shared
# library Debian ships only as such (oneTBB), found through an $ORIGIN rpath.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh >&2
[ -f build/release/CMakeCache.txt ] || cmake --preset release >&2
cmake --build --preset release -j "$(nproc)" >&2
rm -rf .dist && mkdir -p .dist
cp build/release/kverify build/release/kverify-refbench build/release/kverify-kernelbench build/release/tests/kverify-testbin build/release/tests/kv_tests .dist/
cp build/release/examples/plugin/libkverify_example_plugin.so build/release/examples/plugin/libkverify_bad_abi_plugin.so .dist/
cp build/release/libkverify_c.so .dist/  # the Python package's library (KVERIFY_LIB), with the
cp -L /usr/lib/x86_64-linux-gnu/libmpfr.so.6 /usr/lib/x86_64-linux-gnu/libgmp.so.10 .dist/  # MPFR it takes shared
cp -L /usr/lib/x86_64-linux-gnu/libtbb.so.12 .dist/
ls -la .dist >&2
