"""Short innermost dimensions on the sim: Note [Sim short reductions] (kernels/sim/reduce.cpp: reductions of at most
32 elements per output, or of one contiguous row of at most 512 in the lanes' order, over many outputs run several
outputs at once; each output keeps the one-output path's operations, its bits, and the CPU's results within the
alignment rule, exactly where the CPU's order is kept) and
the elementwise walk's blocks of whole short runs (Note [Sim strided walks]: x[..., None] + y over a last dimension
of 3), whose results must be the CPU's."""

import pytest
import torch

import mytorch  # noqa: F401
from mytorch.testing._compare import assert_aligned

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim runtime's reduction loops"),
]

OPS = {
    "sum": lambda u, d: u.sum(d),
    "nansum": lambda u, d: u.nansum(d),
    "mean": lambda u, d: u.mean(d),
    # factors of magnitude 0.9 to 1.1, so that 512 of them neither overflow nor underflow
    "prod": lambda u, d: (
        (u.abs().clamp(0.9, 1.1) * u.sign()).prod(d) if u.is_floating_point() else u.clamp(-2, 2).prod(d)
    ),
    "amax": lambda u, d: u.amax(d),
    "amin": lambda u, d: u.amin(d),
    "max.dim": lambda u, d: u.max(d),
    "argmin": lambda u, d: u.argmin(d),
    "var": lambda u, d: u.var(d),
    "var_mean": lambda u, d: torch.var_mean(u, d),
    "norm2": lambda u, d: torch.linalg.vector_norm(u, 2, d),
    "norm1": lambda u, d: torch.linalg.vector_norm(u, 1, d),
    "norm3": lambda u, d: torch.linalg.vector_norm(u, 3, d),
    "any": lambda u, d: u.any(d),
    "all": lambda u, d: u.all(d),
    "count_nonzero": lambda u, d: torch.count_nonzero(u, d),
}
FLOAT_ONLY = {"mean", "var", "var_mean", "norm2", "norm1", "norm3", "nansum"}
# a product added to the state (x * x, Welford's delta * (v - mean)): GCC may fuse it into one FMA in one loop and
# not in another (-mfma, contraction on), so these keep the one-output path's operations but not always its bits
FUSABLE = {"norm2", "var", "var_mean"}


def _data(n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(300, n, generator=g) * 10 ** (4 * torch.rand(300, n, generator=g) - 2)).round(decimals=2)
    x[::7, 0] = -0.0  # signed zeros, ties, NaN and infinities among the rows
    x[3::11, -1] = float("nan")
    x[5::13, n // 2] = float("inf")
    x[9::17] = x[9::17, :1]
    if not dtype.is_floating_point:
        x = x.nan_to_num(3, 9, -9).clamp(-50, 50)
    return x.to(dtype)


def _pairs(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    return zip(got, want)


def _same_bits(a, b):
    a, b = a.cpu(), b.cpu()
    if a.is_floating_point():
        return (
            torch.equal(a.isnan(), b.isnan())
            and torch.equal(a.nan_to_num(), b.nan_to_num())
            and torch.equal(a.signbit()[~a.isnan()], b.signbit()[~b.isnan()])
        )
    return torch.equal(a, b)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 17, 32, 33, 60, 100, 512, 513])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_short_rows_keep_the_one_output_bits_and_match_the_cpu(n, dtype):
    x = _data(n, dtype, n)
    d = x.to("mytorch")
    # the same rows three ways: contiguous (300 x n), every other row of a wider tensor (outputs `2n` apart),
    # and columns of a transposed copy (reduced stride 300: the one-output loop's strided leaf)
    views = {
        "contiguous": d,
        "every other row": torch.stack([d, d.neg() if dtype != torch.bool else d], 1).reshape(600, n)[::2],
        "transposed": d.t().contiguous().t(),
    }
    for name, f in OPS.items():
        if name in FLOAT_ONLY and not dtype.is_floating_point:
            continue
        want = f(x, -1)
        for view, v in views.items():
            got = f(v, -1)
            one = [f(v[i], -1) for i in range(0, 300, 37)]  # one output per call: the one-output path
            for k, (a, b) in enumerate(_pairs(got, want)):
                rows = a[::37]
                mine = torch.stack([(o if isinstance(o, torch.Tensor) else o[k]) for o in one])
                if view == "transposed":  # the column loops (outputs adjacent): not these paths, the CPU's below
                    pass
                elif name in FUSABLE:
                    assert_aligned(rows, mine, None, what=f"{name} {view} {dtype} n={n}")
                else:
                    assert _same_bits(rows, mine), (name, view, dtype, n)
                if name in ("max.dim", "argmin") and k == 1 or not a.is_floating_point():
                    assert torch.equal(a.cpu(), b), (name, view, dtype, n)
                elif name in ("sum", "mean", "nansum") and n < 4 and dtype in (torch.float32, torch.float64):
                    assert _same_bits(a, b), (name, view, dtype, n)  # the CPU's order (row_sum from zero)
                elif name == "prod" and dtype == torch.bfloat16 and n > 100:
                    pass  # the CPU's bfloat16 product of hundreds of factors errs 1e20 on 1e21: no reference
                else:
                    gold = f(x.double(), -1) if dtype != torch.float64 else None
                    gold = gold[k] if isinstance(gold, tuple) else gold
                    assert_aligned(a, b, gold, what=f"{name} {view} {dtype} n={n}")


