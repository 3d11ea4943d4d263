#!/usr/bin/env python3
"""Issue 24's speed figures from the files tools/bench/speed.sh leaves in OUTDIR
(kernelbench.md, torch.md, seed-wall.txt, seed-1/results.jsonl, suite-wall.txt, fuzz-*.log,
gpu-count.txt, gpu.txt, version.txt, steps.txt): writes OUTDIR/speed.json (commit, GPU, each
figure with its comparison, target and whether it is met) and OUTDIR/speed.md (the figures as
a table, then the raw kernel and PyTorch tables).

A figure whose input is missing, skipped, invalid or an error has value and met null, and one
whose torch.compile comparison is missing has met null; each gives a warning line on stderr,
and the exit code is still 0. Standard library only.
Usage: speed_table.py OUTDIR
"""
import datetime
import glob
import json
import os
import re
import statistics
import sys

NORM = "32760x1536"
ROPE = "1x32760x12x128"
CE = "4096x128256"
FLCE = "4096x2048x128256"
PHASES = ("generate_s", "reference_s", "enclose_s", "impl_s", "check_s", "total_s")


def read(out, name):
    try:
        with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def num(s):
    try:
        return float(str(s).strip().rstrip("%"))
    except ValueError:
        return None


def median(values):
    return statistics.median(values) if values else None


def table_rows(text):
    """The cells of every markdown table row of text, less header and separator rows."""
    rows = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("|") or line.startswith("|---") or line.startswith("| op |"):
            continue
        rows.append([c.strip() for c in line[1:-1 if line.endswith("|") else None].split("|")])
    return rows


def kernel_rows(text):
    """(op, shape) -> the first row's fields (speed.sh runs default configs only); a skipped,
    invalid or error row keeps its reason under 'status'."""
    out = {}
    for c in table_rows(text):
        if len(c) < 5:
            continue
        row = {"op": c[0], "shape": c[2], "config": c[3], "status": None}
        if len(c) >= 10 and num(c[4]) is not None:
            row.update(us=num(c[4]), copy_gbs=num(c[6]), of_copy=num(c[7]), extra_mib=num(c[9]))
        else:
            row["status"] = c[4] or "no value"
        out.setdefault((c[0], c[2]), row)
    return out


def torch_rows(text):
    """(op, shape, impl) -> us, or the row's error text."""
    out = {}
    for c in table_rows(text):
        if len(c) >= 5:
            out.setdefault((c[0], c[2], c[3]), num(c[4]) if num(c[4]) is not None else c[4] or "no value")
    return out


def figure(fid, name, value, unit, target, met, source, comparison=None, note=None, **extra):
    f = {"id": fid, "name": name, "value": value, "unit": unit, "comparison": comparison, "target": target,
         "met": None if value is None else met, "source": source, "note": note}
    f.update(extra)
    return f


class Kernels:
    """Figures from kernelbench.md, some against torch.md's torch.compile rows."""

    def __init__(self, out):
        self.k = kernel_rows(read(out, "kernelbench.md"))
        self.t = torch_rows(read(out, "torch.md"))
        self.why = {}

    def get(self, op, shape, field):
        r = self.k.get((op, shape))
        if r is None or r["status"]:
            self.why[op] = f"{op} {shape}: " + ("no row" if r is None else r["status"])
            return None
        return r[field]

    def compiled(self, op, shape):
        v = self.t.get((op, shape, "torch.compile"))
        return v if isinstance(v, float) else None

    def of_copy(self, op, shape, at_least, label=""):
        v = self.get(op, shape, "of_copy")
        cmp = {"what": "device copy GB/s", "value": self.get(op, shape, "copy_gbs")} if v is not None else None
        return figure(f"{op}.of_copy", f"{op}{label} bf16 {shape}, of copy", v, "%", f">= {at_least}% of copy",
                      v is not None and v >= at_least, "kernelbench.md", cmp, self.why.get(op) if v is None else None)

    def summed(self, fid, name, ops, shape, torch_op, factor, target):
        parts = [self.get(op, shape, "us") for op in ops]
        v = None if None in parts else round(sum(parts), 1)
        ref = self.compiled(torch_op, shape)
        cmp = None if ref is None else {"what": f"torch.compile {torch_op} us", "value": ref,
                                        "ratio": None if v is None else round(v / ref, 3)}
        met = None if v is None or ref is None else (v < ref if factor is None else v <= factor * ref)
        note = "; ".join(self.why[o] for o in ops if o in self.why) or None
        if ref is None:
            why = self.t.get((torch_op, shape, "torch.compile"), "no row")
            note = "; ".join(filter(None, [note, f"torch.compile {torch_op}: {why}"]))
        return figure(fid, name, v, "us", target, met, "kernelbench.md, torch.md", cmp, note)

    def figures(self):
        fl = ("fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd")
        figs = [self.summed("flce.fwd+bwd_us", f"FLCE fwd+bwd bf16 {FLCE}", fl, FLCE,
                            "fused_linear_cross_entropy.fwd+bwd", None, "faster than torch.compile")]
        extras = [self.get(op, FLCE, "extra_mib") for op in fl]
        v = None if None in extras else max(extras)
        figs.append(figure("flce.extra_mib", f"FLCE extra MiB (max of fwd, bwd) {FLCE}", v, "MiB", "<= 2048 MiB",
                           v is not None and v <= 2048, "kernelbench.md"))
        ce = ("cross_entropy.fwd", "cross_entropy.bwd")
        figs.append(self.summed("cross_entropy.fwd+bwd_us", f"CE fwd+bwd bf16 {CE}", ce, CE, "cross_entropy.fwd+bwd",
                                0.9, "<= 0.9x torch.compile"))
        figs += [self.of_copy("rms_norm.bwd", NORM, 85), self.of_copy("layer_norm.bwd", NORM, 85),
                 self.of_copy("softmax.fwd", NORM, 90), self.of_copy("rms_norm.fwd", NORM, 95)]
        figs.append(self.summed("rms_norm.fwd_us", f"rms_norm.fwd bf16 {NORM} against torch.compile", ("rms_norm.fwd",),
                                NORM, "rms_norm.fwd", None, "faster than torch.compile"))
        figs.append(self.of_copy("rope.fwd", ROPE, 95, " 3d"))
        figs += [self.of_copy(op, NORM, 100) for op in ("swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd")]
        return figs


