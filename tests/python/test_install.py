"""The README's install lines and pytest example, as a newcomer runs them: a venv over
Debian's packages, pip install of ./python offline, then the example file under pytest with
the plugin found through its entry point (no -p)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def readme_example():
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- pytest example -->\n```python\n(.*?)```\n<!-- end pytest example -->", text, re.S)
    assert m, "README.md lost its pytest example markers"
    return m.group(1)


def test_the_readme_install_and_example_work(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed package alone
    # KVERIFY_LIB (set by run_tests.py): the library this build made, so setup.py need not build again.
    # A copy of ./python: pip builds in the tree it is given, and its egg-info must not land in the repository.
    src = shutil.copytree(REPO / "python", tmp_path / "python", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", str(src)],
                         env=env, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]
    env.pop("KVERIFY_LIB", None)  # the installed copy of the library
    (tmp_path / "test_my_rms_norm.py").write_text(readme_example())
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "test_my_rms_norm.py", "--kverify-out", "out/kv", "--kverify-budget", "0.2"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout
    for f in ("results.jsonl", "report.html", "junit.xml"):
        assert (tmp_path / "out" / "kv" / f).exists(), f
