"""The build of mytorch, in one place: which flavour to build, the CMake build itself, and whether the
installed build is up to date. setup.py (pip's entry) and scripts/setup.sh, emu.sh, test.sh use it.

    python scripts/build.py plan                 # the flavour `auto` builds here, and why
    python scripts/build.py status               # exit 0 when the installed build is up to date (prints why not)
    python scripts/build.py missing-deps         # requirements not installed yet (pip specs, one per line)
    python scripts/build.py rebuild              # rebuild the installed extension in place (editable install)
    python scripts/build.py record               # remember the installed build's state (after pip install)
    python scripts/build.py torch-ok | installed-here | has-header FILE   # exit 0 when true (for setup.sh)
    python scripts/build.py flavour cuda|emu|emu-address   # build that flavour in its own folder, print the .so
    python scripts/build.py carry DIR            # the cuda flavour for this Python and torch, packed into DIR
    python scripts/build.py carried DIR          # unpack DIR's build when it fits this machine and tree, print the .so

Flavours, each in build/cmake-<python>-<flavour>/:
  sim          kernels/ for the CPU only (the sim runtime); the default where no GPU is visible.
  cuda         also the cuda runtime and kernels/cuda/*.cu through nvcc; links the CUDA runtime statically, so
               the same build still runs sim where there is no driver.
  emu[-address]  the CUDA kernels compiled as host C++ for the emulator (kernels/emu), optionally with ASan.

Environment:
  MYTORCH_CUDA=auto|0|1     auto (default): cuda when nvcc is found AND a GPU is visible, else sim
  MYTORCH_CUDA_ARCHS=90     CUDA architectures, CMake syntax ("90", "90a", "80;90")
  MAX_JOBS=N                parallel compile jobs (default: CPU count)
  MYTORCH_BUILD_TYPE=...    CMake build type (default Release)
"""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata as md
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
STAMP = BUILD / f"setup-state-{sys.implementation.cache_tag}.json"
# What the set-up installs beside torch, and why (README, "Dependencies").
REQUIREMENTS = [
    "pytest",  # the tests
    "pytest-xdist==3.8.0",  # the test command's pytest stages on every core (scripts/test.sh; CI has two)
    "expecttest",
    "numpy",  # imported by torch.testing._internal (the OpInfo database the alignment suite runs)
    "matplotlib",  # benchmark plots and python -m mytorch.tools.memory_plot
    "transformers==5.23.0",  # the fused-attention and compile tests build small Llama / GPT-2 models from configs
    "triton==3.9.0",  # torch.compile's Triton path, tested in Triton's interpreter without a GPU (issue 17)
    "accelerate==1.15.0",  # Hugging Face Trainer needs it; the model zoo trains with Trainer on mytorch (issue 18)
    "hypothesis==6.155.2",  # PyTorch's test_nn imports it (python -m mytorch.testing.suites, issue 30)
    "torchtitan==0.3.0",  # PyTorch's LLM trainer: test_torchtitan trains its models on mytorch (issue 54)
    "setuptools>=64",
    "wheel",
    "cmake>=3.24",
    "ninja",  # the build
]
TORCH_RANGE = ((2, 11), (2, 13))
# Inputs of the compiled extension: a change to any of these needs a rebuild (Python files are live in an
# editable install and need none).
BUILD_INPUTS = ("csrc", "kernels", "CMakeLists.txt", "setup.py", "pyproject.toml", "scripts/build.py")
CONFIG_ENV = ("MYTORCH_CUDA_ARCHS", "MYTORCH_BUILD_TYPE")  # MYTORCH_CUDA acts through the flavour


def find_nvcc() -> str | None:
    for cand in (
        os.environ.get("CUDACXX"),
        shutil.which("nvcc"),
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
    ):
        if cand and os.path.exists(cand):
            return cand
    return None


def gpu_visible() -> bool:
    """An NVIDIA GPU this machine can use: a device node, the driver's GPU list, or nvidia-smi's."""
    if glob.glob("/dev/nvidia[0-9]*") or glob.glob("/proc/driver/nvidia/gpus/*"):
        return True
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            return out.returncode == 0 and "GPU" in out.stdout
        except (OSError, subprocess.SubprocessError):
            return False
    return False


def plan() -> tuple[str, str]:
    """(flavour, reason) for the installed build: "cuda" or "sim"."""
    want = os.environ.get("MYTORCH_CUDA", "auto").lower()
    nvcc = find_nvcc()
    if want in ("1", "on", "true", "yes"):
        if nvcc is None:
            raise SystemExit("MYTORCH_CUDA=1 but nvcc was not found (put it on PATH, or set CUDACXX or CUDA_HOME)")
        return "cuda", f"MYTORCH_CUDA=1 (nvcc: {nvcc})"
    if want in ("0", "off", "false", "no"):
        return "sim", "MYTORCH_CUDA=0"
    if nvcc is None:
        return "sim", "no CUDA toolkit (nvcc) found"
    if not gpu_visible():
        return "sim", f"nvcc found ({nvcc}) but no GPU is visible; MYTORCH_CUDA=1 compiles the CUDA kernels anyway"
    return "cuda", f"nvcc ({nvcc}) and a GPU found"


