"""pip's entry to the build: setuptools hands the extension to scripts/build.py (CMake, CMakeLists.txt), which
picks the flavour (sim, or cuda where nvcc and a GPU are present; MYTORCH_CUDA=0|1 decides otherwise) and says
why. scripts/setup.sh is the usual way in; `python scripts/build.py --help` lists the settings."""

import importlib.util
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_spec = importlib.util.spec_from_file_location(
    "mytorch_build", Path(__file__).resolve().parent / "scripts" / "build.py"
)
mytorch_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mytorch_build)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        flavour, why = mytorch_build.plan()
        print(f"mytorch: {flavour} build ({why})", file=sys.stderr, flush=True)
        mytorch_build.install_extension(mytorch_build.cmake_build(flavour), Path(self.get_ext_fullpath(ext.name)))


setup(
    ext_modules=[Extension("mytorch._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
