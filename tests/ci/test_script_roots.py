"""The run scripts under tools/bench/ move to the repository root first (their DIST, OUT and
script paths are relative to it): each one's `cd "$(dirname "$0")/..."` must land where
CMakeLists.txt and tools/ are. Scripts that moved from bench/ to tools/bench/ kept a `/..`
that landed in tools/ (so .dist and tools/bench/torch_bench.py were not found)."""
import pathlib
import re
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cd_target(script):
    m = re.search(r'^cd "\$\(dirname "\$0"\)(/[./]*)"', script.read_text(), re.M)
    return None if m is None else (script.parent / m.group(1).strip("/")).resolve()


class ScriptRoots(unittest.TestCase):
    def test_every_bench_script_cds_to_the_root(self):
        scripts = sorted((ROOT / "tools" / "bench").glob("*.sh"))
        self.assertGreater(len(scripts), 3)
        for s in scripts:
            target = cd_target(s)
            if target is not None:
                self.assertEqual(target, ROOT, s.name)


if __name__ == "__main__":
    unittest.main()