def nvidia_wheel_includes() -> list[str]:
    """Header folders of NVIDIA's library wheels (nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13): where
    cuBLASLt's, cuDNN's and NCCL's headers live when the toolkit under CUDA_HOME has no copy of its own."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    found = []
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/include", "cublas/include", "cudnn/include", "nccl/include"):
            path = os.path.join(root, sub)
            if os.path.isdir(path):
                found.append(path)
    return found


def cmake_build(flavour: str) -> Path:
    """Configures and builds flavour (sim, cuda, emu, emu-<sanitizer>) in its own folder; returns the _C."""
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # an older installed mytorch must not load into the build
    import torch
    import torch.utils.cpp_extension as cpp

    emu = flavour.startswith("emu")
    sanitize = flavour[4:] if flavour.startswith("emu-") else ""
    with_cuda = flavour == "cuda"
    nvcc = find_nvcc()
    if with_cuda and nvcc is None:
        raise SystemExit("the cuda flavour needs nvcc (put it on PATH, or set CUDACXX or CUDA_HOME)")
    build_dir = BUILD / f"cmake-{sys.implementation.cache_tag}-{flavour}"
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
        cfg += [
            f"-DCMAKE_CUDA_COMPILER={nvcc}",
            f"-DMYTORCH_CUDA_ARCHS={os.environ.get('MYTORCH_CUDA_ARCHS', '90')}",
            f"-DMYTORCH_NVIDIA_INCLUDE={';'.join(nvidia_wheel_includes())}",
        ]
    if shutil.which("ninja"):
        cfg += ["-G", "Ninja"]
    print(
        f"mytorch: building the {flavour} flavour against torch {torch.__version__} in {build_dir.relative_to(ROOT)}",
        file=sys.stderr,
        flush=True,
    )
    subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir)] + cfg, stdout=sys.stderr)
    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 2)
    targets = ["_C", "mytorch_emu_selftest"] if emu else ["_C"]
    subprocess.check_call(["cmake", "--build", str(build_dir), "--target", *targets, "-j", jobs], stdout=sys.stderr)
    built = sorted(build_dir.glob("_C*.so"))
    if not built:
        raise RuntimeError(f"CMake produced no _C extension in {build_dir}")
    return built[0]


def install_extension(built: Path, dest: Path) -> None:
    """Copy then rename: a process that has the old extension loaded keeps its mapping (overwriting the file
    in place would change the code under it)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.copyfile(built, tmp)
    os.replace(tmp, dest)


# ---- the installed build's state ----------------------------------------------------------------------------


def _torch_version() -> str | None:
    try:
        return md.version("torch")
    except md.PackageNotFoundError:
        return None


def torch_ok(version: str | None) -> bool:
    if version is None:
        return False
    major, minor = (int(p) for p in version.split("+")[0].split(".")[:2])
    return TORCH_RANGE[0] <= (major, minor) <= TORCH_RANGE[1]


def missing_deps() -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a fresh interpreter may have only pip's vendored copy
        from pip._vendor.packaging.requirements import Requirement
    missing = []
    for spec in REQUIREMENTS:
        req = Requirement(spec)
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            missing.append(spec)
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(spec)
    return missing


def _newest_input(flavour: str) -> tuple[float, str]:
    """The newest file the flavour compiles (the sim build does not read kernels/cuda or kernels/emu)."""
    skip = {"sim": ("kernels/cuda/", "kernels/emu/"), "cuda": ("kernels/emu/",)}.get(flavour, ())
    newest, which = 0.0, ""
    for item in BUILD_INPUTS:
        path = ROOT / item
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for f in files:
            if str(f.relative_to(ROOT)).startswith(skip):
                continue
            m = f.stat().st_mtime
            if m > newest:
                newest, which = m, str(f.relative_to(ROOT))
    return newest, which


def _installed_here() -> bool:
    """mytorch is installed editable from this checkout (not from a moved or deleted copy)."""
    try:
        dist = md.distribution("mytorch")
        url = json.loads(dist.read_text("direct_url.json") or "{}")
    except (md.PackageNotFoundError, ValueError):
        return False
    here = url.get("dir_info", {}).get("editable", False) and url.get("url") == ROOT.as_uri()
    return here and _entry_points(dist) == _declared_entry_points()


def _entry_points(dist) -> set:
    return {(ep.group, ep.name, ep.value) for ep in dist.entry_points}


