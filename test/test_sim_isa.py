"""The sim's instruction-set variants (Note [Sim ISA variants], Note [Sim AVX-512 dense loops]): cpuid picks them and
MYTORCH_SIM_ISA caps them, each variant's object exports nothing but its entry points, the AVX-512 dense loops give
the AVX2 variant's results, and the vector conversions give c10's bits."""

import subprocess
from pathlib import Path

import pytest
import torch

import mytorch

from conftest import installed_build_dir, run_python

pytestmark = pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim runtime's kernels")


def test_isa_override_runs_the_baseline():
    r = run_python("import torch, mytorch; print(mytorch._C._sim_isa())", env={"MYTORCH_SIM_ISA": "baseline"})
    assert r.stdout.strip() == "baseline", r.stdout + r.stderr


def test_isa_override_caps_at_avx2():
    if mytorch._C._sim_isa() == "baseline":
        pytest.skip("this build or CPU runs the baseline only")
    r = run_python("import torch, mytorch; print(mytorch._C._sim_isa())", env={"MYTORCH_SIM_ISA": "avx2"})
    assert r.stdout.strip() == "avx2", r.stdout + r.stderr


def _globals(obj) -> list[str]:
    out = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_the_variant_objects_export_only_their_entry_points(isa):
    build = Path(installed_build_dir())
    obj = build / f"sim_{isa}_local.o"
    if not obj.exists():
        pytest.skip(f"this build has no {isa} variant (not x86-64, or a cuda/emu flavour)")
    ns = f"3sim{len(isa)}{isa}"  # the variant's namespace, mangled
    names = _globals(obj)
    assert names and all(ns in n for n in names), names
    # the control: before localisation the AVX2 code exports the inline functions it instantiated with its ISA
    # (e.g. red_output_offsets), which the link could otherwise pick for the baseline's calls (the AVX-512 compile,
    # the dense loops alone, may inline every one of its own: the same localisation guards it)
    parts = sorted((build / "CMakeFiles" / "mytorch_sim_avx2.dir").rglob("*.o"))
    assert parts and any(n for p in parts for n in _globals(p) if "3sim4avx2" not in n)


_VARIANT_OPS = """
import sys, torch, mytorch
g = torch.Generator().manual_seed(5)
x = torch.randn(50_001, generator=g) * 4
y = torch.rand(50_001, generator=g) * 3 + 0.05
x[:7] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, 88.5])
out = {"isa": mytorch._C._sim_isa()}
for dt in (torch.float32, torch.bfloat16, torch.float16):
    d, e = x.to(dt).to("mytorch"), y.to(dt).to("mytorch")
    for name in ("neg", "abs", "relu", "square", "reciprocal", "trunc", "exp", "exp2", "tanh", "sigmoid", "erf",
                 "log1p", "atan"):
        out[f"{name} {dt}"] = getattr(torch, name)(d if name != "log1p" else e).cpu()
    out[f"silu {dt}"] = torch.nn.functional.silu(d).cpu()
    out[f"gelu {dt}"] = torch.nn.functional.gelu(d).cpu()
    out[f"add {dt}"] = (d + e).cpu()
    out[f"mul {dt}"] = (d * 1.5).cpu()
    out[f"div {dt}"] = (d / e).cpu()
    out[f"maximum {dt}"] = torch.maximum(d, e).cpu()
    out[f"fmod {dt}"] = torch.fmod(d, e).cpu()
    out[f"lt {dt}"] = (d < e).cpu()
    out[f"atan2 {dt}"] = torch.atan2(d, e).cpu()
torch.save(out, sys.argv[1])
"""

# the ops whose functor is exact arithmetic or a conversion: the same bits from either variant
_EXACT = ("neg", "abs", "relu", "square", "reciprocal", "trunc", "add", "mul", "div", "maximum", "fmod", "lt")


def test_avx512_dense_loops_match_the_avx2_variant(tmp_path):
    """The AVX-512 compile's dense loops (Note [Sim AVX-512 dense loops]) against the AVX2 variant's on the same
    operands, float32, bfloat16 and half, specials and a remainder included: the same bits for the exact
    arithmetic and the conversions, the shared rule for libmvec's math (its 16-wide and 8-wide functions differ in
    the last place)."""
    from mytorch.testing._compare import assert_aligned

    if mytorch._C._sim_isa() != "avx512":
        pytest.skip("the AVX-512 dense loops do not run here (not built, or the CPU lacks AVX-512)")
    runs = {}
    for isa in ("avx512", "avx2"):
        code = _VARIANT_OPS.replace("sys.argv[1]", repr(str(tmp_path / f"{isa}.pt")))
        r = run_python(code, env={"MYTORCH_SIM_ISA": isa})
        assert r.returncode == 0, r.stderr
        runs[isa] = torch.load(tmp_path / f"{isa}.pt")
        assert runs[isa].pop("isa") == isa
    wide, narrow = runs["avx512"], runs["avx2"]
    differ = []
    for key, want in narrow.items():
        got = wide[key]
        if key.split()[0] in _EXACT:
            same = torch.equal(got.isnan(), want.isnan()) if got.is_floating_point() else True
            assert same and torch.equal(
                got[~want.isnan()] if got.is_floating_point() else got,
                want[~want.isnan()] if want.is_floating_point() else want,
            ), key
        else:
            assert_aligned(got, want, want.double(), what=key)
            differ.append(not torch.equal(got, want))
    # the control: the two variants are different code (libmvec's widths round differently somewhere)
    assert any(differ)


def test_half_and_bfloat16_conversions_are_c10s():
    """The AVX2 variant converts half with F16C and bfloat16 with integer shifts, 8 at a time (Note [Sim row loops]):
    the same bits as c10's scalar conversions, ties to even, NaN, infinities, -0 and subnormals included."""
    g = torch.Generator().manual_seed(3)
    bits = torch.randint(-(2**31), 2**31 - 1, (1 << 16,), generator=g, dtype=torch.int32)
    x = torch.cat([bits.view(torch.float32), torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40])])
    ties = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11], dtype=torch.float32)
    x = torch.cat([x, ties, -ties])
    d = x.to("mytorch")
    for dt in (torch.bfloat16, torch.float16):
        got, want = d.to(dt).cpu(), x.to(dt)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16)) or (
            torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~want.isnan()], want[~want.isnan()])
        ), dt
        back = want.to("mytorch").float().cpu()
        assert torch.equal(back.isnan(), want.float().isnan())
        assert torch.equal(back[~back.isnan()], want.float()[~back.isnan()])
        # and through an elementwise op's blocks: a product rounded once, as on the CPU
        assert torch.equal(
            (want.to("mytorch") * 3).cpu().view(torch.int16)[~want.isnan()], (want * 3).view(torch.int16)[~want.isnan()]
        )
