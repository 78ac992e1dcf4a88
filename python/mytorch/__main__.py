"""`python -m mytorch`: what is installed, which runtime this process gets and why, and whether the build is
current — the first thing to run when something looks wrong (docs/troubleshooting.md)."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys

import torch

import mytorch
from mytorch import _C


def _runtime_reason(runtime: str) -> str:
    want = os.environ.get("MYTORCH_RUNTIME", "auto") or "auto"
    emu = hasattr(_C, "_emu_primary_context_active")
    if runtime == "unavailable":
        return f"MYTORCH_RUNTIME={want} asked for a runtime that cannot start here (the error says why on first use)"
    if want != "auto":
        return f"MYTORCH_RUNTIME={want}"
    if emu:
        return "auto in the emulated CUDA build (MYTORCH_EXTENSION points at it)"
    if runtime == "cuda":
        return "auto: this build has the CUDA kernels and the CUDA runtime sees a GPU"
    if _C._built_with_cuda():
        return "auto: this build has the CUDA kernels but the CUDA runtime sees no GPU (driver missing or no device)"
    return (
        "auto: this build has no CUDA kernels (built where no GPU was visible; "
        "MYTORCH_CUDA=1 bash scripts/setup.sh compiles them)"
    )


def _install() -> str:
    try:
        url = json.loads(md.distribution("mytorch").read_text("direct_url.json") or "{}")
    except md.PackageNotFoundError:
        return "not installed with pip (imported from the path)"
    where = url.get("url", "?")
    kind = "editable from" if url.get("dir_info", {}).get("editable") else "from"
    return f"{kind} {where}"


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(mytorch.__file__))))
    print(f"mytorch {md.version('mytorch') if _has_dist() else '(no package metadata)'} ({mytorch.__file__})")
    print(f"  python        {sys.executable} {sys.version.split()[0]}")
    print(f"  torch         {torch.__version__} ({os.path.dirname(torch.__file__)})")
    print(f"  extension     {_C.__file__}")
    flavour = "emu" if hasattr(_C, "_emu_primary_context_active") else ("cuda" if _C._built_with_cuda() else "sim")
    print(
        f"  build         {flavour} flavour" + (" (MYTORCH_EXTENSION)" if os.environ.get("MYTORCH_EXTENSION") else "")
    )
    print(f"  installed     {_install()}")
    autoload = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    print(
        f"  autoload      TORCH_DEVICE_BACKEND_AUTOLOAD={autoload} "
        f"({'import torch loads mytorch' if autoload == '1' else 'only import mytorch loads it'})"
    )
    try:
        rt = torch.mytorch.runtime()
    except RuntimeError as exc:
        print(f"  runtime       unavailable: {exc}")
        return 1
    print(f"  runtime       {rt} — {_runtime_reason(rt)}")
    for i in range(torch.mytorch.device_count()):
        p = torch.mytorch.get_device_properties(i)
        print(f"  device {i}      {p.name}, {p.total_memory / 2**30:.1f} GiB")
    print(f"  fallback      MYTORCH_FALLBACK={os.environ.get('MYTORCH_FALLBACK', 'warn')}")
    build = os.path.join(root, "scripts", "build.py")
    if os.path.exists(build):
        r = subprocess.run([sys.executable, build, "status"], capture_output=True, text=True, cwd=root)
        print(
            f"  build state   {(r.stdout or r.stderr).strip().removeprefix('mytorch: ')}"
            + ("" if r.returncode == 0 else " — bash scripts/setup.sh rebuilds it")
        )
    return 0


def _has_dist() -> bool:
    try:
        md.version("mytorch")
        return True
    except md.PackageNotFoundError:
        return False


if __name__ == "__main__":
    sys.exit(main())