def _declared_entry_points() -> set:
    """pyproject.toml's entry points: an install made before one was added or changed must be redone."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        (group, name, value) for group, eps in project.get("entry-points", {}).items() for name, value in eps.items()
    }


def _state(flavour: str) -> dict:
    return {
        "python": [sys.prefix, os.path.realpath(sys.executable)],
        "torch": _torch_version(),
        "flavour": flavour,
        "env": {k: os.environ.get(k, "") for k in CONFIG_ENV},
    }


def status() -> tuple[bool, str]:
    flavour, _ = plan()
    if not torch_ok(_torch_version()):
        return False, "torch 2.11-2.13 is not installed"
    missing = missing_deps()
    if missing:
        return False, "requirements missing: " + " ".join(missing)
    if not _installed_here():
        return False, "mytorch is not installed (editable) from this checkout"
    if not glob.glob(str(ROOT / "python" / "mytorch" / "_C*.so")):
        return False, "the extension is not built"
    try:
        saved = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return False, "no record of the last build"
    if saved.get("state") != _state(flavour):
        return False, "the configuration changed (python, torch, flavour or MYTORCH_* build settings)"
    newest, which = _newest_input(flavour)
    if newest > saved.get("built_at", 0):
        return False, f"{which} changed since the last build"
    return True, f"up to date ({flavour} build of torch {saved['state']['torch']}); nothing to do"


def record(built_at: float | None = None) -> None:
    flavour, _ = plan()
    BUILD.mkdir(exist_ok=True)
    # built_at: the newest input the build read, taken before it started (an edit made while it compiled is newer
    # and makes the next set-up rebuild)
    if built_at is None:
        built_at = _newest_input(flavour)[0]
    STAMP.write_text(json.dumps({"state": _state(flavour), "built_at": built_at}, indent=1))


# Note [A carried GPU build]
# A lent GPU machine builds the cuda flavour in about 760 s (the H200 of 2026-11-30) of the 900 a task gets, and its
# torch (2.11.0+cu130, Python 3.12) is not this project's pin. `carry` builds the cuda flavour here with an
# interpreter that has that torch (any Python and torch: the build is against whatever the interpreter imports),
# and packs the extension (xz, ~18 MB) with what it was built for and a digest of the build's inputs. The GPU call
# carries the folder; `carried` unpacks it only when the machine's torch, the Python tag and the tree's inputs are
# the same, else says which differs (and gpu_verify builds there). The extension links the CUDA runtime
# statically (toolkit 13.0 here and there) and loads with MYTORCH_EXTENSION beside the tree's python/.
def inputs_digest() -> str:
    """sha256 over the compiled extension's inputs (BUILD_INPUTS' files, paths and contents)."""
    h = hashlib.sha256()
    for name in BUILD_INPUTS:
        p = ROOT / name
        files = [p] if p.is_file() else sorted(p.rglob("*"))
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".so"):
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def carry(out: Path) -> Path:
    import torch

    built = cmake_build("cuda")
    out.mkdir(parents=True, exist_ok=True)
    packed = out / "_C.so.xz"
    packed.write_bytes(lzma.compress(built.read_bytes(), preset=1))
    manifest = {
        "torch": torch.__version__,
        "cache_tag": sys.implementation.cache_tag,
        "name": built.name,
        "digest": inputs_digest(),
        "cuda_archs": os.environ.get("MYTORCH_CUDA_ARCHS", "90"),
    }
    (out / "carry.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return packed


def carried(src: Path) -> tuple[Path | None, str]:
    """The unpacked extension of a carried build that fits this machine and tree, or None and why not."""
    if not (src / "carry.json").is_file():
        return None, f"no carried build in {src}"
    m = json.loads((src / "carry.json").read_text())
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch

    if m["torch"] != torch.__version__:
        return None, f"the carried build is for torch {m['torch']}, this machine has {torch.__version__}"
    if m["cache_tag"] != sys.implementation.cache_tag:
        return None, f"the carried build is for {m['cache_tag']}, this Python is {sys.implementation.cache_tag}"
    if m["digest"] != inputs_digest():
        return None, "csrc/, kernels/ or the build files changed since the carried build"
    dest = BUILD / "carried" / m["name"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(lzma.decompress((src / "_C.so.xz").read_bytes()))
    return dest, "ok"


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "plan"
    if cmd == "plan":
        flavour, why = plan()
        print(f"{flavour}\t{why}")
    elif cmd == "status":
        ok, why = status()
        print(f"mytorch: {why}")
        return 0 if ok else 1
    elif cmd == "missing-deps":
        print("\n".join(missing_deps()))
    elif cmd == "rebuild":
        flavour = plan()[0]
        before = _newest_input(flavour)[0]
        built = cmake_build(flavour)
        install_extension(built, ROOT / "python" / "mytorch" / built.name)
        record(before)
    elif cmd == "torch-ok":
        return 0 if torch_ok(_torch_version()) else 1
    elif cmd == "installed-here":
        return 0 if _installed_here() else 1
    elif cmd == "has-header" and len(argv) == 2:
        roots = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")] + nvidia_wheel_includes()
        return 0 if any(os.path.isfile(os.path.join(r, argv[1])) for r in roots) else 1
    elif cmd == "record":
        record()
    elif cmd == "flavour" and len(argv) == 2:
        print(cmake_build(argv[1]))
    elif cmd == "carry" and len(argv) == 2:
        print(carry(Path(argv[1]).resolve()))
    elif cmd == "carried" and len(argv) == 2:
        path, why = carried(Path(argv[1]).resolve())
        print(path if path else f"mytorch: {why}")
        return 0 if path else 1
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
