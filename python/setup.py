"""Builds libkverify_c.so with the repository's CMake (ci/build.sh: host preset, or cuda where
nvcc is found) and puts it in the package; KVERIFY_LIB names a library built already."""
import os
import pathlib
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

REPO = pathlib.Path(__file__).resolve().parent.parent


class BuildWithLibrary(build_py):
    def run(self):
        lib = os.environ.get("KVERIFY_LIB")
        if not lib:
            preset = subprocess.run([str(REPO / "ci" / "build.sh")], check=True, capture_output=True,
                                    text=True).stdout.strip().splitlines()[-1]
            lib = str(REPO / "build" / preset / "libkverify_c.so")
        super().run()
        dst = pathlib.Path(self.build_lib) / "kverify"
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dst / "libkverify_c.so")


setup(cmdclass={"build_py": BuildWithLibrary})
