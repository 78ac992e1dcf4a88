"""Build of mytorch: setuptools hands the extension to CMake (CMakeLists.txt).

Environment:
  MYTORCH_CUDA=auto|0|1     build the cuda runtime and CUDA kernels (auto: when nvcc is found)
  MYTORCH_CUDA_ARCHS=90     CUDA architectures, CMake syntax ("90", "90a", "80;90")
  MAX_JOBS=N                parallel compile jobs (default: CPU count)
  MYTORCH_BUILD_TYPE=...    CMake build type (default Release)

`python setup.py --emu-build [SANITIZER]` builds the emulated CUDA build (kernels/emu, MYTORCH_EMU) in its own
folder under build/, optionally with a sanitizer (address), and prints the extension's path; scripts/emu.sh uses
it and loads it with MYTORCH_EXTENSION. It needs no CUDA toolkit.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# The build imports torch; an older installed mytorch must not be autoloaded into it.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"


def find_nvcc():
    for cand in (os.environ.get("CUDACXX"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.exists(cand):
            return cand
    return None


def nvidia_wheel_includes():
    """Header folders of NVIDIA's library wheels (nvidia-cublas, nvidia-cudnn-cu13): where cuBLASLt's and
    cuDNN's headers live when the toolkit under CUDA_HOME has no copy of its own."""
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    found = []
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/include", "cublas/include", "cudnn/include", "nccl/include"):
            path = os.path.join(root, sub)
            if os.path.isdir(path):
                found.append(path)
    return found


def cmake_build(with_cuda: bool, nvcc, emu: bool = False, sanitize: str = "") -> Path:
    """Configures and builds the _C target; returns the built extension."""
    import torch
    import torch.utils.cpp_extension as cpp

    flavour = ("emu" + (f"-{sanitize}" if sanitize else "")) if emu else ("cuda" if with_cuda else "sim")
    build_dir = ROOT / "build" / f"cmake-{sys.implementation.cache_tag}-{flavour}"
    build_dir.mkdir(parents=True, exist_ok=True)
    pybind_defs = []
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        val = getattr(torch._C, f"_PYBIND11_{name}", None)
        if val is not None:
            pybind_defs.append(f'PYBIND11_{name}="{val}"')
    cfg = [
        f"-DCMAKE_BUILD_TYPE={os.environ.get('MYTORCH_BUILD_TYPE', 'Release')}",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-DMYTORCH_TORCH_INCLUDE={';'.join(cpp.include_paths())}",
        f"-DMYTORCH_TORCH_LIBDIR={cpp.library_paths()[0]}",
        f"-DMYTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f"-DMYTORCH_PYBIND11_DEFS={';'.join(pybind_defs)}",
        f"-DMYTORCH_WITH_CUDA={'ON' if with_cuda else 'OFF'}",
        f"-DMYTORCH_EMU={'ON' if emu else 'OFF'}",
        f"-DMYTORCH_SANITIZE={sanitize}",
    ]
    if with_cuda:
        cfg += [f"-DCMAKE_CUDA_COMPILER={nvcc}",
                f"-DMYTORCH_CUDA_ARCHS={os.environ.get('MYTORCH_CUDA_ARCHS', '90')}",
                f"-DMYTORCH_NVIDIA_INCLUDE={';'.join(nvidia_wheel_includes())}"]
    if shutil.which("ninja"):
        cfg += ["-G", "Ninja"]
    print(f"mytorch: building the {flavour} flavour against torch {torch.__version__}", flush=True)
    subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir)] + cfg, stdout=sys.stderr)
    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 2)
    targets = ["_C", "mytorch_emu_selftest"] if emu else ["_C"]
    subprocess.check_call(["cmake", "--build", str(build_dir), "--target", *targets, "-j", jobs], stdout=sys.stderr)
    built = sorted(build_dir.glob("_C*.so"))
    if not built:
        raise RuntimeError(f"CMake produced no _C extension in {build_dir}")
    return built[0]


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        want = os.environ.get("MYTORCH_CUDA", "auto").lower()
        nvcc = find_nvcc()
        if want in ("1", "on", "true", "yes"):
            if nvcc is None:
                raise RuntimeError("MYTORCH_CUDA=1 but nvcc was not found (set CUDACXX or CUDA_HOME)")
            with_cuda = True
        elif want in ("0", "off", "false", "no"):
            with_cuda = False
        else:
            with_cuda = nvcc is not None
        built = cmake_build(with_cuda, nvcc)
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Copy then rename: a process that has the old extension loaded keeps its mapping (overwriting the
        # file in place would change the code under it).
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copyfile(built, tmp)
        os.replace(tmp, dest)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--emu-build":
    print(cmake_build(False, None, emu=True, sanitize=sys.argv[2] if len(sys.argv) > 2 else ""))
    sys.exit(0)

setup(
    ext_modules=[Extension("mytorch._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
