#!/usr/bin/env bash
# Packs what examples/liger needs on a GPU machine into DIR (default .dist-liger, git-ignored,
# small enough for the device tool's carry): the release build's libkverify_c.so (and with
# WITH_CLI=1 the kverify binary, for `kverify merge` there), stripped and xz-compressed, the shared libraries they take from Debian
# (MPFR, GMP, oneTBB), and Liger-Kernel's src/ from LIGER (default .liger: a copy of
# github.com/linkedin/Liger-Kernel, never vendored here). unpack.sh undoes it on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.dist-liger} liger=${LIGER:-.liger}
[ -f build/release/libkverify_c.so ] && [ -f build/release/kverify ] || {
  echo "pack.sh: build/release/libkverify_c.so and kverify missing: cmake --build --preset release --target kverify_c kverify" >&2
  exit 2
}
[ -d "$liger/src/liger_kernel" ] || { echo "pack.sh: no Liger-Kernel source in $liger/src" >&2; exit 2; }
rm -rf "$dir" && mkdir -p "$dir"
strip -o "$dir/libkverify_c.so" build/release/libkverify_c.so
bins=(libkverify_c.so)
if [ "${WITH_CLI:-0}" = 1 ]; then strip -o "$dir/kverify" build/release/kverify; bins+=(kverify); fi
cp -L /usr/lib/x86_64-linux-gnu/libmpfr.so.6 /usr/lib/x86_64-linux-gnu/libgmp.so.10 \
  /usr/lib/x86_64-linux-gnu/libtbb.so.12 "$dir/"
tar -C "$dir" -cJf "$dir/bin.tar.xz" "${bins[@]}" libmpfr.so.6 libgmp.so.10 libtbb.so.12
rm -f "$dir"/*.so* "$dir/kverify"
tar -C "$liger" -cJf "$dir/liger.tar.xz" src
git -C "$liger" rev-parse HEAD > "$dir/liger-commit" 2>/dev/null || cat "$liger/COMMIT" > "$dir/liger-commit" 2>/dev/null || true
du -sh "$dir"
