"""tools/bench/speed_table.py on a fabricated speed.sh output directory: targets met and missed,
missing rows giving null (never a crash), the commit and GPU in speed.json, medians of odd and
even counts, and the fuzz rate taken per GPU from the joined line. Standard library only."""
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "bench"))
import speed_table  # noqa: E402

HEAD = ("GPU: NVIDIA H100 80GB HBM3; 20 timed launches per row after 3 warm-up launches; median\n\n"
        "| op | dtype | shape | config | us | GB/s | copy GB/s | of copy | TFLOP/s | extra MiB |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n")
# op, shape, config, us, GB/s, copy GB/s, of copy, TFLOP/s, extra MiB
KERNELS = [
    ("rms_norm.fwd", "32760x1536", "num_warps=8", 70.4, 2860, 2950, "97%", "-", 0),
    ("rms_norm.bwd", "32760x1536", "num_warps=8,dw=per_sm", 118.0, 2560, 2950, "87%", "-", 6),
    ("softmax.fwd", "32760x1536", "num_warps=8", 71.9, 2800, 2950, "95%", "-", 0),
    ("softmax.bwd", "32760x1536", "num_warps=8", 104.0, 2900, 2950, "98%", "-", 0),
    ("layer_norm.fwd", "32760x1536", "num_warps=8", 72.0, 2795, 2950, "95%", "-", 0),
    ("layer_norm.bwd", "32760x1536", "num_warps=8,dw=per_sm", 130.0, 2330, 2950, "79%", "-", 6),
    ("swiglu.fwd", "32760x1536", "", 104.0, 2903, 2900, "100%", "-", 0),
    ("swiglu.bwd", "32760x1536", "", 175.0, 2880, 2900, "99%", "-", 0),
    ("geglu.fwd", "32760x1536", "", 105.0, 2875, 2900, "99%", "-", 0),
    ("rope.fwd", "1x32760x12x128", "num_warps=4", 70.0, 2810, 2880, "98%", "-", 0),
    ("rope.bwd", "1x32760x12x128", "num_warps=4", 71.0, 2780, 2880, "97%", "-", 0),
    ("cross_entropy.fwd", "4096x128256", "block_v=4096", 400.0, 2620, 2950, "89%", "-", 0),
    ("cross_entropy.bwd", "4096x128256", "block_v=4096", 600.0, 3500, 2950, "119%", "-", 0),
    ("fused_linear_cross_entropy.fwd", "4096x2048x128256", "", 3000.0, 400, 2950, "14%", "717.2", 1026),
    ("fused_linear_cross_entropy.bwd", "4096x2048x128256", "", 9000.0, 300, 2950, "10%", "717.3", 1540),
]
SEED_WALLS = [1.8, 0.9, 0.85, 0.95, 0.7]  # cold first; median 0.9, of runs 2-5 0.875
SKIPPED = "| geglu.bwd | bf16 | 32760x1536 |  | skipped: no cuda impl of geglu.bwd |||||\n"
TORCH = [("rms_norm.fwd", "32760x1536", 120.0, 95.0), ("rms_norm.fwd", "16384x4096", 150.0, 60.0),
         ("cross_entropy.fwd+bwd", "4096x128256", 2400.0, 1000.0),
         ("fused_linear_cross_entropy.fwd+bwd", "4096x2048x128256", 16000.0, 14000.0)]


def kernel_md(rows, extra=""):
    return HEAD + "".join("| {} | bf16 | {} | {} | {} | {} | {} | {} | {} | {} |\n".format(*r) for r in rows) + extra


def torch_md():
    lines = ["| op | dtype | shape | impl | us | peak MiB |", "|---|---|---|---|---|---|"]
    for op, shape, eager, compiled in TORCH:
        lines += [f"| {op} | bf16 | {shape} | torch eager | {eager} | 500 |",
                  f"| {op} | bf16 | {shape} | torch.compile | {compiled} | 400 |"]
    return "\n".join(lines) + "\n"


def seed_results():
    t = {"generate_s": 0.05, "alloc_s": 0.01, "fill_s": 0.03, "reference_s": 0.1, "enclose_s": 0.02, "impl_s": 0.001,
         "check_s": 0.2, "judge_s": 0.05, "total_s": 0.3}
    return "".join(json.dumps({"op": op, "verdict": "pass", "build": {"commit": "feedbee", "dirty": False},
                               "timings": t}) + "\n" for op in ("rope.fwd", "rope.bwd"))


def fuzz_log(rate, joined=None):
    s = (f"fuzz campaign seed 11 (shard 0/2): 3000 cases (0 curated), 3000 pass, 10 rejected; stopped by "
         f"--budget-seconds — {rate / 2} cases/s\n")
    if joined is not None:
        s += f"joined: 6000 cases, 6000 pass; this session 6000 new in 40.1 s, {joined} cases/s over 32 workers\n"
    return s + "fuzz exit 0\n"


class SpeedTableTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name)
        self.files = {
            "kernelbench.md": kernel_md(KERNELS, SKIPPED), "torch.md": torch_md(),
            "seed-wall.txt": "".join(f"run {i} wall_s {w} exit 0\n" for i, w in enumerate(SEED_WALLS, 1)),
            "suite-wall.txt": "run 1 wall_s 40.0 exit 0 pass 900 fail 0 unverifiable 3 skip 2 error 0\n"
                              "run 2 wall_s 44.0 exit 0 pass 900 fail 0 unverifiable 3 skip 2 error 0\n",
            "fuzz-11.log": fuzz_log(3000, joined=3400.0), "fuzz-12.log": fuzz_log(3000, joined=3000.0),
            "fuzz-13.log": fuzz_log(3000, joined=3200.0), "gpu-count.txt": "2\n",
            "gpu.txt": "NVIDIA H100 80GB HBM3\n",
            "version.txt": "kverify 0123abc (dirty tree)\ncompiler GNU 13.2.0, flags: -O2\nCUDA runtime 12.4\n",
            "seed-1/results.jsonl": seed_results(), "steps.txt": "info exit 0\nkernels exit 0\nfuzz exit 1\n"}

    def tearDown(self):
        self.tmp.cleanup()

    def run_table(self):
        for name, text in self.files.items():
            (self.out / name).parent.mkdir(parents=True, exist_ok=True)
            (self.out / name).write_text(text)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = speed_table.main([str(self.out)])
        self.assertEqual(rc, 0)
        self.stderr = err.getvalue()
        doc = json.loads((self.out / "speed.json").read_text())
        self.md = (self.out / "speed.md").read_text()
        return doc

    def fig(self, doc, fid):
        found = [f for f in doc["figures"] if f["id"] == fid]
        self.assertEqual(len(found), 1, f"{fid}: {[f['id'] for f in doc['figures']]}")
        return found[0]

    def test_identity_and_format(self):
        doc = self.run_table()
        self.assertEqual(doc["commit"], "0123abc")
        self.assertTrue(doc["dirty"])
        self.assertEqual(doc["gpu"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(doc["steps"], {"info": 0, "kernels": 0, "fuzz": 1})
        self.assertIn("T", doc["generated"])
        for f in doc["figures"]:
            self.assertLessEqual({"id", "name", "value", "unit", "comparison", "target", "met", "source"}, set(f))
        self.assertIn("| figure | value | comparison | target | met |", self.md)
        self.assertIn("| fused_linear_cross_entropy.bwd | bf16 |", self.md)  # the raw kernel table
        self.assertIn("| torch.compile |", self.md)  # the raw torch table

    def test_seed_median_odd_and_cold_warm(self):
        doc = self.run_table()
        f = self.fig(doc, "seed.wall_s")
        self.assertEqual(f["value"], 0.9)
        self.assertEqual(f["values"], [1.8, 0.9, 0.85, 0.95, 0.7])
        self.assertIs(f["met"], True)
        self.assertEqual(self.fig(doc, "seed.cold_wall_s")["value"], 1.8)
        warm = self.fig(doc, "seed.warm_wall_s")
        self.assertAlmostEqual(warm["value"], 0.875)  # even count: the mean of the middle two
        self.assertIsNone(warm["met"])
        gen = self.fig(doc, "seed.run1.generate_s")
        self.assertAlmostEqual(gen["value"], 0.1)
        self.assertIsNone(gen["met"])

    def test_seed_missed_and_failed_run(self):
        self.files["seed-wall.txt"] = "run 1 wall_s 1.5 exit 0\nrun 2 wall_s 1.2 exit 0\nrun 3 wall_s 0.5 exit 0\n"
        self.assertIs(self.fig(self.run_table(), "seed.wall_s")["met"], False)
        self.files["seed-wall.txt"] = "run 1 wall_s 0.5 exit 0\nrun 2 wall_s 0.4 exit 2\nrun 3 wall_s 0.5 exit 0\n"
        f = self.fig(self.run_table(), "seed.wall_s")
        self.assertIs(f["met"], False)
        self.assertIn("run 2 exited 2", f["note"])

    def test_suite_even_median_and_errors(self):
        f = self.fig(self.run_table(), "suite.wall_s")
        self.assertEqual(f["value"], 42.0)
        self.assertIs(f["met"], True)
        self.files["suite-wall.txt"] = "run 1 wall_s 30.0 exit 1 pass 900 fail 0 unverifiable 3 skip 2 error 4\n"
        f = self.fig(self.run_table(), "suite.wall_s")
        self.assertIs(f["met"], False)
        self.assertIn("4 error verdicts", f["note"])

    def test_fuzz_per_gpu_from_joined_line(self):
        f = self.fig(self.run_table(), "fuzz.cases_per_s_per_gpu")
        self.assertEqual(f["value"], 1600.0)  # median of 3400, 3000, 3200 over 2 GPUs
        self.assertIs(f["met"], True)
        self.files["gpu-count.txt"] = "4\n"
        self.assertIs(self.fig(self.run_table(), "fuzz.cases_per_s_per_gpu")["met"], False)
        # One worker: no joined line, the summary line's rate; a log without a rate misses the target.
        self.files.update({"gpu-count.txt": "1\n", "fuzz-11.log": fuzz_log(3000), "fuzz-12.log": fuzz_log(3400),
                           "fuzz-13.log": "kverify: usage error\nfuzz exit 2\n"})
        f = self.fig(self.run_table(), "fuzz.cases_per_s_per_gpu")
        self.assertEqual(f["value"], 1600.0)  # median of 1500 and 1700
        self.assertIs(f["met"], False)
        self.assertIn("fuzz-13.log: no rate", f["note"])

    def test_kernel_targets(self):
        doc = self.run_table()
        flce = self.fig(doc, "flce.fwd+bwd_us")
        self.assertEqual(flce["value"], 12000.0)
        self.assertEqual(flce["comparison"]["value"], 14000.0)
        self.assertIs(flce["met"], True)
        self.assertEqual(self.fig(doc, "flce.extra_mib")["value"], 1540.0)
        self.assertIs(self.fig(doc, "flce.extra_mib")["met"], True)
        ce = self.fig(doc, "cross_entropy.fwd+bwd_us")
        self.assertEqual(ce["comparison"]["ratio"], 1.0)  # 1000 us against torch.compile's 1000 us
        self.assertIs(ce["met"], False)
        self.files["kernelbench.md"] = kernel_md([r[:3] + (350.0 if r[0] == "cross_entropy.bwd" else r[3],) + r[4:]
                                                  for r in KERNELS])  # 750 us: 0.75x torch.compile
        self.assertIs(self.fig(self.run_table(), "cross_entropy.fwd+bwd_us")["met"], True)
        self.assertIs(self.fig(doc, "rms_norm.bwd.of_copy")["met"], True)
        self.assertIs(self.fig(doc, "layer_norm.bwd.of_copy")["met"], False)
        self.assertIs(self.fig(doc, "swiglu.fwd.of_copy")["met"], True)
        self.assertIs(self.fig(doc, "swiglu.bwd.of_copy")["met"], False)
        self.assertIs(self.fig(doc, "rope.fwd.of_copy")["met"], True)
        rms = self.fig(doc, "rms_norm.fwd_us")  # against torch.compile at the same shape, not 16384x4096
        self.assertEqual(rms["comparison"]["value"], 95.0)
        self.assertIs(rms["met"], True)

    def test_missing_and_skipped_rows_are_null(self):
        self.files["kernelbench.md"] = kernel_md([r for r in KERNELS if r[0] != "cross_entropy.bwd"], SKIPPED)
        doc = self.run_table()
        ce = self.fig(doc, "cross_entropy.fwd+bwd_us")
        self.assertIsNone(ce["value"])
        self.assertIsNone(ce["met"])
        geglu = self.fig(doc, "geglu.bwd.of_copy")
        self.assertIsNone(geglu["value"])
        self.assertIn("skipped", geglu["note"])
        self.assertIn("warning: no value for CE fwd+bwd", self.stderr)
        self.assertIn("warning: no value for geglu.bwd", self.stderr)

    def test_empty_directory(self):
        self.files = {}
        doc = self.run_table()
        self.assertIsNone(doc["commit"])
        self.assertIsNone(doc["gpu"])
        self.assertTrue(all(f["value"] is None and f["met"] is None for f in doc["figures"]))
        self.assertEqual(self.stderr.count("\n"), len(doc["figures"]) + 2)  # one line per figure, commit and GPU

    def test_command_line(self):
        tool = Path(speed_table.__file__)
        r = subprocess.run([sys.executable, str(tool), self.tmp.name], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("warning: no value for", r.stderr)
        self.assertTrue((self.out / "speed.json").is_file())
        r = subprocess.run([sys.executable, str(tool)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)

    def test_medians(self):
        self.assertEqual(speed_table.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(speed_table.median([4.0, 1.0, 3.0, 2.0]), 2.5)
        self.assertIsNone(speed_table.median([]))


if __name__ == "__main__":
    unittest.main()
