"""The package build: the protobuf/gRPC modules are generated from proto/
(generate.py) into the build, never taken from the source tree."""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        if not self.dry_run:
            try:
                generate.generate_modules(os.path.join(self.build_lib, "sandfence", "v1"))
            except generate.GenerateError as e:
                raise SystemExit(f"sandfence: cannot generate the API modules: {e}")


setup(cmdclass={"build_py": BuildPyWithStubs})
