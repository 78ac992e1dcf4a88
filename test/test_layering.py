"""The layers, as the build enforces them (docs/architecture.md, "Layers"; docs/contributing.md): kernels/ compiles
against the torch headers its layer allows and no others, csrc's layers point downward (python -> distributed,
ops -> aten -> core), and the op tables cannot hold a row without its functor. Each rule has its negative control: the
violation really fails to compile."""

import json
import os
import shutil
import subprocess

import torch.utils.cpp_extension

from conftest import ROOT, installed_build_dir, ninja_deps

TORCH_INCLUDE = os.path.realpath(torch.utils.cpp_extension.include_paths()[0])
ALLOWED = ("c10/util/", "c10/macros/", "torch/headeronly/")


def _kernel_command(build_dir: str, source: str) -> list[str]:
    """The compile command of kernels/<source> from compile_commands.json, as a list without -o and -c."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    entry = next(e for e in entries if e["file"].endswith(source))
    args = entry["command"].split()
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT"):
            skip = True
            continue
        if a in ("-MD",) or a.endswith(source):
            continue
        out.append(a)
    return [a for a in out if a != "ccache" and not a.endswith("/ccache")]


def test_kernels_objects_read_no_torch_header_but_the_allowed_ones():
    build_dir = installed_build_dir()
    staged = os.path.realpath(os.path.join(build_dir, "kernel_torch_include"))
    bad = {}
    n = 0
    for obj, headers in ninja_deps(build_dir).items():
        if not any(
            t in obj
            for t in ("mytorch_kernels.dir", "mytorch_sim.dir", "mytorch_sim_avx2.dir", "mytorch_sim_avx512.dir")
        ):
            continue  # the glue's objects (the device layer is the runtime, the CUDA kernels and the sim kernels)
        n += 1
        for h in headers:
            if h.startswith(TORCH_INCLUDE + os.sep):
                bad.setdefault(obj, []).append(h)  # torch's own folder: not on the kernels' include path at all
            elif h.startswith(staged + os.sep) and not os.path.relpath(h, staged).startswith(ALLOWED):
                bad.setdefault(obj, []).append(h)
    assert n >= 15, "ninja recorded no kernels objects"
    assert not bad, bad


def test_a_kernel_that_includes_aten_does_not_compile(tmp_path):
    """The negative control of the rule above: with the kernels target's own compile command, an allowed header
    compiles and ATen / c10/core do not."""
    cmd = _kernel_command(installed_build_dir(), "kernels/sim/elementwise.cpp")
    results = {}
    for name, include in [
        ("allowed", "c10/util/Half.h"),
        ("aten", "ATen/core/Tensor.h"),
        ("core", "c10/core/Device.h"),
    ]:
        src = tmp_path / f"{name}.cpp"
        src.write_text(f"#include <{include}>\nint main() {{ return 0; }}\n")
        r = subprocess.run(cmd + ["-fsyntax-only", str(src)], capture_output=True, text=True, cwd=installed_build_dir())
        results[name] = (r.returncode, r.stderr)
    assert results["allowed"][0] == 0, results["allowed"][1][-2000:]
    for name in ("aten", "core"):
        assert results[name][0] != 0 and "No such file" in results[name][1], results[name][1][-2000:]


def test_csrc_layers_point_downward():
    """core includes nothing of aten, ops, distributed or python; distributed takes the runtime from core, not from
    the op glue; aten does not reach up into ops (mytorch's own operators), distributed or python; ops builds on
    aten's glue and core only."""
    forbidden = {
        "core": ("aten", "ops", "distributed", "python"),
        "distributed": ("aten", "ops", "python"),
        "aten": ("ops", "distributed", "python"),
        "ops": ("distributed", "python"),
    }
    csrc = os.path.realpath(os.path.join(ROOT, "csrc"))
    bad = []
    for obj, headers in ninja_deps(installed_build_dir()).items():
        layer = next((name for name in forbidden if f"/csrc/{name}/" in obj), None)
        if layer is None:
            continue
        for h in headers:
            if h.startswith(csrc + os.sep) and os.path.relpath(h, csrc).split(os.sep)[0] in forbidden[layer]:
                bad.append((obj, h))
    assert not bad, bad


ROW_PROBE = """
#include "mytorch/ops_math.h"
// Instantiates every row's functor at a dtype it takes, as the loops do.
int probe(mytorch::EwOp op) {
  return mytorch::ew_visit(op, [](auto o) {
    constexpr mytorch::EwOp row = decltype(o)::value;
    if constexpr (mytorch::ew::supported<row, float>()) (void)mytorch::ew::apply<row, float>(1, 2, 3, {});
    else (void)mytorch::ew::apply<row, int64_t>(1, 2, 3, {});
    return 0;
  }, [] { return 1; });
}
"""


def test_a_pointwise_row_without_a_functor_does_not_compile(tmp_path):
    """The op table's negative control: a row added to tables/pointwise.def without its ew::Fn specialization fails
    to compile (so no row can reach a registration without math), while the table as it is compiles."""
    cmd = _kernel_command(installed_build_dir(), "kernels/sim/elementwise.cpp")
    include = tmp_path / "include"
    shutil.copytree(os.path.join(ROOT, "kernels", "include"), include)
    src = tmp_path / "probe.cpp"
    src.write_text(ROW_PROBE)
    as_is = subprocess.run(
        cmd + ["-I", str(include), "-fsyntax-only", str(src)], capture_output=True, text=True, cwd=installed_build_dir()
    )
    assert as_is.returncode == 0, as_is.stderr[-2000:]
    table = include / "mytorch" / "tables" / "pointwise.def"
    table.write_text(table.read_text() + "MT_POINTWISE(NoFunctor, 1, Float, Cast, Unary, Hand, abs, out, No)\n")
    cmd = [a for a in cmd if not a.endswith(os.path.join("kernels", "include"))]  # the copy, not the tree's
    extra = subprocess.run(
        cmd + ["-I", str(include), "-fsyntax-only", str(src)], capture_output=True, text=True, cwd=installed_build_dir()
    )
    assert extra.returncode != 0 and "Fn<mytorch::EwOp::NoFunctor>" in extra.stderr, extra.stderr[-2000:]