def test_short_rows_across_output_rows_and_thread_counts():
    """Outputs of a 3-D reduction whose innermost output row (5) is shorter than a group: each group stops at the
    row's end; results identical at 1, 2 and 4 threads."""
    x = torch.cat([_data(3, torch.float32, 9), _data(3, torch.float32, 10)]).reshape(20, 5, 6, 3)
    d = x.to("mytorch").permute(0, 2, 1, 3)  # outputs (20, 6, 5): the innermost output dim strided
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            results.append([d.sum(-1).cpu(), torch.linalg.vector_norm(d, dim=-1).cpu(), d.amax(-1).cpu()])
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert _same_bits(a, b)
    assert _same_bits(results[0][0], x.permute(0, 2, 1, 3).sum(-1))
    assert_aligned(results[0][1], torch.linalg.vector_norm(x.permute(0, 2, 1, 3), dim=-1), what="norm")
    assert _same_bits(results[0][2], x.permute(0, 2, 1, 3).amax(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.float16])
def test_short_runs_of_broadcast_and_strided_operands_match_the_cpu(dtype):
    """Runs of 1-9 elements along the output's fastest dimension that do not coalesce with the next (a broadcast or
    a strided operand), through the blocks of whole runs: exact for add/mul/where (CPU bits), within the rule for
    the transcendental ops; an out= whose runs are strided, and an in-place op whose runs are its own."""
    g = torch.Generator().manual_seed(5)
    for n in (1, 2, 3, 5, 7, 9):
        x = (torch.randn(257, 33, generator=g) * 8).to(dtype)
        y = (torch.randn(n, generator=g) * 8).to(dtype)
        z = (torch.randn(257, 33, 2 * n, generator=g) * 8).to(dtype)[..., ::2]  # runs strided by 2
        mask = torch.rand(257, 1, n, generator=g) > 0.5
        dx, dy, dz, dm = (t.to("mytorch") for t in (x, y, z, mask))
        cases = {
            "add broadcast": lambda a, b, c, m: a[..., None] + b,
            "mul strided": lambda a, b, c, m: a[..., None] * c,
            "sub three ways": lambda a, b, c, m: (a[..., None] - c) - b,
            "where": lambda a, b, c, m: torch.where(m, a[..., None], c),
            "maximum transposed": lambda a, b, c, m: torch.maximum(c.transpose(0, 1), b),
        }
        if dtype.is_floating_point:
            cases["atan2"] = lambda a, b, c, m: torch.atan2(a[..., None], c)
        for name, f in cases.items():
            got, want = f(dx, dy, dz, dm), f(x, y, z, mask)
            if name == "atan2":
                assert_aligned(got, want, f(x.double(), y.double(), z.double(), mask), what=f"{name} n={n}")
            else:
                assert torch.equal(got.cpu(), want), (name, dtype, n)
        out = torch.zeros(257, 33, 2 * n, dtype=dtype)
        dout = out.to("mytorch")
        torch.add(x[..., None], y, out=out[..., 1::2])
        torch.add(dx[..., None], dy, out=dout[..., 1::2])
        assert torch.equal(dout.cpu(), out), (dtype, n)  # the even positions untouched
        zz, dzz = z.clone(), dz.clone()
        zz.mul_(y)
        dzz.mul_(dy)
        assert torch.equal(dzz.cpu(), zz), (dtype, n)
