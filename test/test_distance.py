"""The pairwise-distance kernels (Note [Pairwise distances], kernels/include/mytorch/distance.h): torch.cdist and
torch.pdist forward and backward for every p ATen distinguishes, with the fallback forbidden, on every runtime (the
CUDA kernels on the emulated build), against the CPU and float64."""

import math

import pytest
import torch
from conftest import at_sim_thread_counts

from mytorch.testing._compare import misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")]


def _cdist(p):
    return lambda a, b: torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")


def _problems(fn, args, dtype, what):
    """mytorch's result and gradients against the CPU's at dtype (and the float64 result as the gold)."""
    g = torch.Generator().manual_seed(7)
    cpu = [a.to(dtype).requires_grad_() for a in args]
    dev = [a.to(dtype).to("mytorch").requires_grad_() for a in args]
    ref, out = fn(*cpu), fn(*dev)
    cot = torch.randn(ref.shape, generator=g, dtype=dtype)
    ref_grads = torch.autograd.grad(ref, cpu, cot)
    dev_grads = torch.autograd.grad(out, dev, cot.to("mytorch"))
    wide = [a.double().requires_grad_() for a in args]
    gold = fn(*wide)
    gold_grads = torch.autograd.grad(gold, wide, cot.double())
    problems = [misalignment(out.detach(), ref.detach(), gold.detach(), what)]
    problems += [
        misalignment(d, r, o, f"{what} gradient {i}")
        for i, (d, r, o) in enumerate(zip(dev_grads, ref_grads, gold_grads))
    ]
    return [p for p in problems if p], ref_grads


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist_and_pdist_match_the_cpu(p, dtype):
    """Feature counts below, at and past the kernels' 8 lanes, a zero distance (its gradient is zero, not NaN),
    broadcast batch dimensions, and a size the sim splits over threads."""
    g = torch.Generator().manual_seed(int(10 * p) if math.isfinite(p) else 99)
    x1 = torch.randn(2, 5, 13, generator=g, dtype=torch.float64)
    x2 = torch.randn(2, 3, 13, generator=g, dtype=torch.float64)
    x2[:, 1] = x1[:, 2]
    rows = torch.randn(9, 3, generator=g, dtype=torch.float64)
    rows[4] = rows[1]
    cases = [
        ("cdist", _cdist(p), (x1, x2)),
        ("cdist 8 features", _cdist(p), (x1[..., :8].contiguous(), x2[..., :8].contiguous())),
        ("cdist broadcast batch", _cdist(p), (torch.randn(2, 1, 4, 6, generator=g), torch.randn(3, 5, 6, generator=g))),
        ("cdist transposed", _cdist(p), (x1.transpose(1, 2).contiguous().transpose(1, 2), x2)),
        ("cdist large", _cdist(p), (torch.randn(70, 37, generator=g), torch.randn(90, 37, generator=g))),
        ("pdist", lambda a: torch.pdist(a, p=p), (rows,)),
        ("pdist 17 features", lambda a: torch.pdist(a, p=p), (torch.randn(40, 17, generator=g),)),
        ("pdist large", lambda a: torch.pdist(a, p=p), (torch.randn(150, 21, generator=g),)),
    ]
    for name, fn, args in cases:
        problems, ref_grads = _problems(fn, args, dtype, f"{name} p={p} {dtype}")
        assert not problems, problems
        if p != 0:  # the control: the gradients compared are not all zero
            assert all(r.abs().sum() > 0 for r in ref_grads), name


@pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim's thread split (test_sim_parallel's rule)")
def test_results_do_not_depend_on_the_sim_thread_count():
    """kernels/sim/distance.cpp splits distances (pdist's pairs from any row) and gradient rows over threads: 1, 2
    and 4 threads give the same bits (Note [Sim parallelism])."""
    x = torch.randn(520, 40, generator=torch.Generator().manual_seed(5)).to("mytorch")

    def work():
        a, b = x[:300].clone().requires_grad_(), x[300:]
        out = []
        for p in (1.0, 2.0, 3.0):
            c = torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")
            q = torch.pdist(a, p=p)
            out += [c, q, *torch.autograd.grad((c, q), (a, a), (c.detach().flip(0), q.detach().flip(0)))]
        return [t.detach().cpu() for t in out]

    runs = at_sim_thread_counts(work)
    for k in (2, 4):
        assert all(torch.equal(u, v) for u, v in zip(runs[k], runs[1])), k


def test_pdist_is_cdists_upper_triangle():
    """Both walk the same pairs: pdist's i < j in row-major order are cdist(x, x)'s upper triangle."""
    x = torch.randn(33, 10, generator=torch.Generator().manual_seed(3)).to("mytorch")
    for p in (1.0, 2.0, 3.0):
        i, j = torch.triu_indices(33, 33, 1)
        full = torch.cdist(x, x, p=p, compute_mode="donot_use_mm_for_euclid_dist").cpu()
        assert torch.equal(torch.pdist(x, p=p).cpu(), full[i, j]), p


def test_empty_and_featureless_inputs_match_the_cpu():
    for a, b in [((0, 4), (3, 4)), ((2, 0), (3, 0)), ((2, 4), (0, 4)), ((0, 2, 4), (0, 3, 4))]:
        x1, x2 = torch.randn(a, requires_grad=True), torch.randn(b, requires_grad=True)
        d1, d2 = x1.detach().to("mytorch").requires_grad_(), x2.detach().to("mytorch").requires_grad_()
        ref, out = torch.cdist(x1, x2), torch.cdist(d1, d2)
        assert out.shape == ref.shape and torch.equal(out.cpu(), ref.detach()), (a, b)
        out.sum().backward()
        assert d1.grad.shape == x1.shape and not d1.grad.cpu().any(), (a, b)
    for shape in [(0, 3), (1, 3), (4, 0)]:
        x = torch.randn(shape)
        assert torch.equal(torch.pdist(x.to("mytorch")).cpu(), torch.pdist(x)), shape


def test_bad_gradients_raise_and_leave_the_inputs_alone():
    """A gradient or distance of the wrong size is refused with a message, not read past its end."""
    x = torch.randn(6, 4).to("mytorch")
    keep = x.cpu()
    dist = torch.pdist(x)
    with pytest.raises(RuntimeError, match="expected pdist of 15 elements"):
        torch.ops.aten._pdist_backward(torch.ones(15, device="mytorch"), x, 2.0, dist[:10])
    with pytest.raises(RuntimeError):
        torch.ops.aten._pdist_backward(torch.ones(20, device="mytorch"), x, 2.0, dist)
    a, b = torch.randn(3, 5, 4).to("mytorch"), torch.randn(3, 6, 4).to("mytorch")
    with pytest.raises(RuntimeError):
        torch.ops.aten._cdist_backward(
            torch.ones(3, 5, 7, device="mytorch"), a, b, 2.0, torch.ones(3, 5, 6, device="mytorch")
        )
    assert torch.equal(x.cpu(), keep)
