"""The tolerance rule: mytorch's results against the references (one rule for the tests, the alignment suite, the
fuzzer and mytorch.optimize's checks; mytorch.testing._compare re-exports it for the tests).

Note [Alignment tolerance]
For each output element, mytorch's error against the golden value (the CPU at float64) may be at most
    max(2 * E_torch, atol + rtol * |golden|)
where E_torch is PyTorch's own largest error at that dtype on that output (the CPU at the same dtype
against the golden values; in the alignment run also PyTorch's CUDA numerics: stock torch.cuda on a GPU
machine, elsewhere for float16/bfloat16 their emulation, Note [Opmath reference]), and (atol, rtol) is the
per-dtype floor below (torch.testing.assert_close's defaults for that dtype). Integer and bool outputs must
be exact; NaN and +/-inf must sit at the same positions as in the CPU result at the same dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten

# (atol, rtol): torch.testing.assert_close's defaults for each dtype.
FLOORS = {
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-5, 1.6e-2),
    torch.float32: (1e-5, 1.3e-6),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-5, 1.3e-6),
    torch.complex128: (1e-7, 1e-7),
}


def sum_error_bound(x: torch.Tensor, dim: int, dtype: torch.dtype) -> torch.Tensor:
    """Bound on the rounding error of summing `x` along `dim` at `dtype`, in any order (sequential, tree or
    per-thread partial sums): n * eps * sum(|x|) (Higham: |s_hat - s| <= gamma_(n-1) * sum|x_i| for recursive
    summation; pairwise orders satisfy it too), plus the final rounding, eps * |s|. A reduction's error depends
    on its condition, so a fixed rtol is wrong in both directions: too tight where terms cancel, too loose
    where they do not."""
    eps = torch.finfo(dtype).eps
    x64 = x.detach().cpu().to(torch.float64)
    n = x64.shape[dim]
    return n * eps * x64.abs().sum(dim) + eps * x64.sum(dim).abs()


def assert_sum_within_bound(actual: torch.Tensor, x: torch.Tensor, dim: int, name: str = "sum") -> None:
    """`actual` (a sum of `x` along `dim` at x's dtype) against the float64 sum, within sum_error_bound."""
    gold = x.detach().cpu().to(torch.float64).sum(dim)
    err = (actual.detach().cpu().to(torch.float64) - gold).abs()
    bound = sum_error_bound(x, dim, x.dtype)
    worst = int((err - bound).argmax())
    assert bool((err <= bound).all()), (
        f"{name}: error {float(err.flatten()[worst]):.3g} exceeds the bound {float(bound.flatten()[worst]):.3g} "
        f"at element {worst}"
    )


@dataclass
class Errors:
    """Worst errors of mytorch's results against the golden values, over every output of every sample."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    bad: int = 0
    total: int = 0
    torch_err: float = 0.0
    problems: list = field(default_factory=list)

    def merge(self, other: "Errors") -> None:
        self.max_abs = max(self.max_abs, other.max_abs)
        self.max_rel = max(self.max_rel, other.max_rel)
        self.bad += other.bad
        self.total += other.total
        self.torch_err = max(self.torch_err, other.torch_err)
        for p in other.problems:
            if len(self.problems) < 3 and p not in self.problems:
                self.problems.append(p)

    @property
    def ok(self) -> bool:
        return self.bad == 0 and not self.problems

    def as_dict(self) -> dict:
        frac = self.bad / self.total if self.total else 0.0
        return {
            "max_abs": _finite(self.max_abs),
            "max_rel": _finite(self.max_rel),
            "frac_out_of_tol": frac,
            "elements": self.total,
            "torch_err": _finite(self.torch_err),
        }


def _finite(x: float):
    return x if math.isfinite(x) else str(x)


def _as_real(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        return torch.view_as_real(t.resolve_conj())
    return t


def _compare_sparse(dev: torch.Tensor, ref: torch.Tensor, gold, extra_refs) -> Errors:
    """Sparse COO results: the same layout, sizes and sparse/dense dimensions, once coalesced the same indices
    exactly and the values under the rule (the gold's values when it has the same indices)."""
    e = Errors()
    if dev.layout != ref.layout or dev.layout != torch.sparse_coo:
        e.problems.append(f"layout {dev.layout} != reference {ref.layout}")
        return e
    d, r = dev.detach().cpu().coalesce(), ref.detach().cpu().coalesce()
    if d.shape != r.shape or d.sparse_dim() != r.sparse_dim() or d.dense_dim() != r.dense_dim():
        e.problems.append(
            f"sparse {tuple(d.shape)}/{d.sparse_dim()}/{d.dense_dim()} != reference "
            f"{tuple(r.shape)}/{r.sparse_dim()}/{r.dense_dim()}"
        )
        return e
    if not torch.equal(d.indices(), r.indices()):
        e.problems.append("the coalesced indices differ from the reference's")
        return e
    g = None
    if isinstance(gold, torch.Tensor) and gold.layout == torch.sparse_coo:
        gc = gold.detach().cpu().coalesce()
        g = gc.values() if torch.equal(gc.indices(), r.indices()) else None
    return compare_tensor(d.values(), r.values(), g, ())


def compare_tensor(dev: torch.Tensor, ref: torch.Tensor, gold: torch.Tensor | None, extra_refs: tuple = ()) -> Errors:
    """dev: mytorch result (any device), ref: CPU result at the same dtype, gold: CPU float64 result."""
    if dev.layout != torch.strided or ref.layout != torch.strided:
        return _compare_sparse(dev, ref, gold, extra_refs)
    e = Errors()
    dev = dev.detach().cpu()
    ref = ref.detach().cpu()
    if dev.shape != ref.shape:
        e.problems.append(f"shape {tuple(dev.shape)} != reference {tuple(ref.shape)}")
        return e
    if dev.dtype != ref.dtype:
        e.problems.append(f"dtype {dev.dtype} != reference {ref.dtype}")
        return e
    e.total = dev.numel()
    if dev.numel() == 0:
        return e
    if not (dev.is_floating_point() or dev.is_complex()):
        bad = dev != ref
        e.bad = int(bad.sum())
        if e.bad:
            diff = (dev.to(torch.float64) - ref.to(torch.float64)).abs()
            e.max_abs = float(diff.max())
        return e
    d = _as_real(dev).to(torch.float64)
    r = _as_real(ref).to(torch.float64)
    g = _as_real(gold.detach().cpu()).to(torch.float64) if gold is not None and gold.shape == ref.shape else r
    others = tuple(_as_real(x.detach().cpu()).to(torch.float64) for x in extra_refs)
    # The common case, every value finite, without masks (a large output's comparison was most of a case's time).
    all_finite = all(bool(torch.isfinite(t).all()) for t in (d, r, g) + others)
    if all_finite:
        special = finite = None
        torch_err = max(float((other - g).abs().max()) for other in (r,) + others)
    else:
        # NaN and inf positions (with sign) must agree with PyTorch's result at this dtype.
        special = (
            (torch.isnan(d) != torch.isnan(r))
            | (torch.isinf(d) != torch.isinf(r))
            | (torch.isinf(d) & torch.isinf(r) & (torch.sign(d) != torch.sign(r)))
        )
        finite = torch.isfinite(d) & torch.isfinite(r) & torch.isfinite(g)
        torch_err = 0.0
        for other in (r,) + others:
            m = finite & torch.isfinite(other)
            if m.any():
                torch_err = max(torch_err, float((other - g).abs()[m].max()))
    atol, rtol = FLOORS.get(dev.dtype if not dev.is_complex() else dev.dtype, (1e-5, 1.3e-6))
    err = (d - g).abs()
    # A complex result's rounding error is relative to its modulus, not to each part: the real part of a product
    # can cancel to far below |z| and keep an error of eps * |z|.
    scale = g.abs() if not dev.is_complex() else torch.linalg.vector_norm(g, dim=-1, keepdim=True).expand_as(g)
    allowed = torch.clamp(atol + rtol * scale, min=2 * torch_err)
    bad = err > allowed
    if not all_finite:
        bad = special | (finite & bad)
    e.bad = int(bad.sum())
    e.torch_err = torch_err
    if all_finite or finite.any():
        fe, fg = (err, g) if all_finite else (err[finite], g[finite])
        e.max_abs = float(fe.max())
        nz = fg != 0
        if nz.any():
            e.max_rel = float((fe[nz] / fg[nz].abs()).max())
    if special is not None and special.any():
        e.max_abs = float("inf") if e.max_abs == 0 else e.max_abs
    return e


def misalignment(dev, ref, gold=None, what: str = "result", extra_refs: tuple = ()) -> str:
    """The rule of Note [Alignment tolerance] for one tensor: "" when every element of `dev` (mytorch's result, any
    device) is within max(2 * PyTorch's own error, the dtype's floor) of `gold` (the CPU at float64), PyTorch's error
    being `ref`'s (the CPU, or another reference, at dev's dtype), else what is wrong. Without `gold`, `ref` is the
    golden value and only the floor applies. Integer and bool results must be equal."""
    ref = ref.to(dev.dtype) if isinstance(ref, torch.Tensor) and ref.dtype != dev.dtype else ref
    e = compare_tensor(dev, ref, gold, extra_refs)
    if e.ok:
        return ""
    return (
        f"{what}: {e.bad} of {e.total} elements outside the alignment tolerance (max abs error "
        f"{e.max_abs:.3g}, max rel {e.max_rel:.3g}, PyTorch's own {e.torch_err:.3g}) {e.problems}"
    )


def assert_aligned(dev, ref, gold=None, what: str = "result", extra_refs: tuple = ()) -> None:
    """misalignment() as a test's assertion: the one tolerance the tests use."""
    problem = misalignment(dev, ref, gold, what, extra_refs)
    assert not problem, problem


def compare_outputs(dev, ref, gold, extra_refs=(), stat_outputs=frozenset()) -> Errors:
    """Compares two output structures (tensors, tuples, lists, numbers) leaf by leaf.

    stat_outputs: indices of saved-statistics outputs (a norm's mean / rstd) for which CPU PyTorch returns
    the input's half dtype and CUDA PyTorch float32; mytorch follows CUDA, so float32 is accepted there and
    compared after rounding to the reference's dtype."""
    e = Errors()
    dl, ds = tree_flatten(dev)
    rl, rs = tree_flatten(ref)
    gl = tree_flatten(gold)[0] if gold is not None else [None] * len(rl)
    xl = [tree_flatten(x)[0] for x in extra_refs]
    if len(dl) != len(rl):
        e.problems.append(f"{len(dl)} outputs != reference {len(rl)}")
        return e
    if len(gl) != len(rl):
        gl = [None] * len(rl)
    for i, (a, b, g) in enumerate(zip(dl, rl, gl)):
        extras = tuple(x[i] for x in xl if len(x) == len(rl) and isinstance(x[i], torch.Tensor))
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                e.problems.append(f"output {i} is {type(a).__name__}, reference is a tensor")
                continue
            if i in stat_outputs and a.dtype == torch.float32 and b.dtype in (torch.float16, torch.bfloat16):
                a = a.to(b.dtype)
            e.merge(compare_tensor(a, b, g if isinstance(g, torch.Tensor) else None, extras))
        elif isinstance(b, float) and isinstance(a, float):
            e.total += 1
            if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6 * max(1.0, abs(b))):
                e.bad += 1
        elif a != b and not (isinstance(a, torch.device) or isinstance(b, torch.device)):
            e.problems.append(f"output {i}: {a!r} != reference {b!r}")
    return e


def select_equivalent(inp: torch.Tensor, dev_idx: torch.Tensor, ref_idx: torch.Tensor) -> bool:
    """dev_idx points, along some dimension, at elements of `inp` equal to those ref_idx points at (NaN equal to
    NaN). The rule for ops that select one element per slice and return its index (median, nanmedian, kthvalue,
    mode): among equal values the index is implementation-defined (ATen's CPU kernels use std::nth_element or an
    unstable std::sort; torch's docs say so for median and kthvalue)."""
    inp, dev_idx, ref_idx = inp.detach().cpu(), dev_idx.cpu(), ref_idx.cpu()
    if dev_idx.shape != ref_idx.shape:
        return False
    for d in range(inp.dim()):
        want = list(inp.shape)
        want[d] = 1
        di, ri = dev_idx, ref_idx
        if di.dim() == inp.dim() - 1:
            di, ri = di.unsqueeze(d), ri.unsqueeze(d)
        if list(di.shape) != want or bool((di < 0).any()) or bool((di >= inp.size(d)).any()):
            continue
        a, b = inp.gather(d, di), inp.gather(d, ri)
        if torch.equal(a.isnan(), b.isnan()) if a.is_floating_point() else True:
            keep = ~(a.isnan() & b.isnan()) if a.is_floating_point() else torch.ones_like(a, dtype=torch.bool)
            if torch.equal(a[keep], b[keep]):
                return True
    return False


def phase_aligned(dev_vecs: torch.Tensor, ref_vecs: torch.Tensor, k: int):
    """The first k columns of dev_vecs each multiplied by the unit factor (a sign, or a complex phase) that best
    matches ref_vecs' column, and those factors. The rule for eigen- and singular vectors: each is defined up to such
    a factor (torch's docs say so for eigh and svd), and two correct implementations choose differently (LAPACK,
    cuSOLVER and the emulated library's Jacobi do)."""
    d, r = dev_vecs.detach().cpu(), ref_vecs.detach().cpu().to(dev_vecs.dtype)
    inner = (d[..., :k].conj() * r[..., :k]).sum(-2)
    mag = inner.abs()
    phase = torch.where(mag > 0, inner / torch.where(mag > 0, mag, torch.ones_like(mag)), torch.ones_like(inner))
    out = d.clone()
    out[..., :k] = d[..., :k] * phase.unsqueeze(-2)
    return out, phase


def same_complement(dev_vecs: torch.Tensor, ref_vecs: torch.Tensor, k: int) -> bool:
    """Columns k.. of two unitary factors span the same space (a full SVD's extra columns are any orthonormal basis of
    the complement: only that space is defined)."""
    d, r = dev_vecs.detach().cpu().to(torch.complex128), ref_vecs.detach().cpu().to(torch.complex128)
    pd = d[..., k:] @ d[..., k:].mH
    pr = r[..., k:] @ r[..., k:].mH
    tol = 50 * torch.finfo(dev_vecs.real.dtype if dev_vecs.is_complex() else dev_vecs.dtype).eps * max(1, d.shape[-2])
    return bool(((pd - pr).abs() <= tol).all())
