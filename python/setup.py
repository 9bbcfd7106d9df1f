"""Records the lazydt checkout this package is installed from (lazydt/_build_info.py), so that
a regular (non-editable) install finds <checkout>/build/liblazydt.so or builds it there on
first use. Everything else is in pyproject.toml."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    def run(self):
        super().run()
        src = os.path.dirname(HERE)
        if os.path.isfile(os.path.join(src, "include", "ldt", "core.h")):
            path = os.path.join(self.build_lib, "lazydt", "_build_info.py")
            with open(path, "w") as f:
                f.write(f"SOURCE_DIR = {src!r}\n")


setup(cmdclass={"build_py": BuildPy})
