#!/usr/bin/env python3
"""Runs the Python package's tests (tests/python) on the library the build made.

Usage: run_tests.py LIBKVERIFY_C [pytest args]. Needs numpy and pytest (Debian's
python3-numpy and python3-pytest: ci/setup.sh installs them, for /usr/bin/python3); exit 77
(a skip, with the reason) where they are missing outside CI; under CI=true that fails."""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent


def main():
    lib = sys.argv[1]
    try:
        import numpy  # noqa: F401
        import pytest  # noqa: F401
    except ImportError as e:
        msg = f"{sys.executable} lacks {e.name} (Debian: python3-numpy, python3-pytest; ci/setup.sh installs them)"
        if os.environ.get("CI"):
            sys.exit("FAIL: " + msg)
        print("SKIP: " + msg)
        sys.exit(77)
    env = dict(os.environ, KVERIFY_LIB=os.path.abspath(lib), PYTHONPATH=os.pathsep.join([str(REPO / "python"), str(HERE)]))
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE), *sys.argv[2:]],
                             env=env))


if __name__ == "__main__":
    main()