def wall_runs(text):
    """[(run, wall_s, exit, {verdict: count})] from 'run R wall_s X exit E [verdict N ...]' lines."""
    runs = []
    for line in (text or "").splitlines():
        w = line.split()
        if len(w) >= 6 and w[0] == "run" and w[2] == "wall_s" and w[4] == "exit" and num(w[3]) is not None:
            counts = {w[i]: int(w[i + 1]) for i in range(6, len(w) - 1, 2) if w[i + 1].isdigit()}
            runs.append((w[1], num(w[3]), int(num(w[5]) or 0), counts))
    return runs


def seed_figures(out):
    runs = wall_runs(read(out, "seed-wall.txt"))
    walls = [r[1] for r in runs]
    bad = [f"run {r[0]} exited {r[2]}" for r in runs if r[2] != 0]
    v = median(walls)
    desc = "seed case (3D RoPE fwd+bwd bf16 1x32760x12x128) end to end"
    met = v is not None and v <= 1.0 and not bad
    figs = [figure("seed.wall_s", f"{desc}, median wall of {len(walls)} runs", v, "s", "<= 1.0 s", met, "seed-wall.txt",
                   note="; ".join(bad) or None, values=walls),
            figure("seed.cold_wall_s", f"{desc}, run 1 (cold) wall", walls[0] if walls else None, "s", "info", None,
                   "seed-wall.txt"),
            figure("seed.warm_wall_s", f"{desc}, median wall of runs 2-{len(walls)}", median(walls[1:]), "s", "info",
                   None, "seed-wall.txt", values=walls[1:])]
    cases = []
    for line in (read(out, "seed-1/results.jsonl") or "").splitlines():
        try:
            cases.append(json.loads(line))
        except ValueError:
            pass
    verdicts = ", ".join(f"{c.get('op')} {c.get('verdict')}" for c in cases) or None
    for p in PHASES:
        ts = [c.get("timings", {}).get(p) for c in cases]
        s = round(sum(ts), 4) if cases and all(isinstance(t, (int, float)) for t in ts) else None
        figs.append(figure(f"seed.run1.{p}", f"seed case run 1: {p} over its {len(cases)} cases", s, "s", "info", None,
                           "seed-1/results.jsonl", note=verdicts))
    return figs


def suite_figure(out):
    runs = wall_runs(read(out, "suite-wall.txt"))
    walls = [r[1] for r in runs]
    bad = [f"run {r[0]}: {r[3].get('error')} error verdicts" for r in runs if r[3].get("error")]
    bad += [f"run {r[0]}: no results" for r in runs if not r[3]]
    counts = "; ".join(f"run {r[0]}: " + ", ".join(f"{n} {k}" for k, n in r[3].items()) for r in runs if r[3])
    v = median(walls)
    note = "; ".join(filter(None, bad + [counts])) or None
    return figure("suite.wall_s", f"standard suite end to end, median wall of {len(walls)} runs", v, "s",
                  "<= 45 s, no error verdicts", v is not None and v <= 45 and not bad, "suite-wall.txt", note=note,
                  values=walls)


def fuzz_rate(text):
    """The campaign's cases/s: the 'joined:' line's (all workers), else the summary line's,
    else the last line's that gives one."""
    lines = [l for l in (text or "").splitlines() if "cases/s" in l]
    pick = ([l for l in lines if l.startswith("joined")] or [l for l in lines if l.startswith("fuzz campaign seed")]
            or lines)
    if not pick:
        return None
    found = re.findall(r"([0-9]+(?:\.[0-9]+)?)\s*cases/s", pick[-1])
    return float(found[-1]) if found else None


