#!/usr/bin/env python3
"""Compile health of every CUDA kernel specialization, without a GPU.

Each .cu source is lowered to PTX once (nvcc -ptx); then ptxas compiles every entry
function in it on its own (--entry), with -v, so each specialization gets its own
registers, stack frame, spill stores/loads and compile time. The report is a JSON file;
the check fails on any spill and on any entry whose ptxas time exceeds the budget (the
first source document's bug was a ptxas stall on one specialization).

Usage: ci/compile_health.py [--out FILE] [--arch sm_90 ...] [--budget-s S] [--maxrregcount N]
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every source with device code: kernels (every .cu under kernels/, so a new kernel is
# covered without an edit here), calibration probes, the test-only kernels.
SOURCES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "kernels", "**", "*.cu"), recursive=True)) + [
    "device/calibrate_kernels.cu", "tests/test_impls_cuda.cu"]
NVCC_FLAGS = ["-std=c++20", "--expt-relaxed-constexpr", "-I" + ROOT, "-I" + os.path.join(ROOT, "tests")]

USED = re.compile(r"Used (\d+) registers")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)*\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)


def tool(name):
    for d in [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]:
        p = os.path.join(d, "bin", name)
        if d and os.path.exists(p):
            return p
    p = shutil.which(name)
    if not p:
        sys.exit(f"compile-health: {name} not found (set CUDA_HOME)")
    return p


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return names


def run(cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "compile-health.json"))
    ap.add_argument("--arch", action="append", help="sm_XX (repeatable; default sm_80, sm_90, sm_100)")
    ap.add_argument("--budget-s", type=float, default=30.0, help="ptxas seconds allowed per entry")
    ap.add_argument("--maxrregcount", type=int, help="register cap passed to ptxas (to see the spill check fire)")
    args = ap.parse_args()
    archs = args.arch or ["sm_80", "sm_90", "sm_100"]  # what the release build ships
    nvcc, ptxas = tool("nvcc"), tool("ptxas")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    git = ["git", "-C", ROOT]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    report = {"commit": commit + (" (dirty)" if dirty.strip() else ""), "nvcc": version, "budget_s": args.budget_s,
              "maxrregcount": args.maxrregcount, "sources": [], "kernels": []}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in SOURCES:
            for arch in archs:
                ptx = os.path.join(tmp, os.path.basename(src) + "." + arch + ".ptx")
                p, secs = run([nvcc, *NVCC_FLAGS, "-arch=compute_" + arch[3:], "-ptx", os.path.join(ROOT, src), "-o", ptx])
                if p.returncode != 0:
                    sys.exit(f"compile-health: nvcc failed on {src}:\n{p.stderr}")
                entries = ENTRY.findall(open(ptx).read())
                report["sources"].append({"source": src, "arch": arch, "frontend_s": round(secs, 3), "entries": len(entries)})
                for name, pretty in zip(entries, demangle(entries)):
                    cap = ["--maxrregcount", str(args.maxrregcount)] if args.maxrregcount else []
                    p, secs = run([ptxas, "-arch=" + arch, "-v", *cap, "--entry", name, ptx, "-o", os.devnull])
                    if p.returncode != 0:
                        sys.exit(f"compile-health: ptxas failed on {pretty} ({src}):\n{p.stderr}")
                    used, frame = USED.search(p.stderr), FRAME.search(p.stderr)
                    if not used or not frame:
                        sys.exit(f"compile-health: could not read ptxas -v output for {pretty}:\n{p.stderr}")
                    k = {"source": src, "arch": arch, "entry": name, "kernel": pretty, "registers": int(used.group(1)),
                         "stack_frame_bytes": int(frame.group(1)), "spill_store_bytes": int(frame.group(2)),
                         "spill_load_bytes": int(frame.group(3)), "ptxas_s": round(secs, 3)}
                    report["kernels"].append(k)
                    if k["spill_store_bytes"] or k["spill_load_bytes"]:
                        failures.append(f"spills: {pretty} ({arch}): {k['spill_store_bytes']} B stored, "
                                        f"{k['spill_load_bytes']} B loaded")
                    if secs > args.budget_s:
                        failures.append(f"compile time: {pretty} ({arch}): ptxas {secs:.1f} s > budget {args.budget_s} s")
    report["failures"] = failures
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    ks = report["kernels"]
    if not ks:
        sys.exit("compile-health: no entry functions found (is the PTX format new?)")
    print(f"compile-health: {len(ks)} specializations in {len(SOURCES)} sources, "
          f"max {max(k['registers'] for k in ks)} registers, max ptxas {max(k['ptxas_s'] for k in ks):.2f} s, "
          f"{sum(1 for k in ks if k['spill_store_bytes'] or k['spill_load_bytes'])} spilling; report {args.out}")
    for f_ in failures:
        print("FAIL " + f_)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
