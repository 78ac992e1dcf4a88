"""The alignment suite: its comparison rule, its robustness (broken, crashing and hanging kernels), the
audit tool, and the fast subset that runs in the normal suite: every OpInfo that runs on native mytorch
kernels, at float32 and bfloat16, a few samples each, must align."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mytorch
from mytorch.testing._compare import compare_outputs, compare_tensor
from conftest import ROOT


def run_align(tmp_path, *args, env=None, timeout=900):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mytorch.testing.align",
            "--no-write",
            "--no-progress",
            "--log",
            str(tmp_path / "workers.log"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def cases_by_op(path):
    out = {}
    for c in json.load(open(path))["cases"]:
        out.setdefault(c["op"], []).append(c)
    return out


def test_tolerance_rule():
    gold = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    ref = gold.to(torch.float16)
    ok = compare_tensor(gold.to(torch.float16), ref, gold)
    assert ok.ok and ok.max_abs == 0
    # Twice PyTorch's own error at the dtype is allowed, more is not.
    ref = torch.tensor([1.0, 2.0, 3.0 + 2**-9 * 2], dtype=torch.float16)  # torch's error: 0.0039
    within = torch.tensor([1.0, 2.0, 3.0 + 2**-9 * 4], dtype=torch.float16)  # 0.0078 <= 2 * 0.0039
    beyond = torch.tensor([1.0, 2.0, 3.5], dtype=torch.float16)
    assert compare_tensor(within, ref, gold).ok
    bad = compare_tensor(beyond, ref, gold)
    assert not bad.ok and bad.bad == 1 and math.isclose(bad.max_abs, 0.5)
    # Integers exact; NaN positions must agree; shapes and dtypes must agree.
    assert not compare_tensor(torch.tensor([1, 2]), torch.tensor([1, 3]), None).ok
    nan_ref = torch.tensor([float("nan"), 1.0])
    assert compare_tensor(nan_ref.clone(), nan_ref, None).ok
    assert not compare_tensor(torch.tensor([0.0, 1.0]), nan_ref, None).ok
    assert not compare_tensor(torch.ones(2), torch.ones(3), None).ok
    assert not compare_tensor(torch.ones(2, dtype=torch.float64), torch.ones(2), None).ok
    assert compare_outputs((torch.ones(2), 3), (torch.ones(2), 3), None).ok
    assert not compare_outputs((torch.ones(2), 3), (torch.ones(2), 4), None).ok


def test_opmath_reference_computes_each_operator_in_float32():
    """Note [Opmath reference]: under OpmathMode every float16/bfloat16 CPU operator computes in float32 and rounds
    its result once, in place and out= included (written back into the caller's tensor), views stay views, and the
    backward runs under it too. The CPU's own half kernels differ on these inputs (pow_ with a non-integer exponent,
    log_softmax), so a mode that did nothing would fail the first assertions."""
    from mytorch.testing._opmath import OpmathMode

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(64, generator=g) * 4 + 0.5).to(torch.float16)
    want_pow = x.float().pow(-4.1).half()
    assert not torch.equal(x.clone().pow_(-4.1), want_pow)  # the CPU's half pow_ rounds differently here
    with OpmathMode():
        y = x.clone()
        ret = y.pow_(-4.1)
        out = torch.empty(64, dtype=torch.float16)
        torch.exp(x, out=out)
        ls = torch.log_softmax(x.view(8, 8), 1)
        v = x.view(8, 8)
    assert ret is y and torch.equal(y, want_pow) and y.dtype == torch.float16
    assert torch.equal(out, x.float().exp().half())
    assert torch.equal(ls, torch.log_softmax(x.float().view(8, 8), 1).half())
    assert v._base is x  # a view, not a float32 copy
    xr = x.clone().requires_grad_()
    with OpmathMode():
        (gx,) = torch.autograd.grad(torch.linalg.vector_norm(xr, ord=-2.1), xr)
    x32 = x.float().requires_grad_()
    (g32,) = torch.autograd.grad(torch.linalg.vector_norm(x32, ord=-2.1), x32)
    assert gx.dtype == torch.float16
    # every op of the backward rounded once: within a few half ulps of the float32 chain
    assert bool(((gx.float() - g32).abs() <= 4 * torch.finfo(torch.float16).eps * g32.abs() + 1e-7).all())


def test_half_composites_align_against_both_numerics(tmp_path):
    """The half-precision composites that mismatched while only the CPU's numerics counted as PyTorch's (dist,
    vector_norm, cross_entropy: Note [Opmath reference]) align, and so do PyTorch's chunked linear_cross_entropy
    variants (which accumulated in half precision on mytorch until it took the CPU's per-device pick)."""
    out = tmp_path / "half.json"
    r = run_align(
        tmp_path,
        "--ops",
        "dist,linalg.vector_norm,nn.functional.cross_entropy,nn.functional.linear_cross_entropy",
        "--dtypes",
        "float16,bfloat16",
        "--json",
        str(out),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    cases = json.load(open(out))["cases"]
    assert len(cases) == 12
    bad = [f"{c['op']}[{c['dtype']}]: {c['verdict']} {c['detail']}" for c in cases if c["verdict"] != "aligned"]
    assert not bad, "\n".join(bad)


def test_vector_phase_rule_accepts_signs_and_phases_only():
    """Eigen- and singular vectors count as aligned when they differ from the reference's by a unit factor per
    column (and a full factor's extra columns span the same complement); any other difference is still one."""
    from mytorch.testing._cases import _settle_vectors

    A = torch.randn(5, 3, dtype=torch.complex128)
    U, S, Vh = torch.linalg.svd(A)
    phase = torch.exp(1j * torch.tensor([0.3, 2.0, -1.1], dtype=torch.float64))
    flipped = (U.clone(), S, Vh.clone())
    flipped[0][:, :3] *= phase
    flipped[2][:3] *= phase.conj().unsqueeze(-1)
    basis = torch.linalg.qr(torch.randn(2, 2, dtype=torch.complex128))[0]
    flipped[0][:, 3:] = flipped[0][:, 3:] @ basis  # another basis of the same complement
    settled, changed = _settle_vectors("linalg.svd", flipped, (U, S, Vh))
    assert changed and compare_outputs(settled, (U, S, Vh), None).ok
    wrong = (U.clone(), S, Vh.clone())
    wrong[0][:, [0, 1]] = wrong[0][:, [1, 0]]  # two singular vectors swapped: not a unit factor
    settled, _ = _settle_vectors("linalg.svd", wrong, (U, S, Vh))
    assert not compare_outputs(settled, (U, S, Vh), None).ok
    w, V = torch.linalg.eigh(A.mH @ A)
    settled, changed = _settle_vectors("linalg.eigh", (w, -V), (w, V))
    assert changed and compare_outputs(settled, (w, V), None).ok


def test_broken_crashing_and_hanging_kernels_are_reported(tmp_path):
    out = tmp_path / "hooked.json"
    r = run_align(
        tmp_path,
        "--ops",
        "neg,sin,cos,abs",
        "--dtypes",
        "float32",
        "--op-timeout",
        "10",
        "--jobs",
        "2",
        "--preload",
        "align_hooks",
        "--json",
        str(out),
        env={"PYTHONPATH": os.path.join(ROOT, "test") + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    cases = cases_by_op(out)
    neg, sin, cos, abs_ = cases["neg"][0], cases["sin"][0], cases["cos"][0], cases["abs"][0]
    assert neg["verdict"] == "mismatch" and neg["native"], neg  # a wrong native kernel is caught
    assert sin["verdict"] == "error" and "crashed" in sin["detail"], sin  # the crash did not end the run
    assert cos["verdict"] == "error" and "timed out" in cos["detail"], cos
    assert abs_["verdict"] == "aligned", abs_  # and the run went on


def _native_opinfos():
    """OpInfos the committed report saw running on native kernels alone, plus those named like a
    registered native kernel."""
    path = os.path.join(ROOT, "docs", "alignment", "sim.json")
    names = set()
    if os.path.exists(path):
        names = {c["op"] for c in json.load(open(path))["cases"] if c.get("native") and c["verdict"] == "aligned"}
    registered = {
        n.split("::")[1].split(".")[0].rstrip("_")
        for n in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    }
    from torch.testing._internal.common_methods_invocations import op_db

    names |= {o.name for o in op_db if o.name in registered}
    return sorted(names)


def test_native_subset_aligns(tmp_path):
    ops = _native_opinfos()
    assert len(ops) >= 10, ops
    out = tmp_path / "native.json"
    r = run_align(
        tmp_path, "--ops", ",".join(ops), "--dtypes", "float32,bfloat16", "--max-samples", "3", "--json", str(out)
    )
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.load(open(out))
    bad = [
        f"{c['op']}[{c['dtype']}]: {c['verdict']} {c['detail']}"
        for c in report["cases"]
        if c["verdict"] in ("mismatch", "error")
    ]
    assert not bad, "\n".join(bad)
    assert report["summary"]["aligned"] > 0


def test_audit_reports_native_and_fallback_ops():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).to("mytorch")
    x = torch.randn(2, 4, device="mytorch")
    # histogram: no device kernel in PyTorch, so a fallback (its counts need no gradient)
    report = mytorch.audit(lambda: (model(x).sum() + torch.histogram(x.detach(), bins=3)[0].sum()).backward())
    ops = report.ops
    assert ops["aten::histogram.bin_ct"] == "fallback"
    assert ops["aten::addmm"] == "native" and ops["aten::t"] == "native"
    assert "aten::threshold_backward" in ops  # backward ops are seen too
    rows = {r["op"]: r for r in report.rows}
    row = rows["aten::histogram.bin_ct"]
    assert row["calls"] == 1 and row["fallback_ops"] == ["aten::histogram.bin_ct"]
    assert abs(sum(r["time_share"] for r in report.rows) - 1) < 1e-6
    assert "aten ops on mytorch" in report.table()
    with mytorch.audit() as a:
        torch.zeros(3, device="mytorch").fill_(1)
    assert set(a.ops.values()) == {"native"}


def test_committed_coverage_is_current(tmp_path):
    """docs/coverage.md is the rendering of the committed report (docs/alignment/sim.json) with today's registered
    kernels, and a fast subset of OpInfos (FAST_SUBSET in _coverage.py: native and fallback cases of every family)
    aligns now exactly as committed: same verdict, same native/fallback split, same fallback operators. Either
    failing means the report is stale: rerun `python -m mytorch.testing.align --jobs 2` and commit docs/."""
    from mytorch.testing._coverage import FAST_SUBSET, case_key

    if torch.mytorch.runtime() != "sim":
        pytest.skip("the committed report is the sim runtime's")
    stale = "stale: rerun `python -m mytorch.testing.align --jobs 2` and commit docs/"
    # rendered in a fresh process, whose registrations are the package's alone (test modules may add kernels)
    render = (
        "import json, sys, mytorch; from mytorch.testing._report import render_coverage; "
        "sys.stdout.write(render_coverage(json.load(open('docs/alignment/sim.json'))))"
    )
    r = subprocess.run([sys.executable, "-c", render], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    docs = Path(ROOT) / "docs"
    assert r.stdout == (docs / "coverage.md").read_text(), f"docs/coverage.md is {stale}"

    committed = {(c["op"], c["dtype"]): c for c in json.load(open(docs / "alignment" / "sim.json"))["cases"]}
    out = tmp_path / "subset.json"
    r = run_align(tmp_path, "--ops", ",".join(FAST_SUBSET), "--jobs", "2", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    now = json.load(open(out))["cases"]
    assert set(FAST_SUBSET) <= {c["op"] for c in now}, "a FAST_SUBSET name is not an OpInfo"
    differ = [
        f"{c['op']}[{c['dtype']}]: now {case_key(c)}, committed "
        f"{case_key(committed[(c['op'], c['dtype'])]) if (c['op'], c['dtype']) in committed else 'absent'}"
        for c in now
        if (c["op"], c["dtype"]) not in committed or case_key(c) != case_key(committed[(c["op"], c["dtype"])])
    ]
    assert not differ, f"docs/alignment/sim.json is {stale}:\n" + "\n".join(differ)