def fuzz_figure(out):
    gpus = num((read(out, "gpu-count.txt") or "").strip() or "x")
    logs = sorted(glob.glob(os.path.join(out, "fuzz-*.log")))
    rates = {os.path.basename(p): fuzz_rate(read(out, os.path.basename(p))) for p in logs}
    per_gpu = [r / gpus for r in rates.values() if r is not None and gpus]
    missing = [n for n, r in rates.items() if r is None]
    note = (f"{int(gpus)} GPU(s); " if gpus else "GPU count unknown; ") + "cases/s over all GPUs: " + ", ".join(
        f"{n}: {r if r is not None else 'no rate'}" for n, r in rates.items())
    v = median(per_gpu)
    return figure("fuzz.cases_per_s_per_gpu", f"fuzz cases/s per GPU, median of {len(per_gpu)} seeds", v, "cases/s",
                  ">= 1500 per GPU", v is not None and v >= 1500 and not missing, "fuzz-*.log, gpu-count.txt",
                  note=note, values=[round(r, 1) for r in per_gpu])


def identity(out):
    """(commit, dirty, gpu) from version.txt and gpu.txt, else seed-1's results and kernelbench.md."""
    commit = dirty = gpu = None
    m = re.search(r"^kverify (\S+)(.*)$", read(out, "version.txt") or "", re.M)
    if m:
        commit, dirty = m.group(1), "dirty" in m.group(2)
    else:
        for line in (read(out, "seed-1/results.jsonl") or "").splitlines():
            try:
                b = json.loads(line).get("build", {})
                commit, dirty = b.get("commit"), b.get("dirty")
                break
            except (ValueError, AttributeError):
                pass
    gpu = (read(out, "gpu.txt") or "").strip().splitlines()[:1]
    if not gpu:
        gpu = re.findall(r"^GPU: ([^;]+);", read(out, "kernelbench.md") or "", re.M)[:1]
    return commit, dirty, gpu[0].strip() if gpu else None


def fmt(v, unit=""):
    if v is None:
        return "—"
    s = f"{v:.0f}" if abs(v) >= 1000 or unit == "%" else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
    return s + ("%" if unit == "%" else f" {unit}" if unit else "")


def markdown(doc, out):
    lines = [f"# Speed, {doc['gpu'] or 'unknown GPU'}, commit {doc['commit'] or 'unknown'}"
             + (" (dirty tree)" if doc.get("dirty") else ""), "", f"Generated {doc['generated']}.", "",
             "| figure | value | comparison | target | met |", "|---|---|---|---|---|"]
    for f in doc["figures"]:
        c = f["comparison"]
        cmp = "" if not c else f"{c['what']}: {fmt(c['value'])}" + (f" ({c['ratio']}x)" if c.get("ratio") else "")
        met = {True: "yes", False: "**no**", None: "—"}[f["met"]]
        note = f" ({f['note']})" if f.get("note") else ""
        lines.append(f"| {f['name']}{note} | {fmt(f['value'], f['unit'])} | {cmp} | {f['target']} | {met} |")
    if doc["steps"]:
        lines += ["", "Steps: " + ", ".join(f"{k} exit {v}" for k, v in doc["steps"].items()) + "."]
    for title, name in (("Kernels (kverify-kernelbench)", "kernelbench.md"), ("PyTorch (torch_bench.py)", "torch.md")):
        lines += ["", f"## {title}", "", (read(out, name) or f"({name} missing)").strip()]
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = argv[0]
    if not os.path.isdir(out):
        print(f"speed_table: {out} is not a directory", file=sys.stderr)
        return 2
    commit, dirty, gpu = identity(out)
    steps = {w[0]: int(w[2]) for w in (l.split() for l in (read(out, "steps.txt") or "").splitlines())
             if len(w) == 3 and w[1] == "exit" and w[2].lstrip("-").isdigit()}
    figs = seed_figures(out) + [suite_figure(out), fuzz_figure(out)] + Kernels(out).figures()
    doc = {"commit": commit, "dirty": dirty, "gpu": gpu,
           "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "steps": steps, "figures": figs}
    for what, v in (("commit", commit), ("GPU", gpu)):
        if v is None:
            print(f"speed_table: warning: no {what} (version.txt, gpu.txt)", file=sys.stderr)
    for f in figs:
        if f["value"] is None:
            print(f"speed_table: warning: no value for {f['name']} ({f['note'] or f['source']})", file=sys.stderr)
        elif f["met"] is None and f["target"] != "info":
            print(f"speed_table: warning: cannot judge {f['name']} ({f['note'] or f['source']})", file=sys.stderr)
    with open(os.path.join(out, "speed.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    with open(os.path.join(out, "speed.md"), "w", encoding="utf-8") as fh:
        fh.write(markdown(doc, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
