"""The sim runtime's reductions and scans (Note [Sim parallelism], Note [The CPU's summation order]): row, outer-
dimension and column kernels give the CPU's values, indices and bits at any thread count (the rest of the execution
model: test_sim_parallel.py)."""

import pytest
import torch

import mytorch  # noqa: F401

pytestmark = [
    pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim runtime's kernels"),
    pytest.mark.usefixtures("keep_torch_threads"),  # the tests set torch's thread count
]


def _in_each_dtype(x):
    """(dtype, x on the CPU, x on mytorch) for float32, bfloat16, float64 and int32 (NaN and infinities made finite)."""
    for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.int32):
        t = x.nan_to_num(0, 7, -7).to(dtype) if dtype == torch.int32 else x.to(dtype)
        yield dtype, t, t.to("mytorch")


def _assert_same_extremes(got, want, name, dtype):
    """The CPU's indices exactly, its values (NaN where it has NaN), and for max/min with indices the zero kept is the
    first one's (its sign)."""
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert torch.equal(a.cpu(), b) or (
            a.is_floating_point()
            and torch.equal(a.cpu().isnan(), b.isnan())
            and torch.equal(a.cpu().nan_to_num(), b.nan_to_num())
        ), (name, dtype)
        if name.startswith(("min", "max")) and a.is_floating_point():
            keep = ~b.isnan()
            assert torch.equal(a.cpu().signbit()[keep], b.signbit()[keep]), (name, dtype)


@pytest.mark.parametrize("n", [33, 60, 300, 512, 513, 2047, 2048, 2049, 5000, 70_000])
def test_row_kernels_of_variance_and_arg_reductions_match_the_cpu(n):
    """Note [Variance of a chunk in two passes] and the arg-reductions' row kernel (kernels/sim/reduce.cpp), over
    contiguous rows across the chunk boundary (2048) and split by chunk (70,000): indices exactly the CPU's, the
    first of equal values across lanes and chunks, NaN first; the variance within the alignment rule against
    float64, on data whose mean dwarfs its spread (1e6 +- 4: a one-pass sum of squares loses every digit, a float32
    mean rounded to its ulp most of them)."""
    from mytorch.testing._compare import assert_aligned

    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(n)
    x = torch.randn(3, n, generator=g)
    # row 0: the maximum at a later lane before an earlier lane's (index 40: lane 8; 65: lane 1), and again in
    # a later chunk; row 1: -0 and +0 as the minimum, all others positive; row 2: a NaN after a tie
    top = x.abs().max().item() + 1
    for j in (40, 65, 2100, n - 1):
        if j < n:
            x[0, j] = top
    x[1] = x[1].abs() + 1
    x[1, n // 3], x[1, n // 2] = -0.0, 0.0
    x[2, n // 2] = float("nan")
    x[2, n - 1] = float("nan")
    x[2, 1] = x[2].nan_to_num(-1e9).max() + 1
    rows = torch.cat([x, torch.full((1, n), float("-inf"))])
    for dtype, t, d in _in_each_dtype(rows):
        for name, f in {
            "argmax": lambda u: u.argmax(1),
            "argmin": lambda u: u.argmin(1),
            "argmax all": lambda u: u.argmax(),
            "max.dim": lambda u: u.max(1),
            "min.dim": lambda u: u.min(1),
            "argmax transposed": lambda u: u.t().contiguous().t().argmax(1),
            "max.dim transposed": lambda u: u.t().contiguous().t().max(1),
            "amax": lambda u: u.amax(1),
            "amin all": lambda u: u.amin(),
        }.items():
            _assert_same_extremes(f(d), f(t), name, dtype)
    shifted = torch.randn(4, n, generator=g) * 4 + 1e6
    for dtype in (torch.float32, torch.bfloat16):
        t = shifted.to(dtype)
        d = t.to("mytorch")
        for name, f in {
            "var": lambda u: u.var(1),
            "std all": lambda u: u.std(),
            "var_mean's var": lambda u: torch.var_mean(u, 1, correction=0)[0],
            "var_mean's mean": lambda u: torch.var_mean(u, 1, correction=0)[1],
        }.items():
            assert_aligned(f(d), f(t), f(t.double()), what=f"{name} {dtype}")


@pytest.mark.parametrize("rows", [1, 2, 33, 300])
def test_extremes_over_an_outer_dimension_match_the_cpu(rows):
    """The extremes' column loops (extreme_columns in kernels/sim/reduce.cpp): 70 outputs (two register blocks of 32
    and a tail of 6) reduced over an outer dimension of `rows`, with a later maximum after an equal earlier one, -0
    and +0 as a column's extreme, NaNs after the maximum, a column of -inf; indices exactly the CPU's, the values
    its values (NaN where it has NaN), and the zero max/min with indices keep is the first one's."""
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 70, generator=g)
    top = x.abs().max().item() + 1
    x[0, 3] = top
    x[rows - 1, 3] = top  # an equal later maximum: the first index wins
    x[:, 5] = x[:, 5].abs() + 1
    x[rows // 2, 5], x[rows - 1, 5] = -0.0, 0.0
    x[rows // 2, 40] = float("nan")
    x[rows - 1, 40] = float("nan")
    x[0, 40] = top
    x[rows - 1, 65] = float("nan")
    x[:, 69] = float("-inf")
    for dtype, t, d in _in_each_dtype(x):
        for name, f in {
            "max.dim": lambda u: u.max(0),
            "min.dim": lambda u: u.min(0),
            "argmax": lambda u: u.argmax(0),
            "argmin": lambda u: u.argmin(0),
            "amax": lambda u: u.amax(0),
            "amin": lambda u: u.amin(0),
            "max.dim of a 3-D middle dim": lambda u: u.reshape(rows, 7, 10).max(1),
        }.items():
            _assert_same_extremes(f(d), f(t), name, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_column_reductions_keep_the_one_output_bits(dtype):
    """column_totals (kernels/sim/reduce.cpp) reads a leaf's rows 32 outputs at a time: each output's result is still
    exactly the one-output path's (a column reduced alone: the same leaves, chunks and pairs; the variance within the
    alignment rule, Note [Sim short reductions]), for 70 outputs (two register blocks and a tail of 6) over 700 rows
    (three chunks), and within the alignment rule of the CPU."""
    from mytorch.testing._compare import assert_aligned

    g = torch.Generator().manual_seed(7)
    data = torch.randn(700, 70, generator=g)
    for name, f in {
        "sum": lambda u: u.sum(0),
        "mean": lambda u: u.mean(0),
        "prod": lambda u: u.prod(0),
        "2-norm": lambda u: torch.linalg.vector_norm(u, dim=0),
        "var": lambda u: u.var(0),
    }.items():
        x = (data / 8 + 1 if name == "prod" else data * 3).to(dtype)  # a product of 700 factors near 1
        d = x.to("mytorch")
        got = f(d).cpu()
        for i in (0, 31, 32, 63, 64, 69):
            one = f(d[:, i : i + 1]).cpu()  # one output: no column loop
            if name == "var":  # Welford's update: GCC may fuse its products into FMAs in one loop and not the other
                assert_aligned(got[i : i + 1], one, None, what=f"{name} {dtype} {i}")
            else:
                assert torch.equal(got[i : i + 1], one), (name, dtype, i)
        assert_aligned(f(d), f(x), f(x.double()), what=f"{name} {dtype}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int32])
def test_scans_over_an_outer_dimension_are_the_sequential_scans(dtype):
    """Note [Sim scans]: lines adjacent in memory scanned kScanCols at a time give each line's sequential bits: the
    same as the contiguous lines of the transposed copy (the one-line path), for a ragged width (not a multiple of
    kScanCols) and a batched 3-D case; cummax/cummin indices exactly the CPU's, ties and NaNs included; values
    within the alignment rule against the CPU."""
    from mytorch.testing._compare import assert_aligned

    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(11)
    x = torch.randn(300, 4, 203, generator=g).round(decimals=1)  # many ties
    x[::7, :, ::5] = float("nan")
    t = x.nan_to_num(0).mul(3).to(dtype) if dtype == torch.int32 else x.to(dtype)
    ops = {
        "cumsum": lambda u, d: u.cumsum(d),
        "cumprod": lambda u, d: (u / 8 + 1).cumprod(d) if u.is_floating_point() else u.clamp(-1, 1).cumprod(d),
        "logcumsumexp": lambda u, d: u.logcumsumexp(d),
        "cummax": lambda u, d: u.cummax(d),
        "cummin": lambda u, d: u.cummin(d),
    }
    dev = t.to("mytorch")
    for name, f in ops.items():
        if name == "logcumsumexp" and not t.is_floating_point():
            continue
        cols = f(dev, 0)  # lines adjacent: 4 x 203 columns of 300
        rows = f(dev.permute(1, 2, 0).contiguous(), 2)  # the same lines, each contiguous
        for a, b in zip(cols if isinstance(cols, tuple) else (cols,), rows if isinstance(rows, tuple) else (rows,)):
            assert torch.equal(a.permute(1, 2, 0).cpu().nan_to_num(7), b.cpu().nan_to_num(7)), name
        want = f(t, 0)
        if isinstance(cols, tuple):
            assert torch.equal(cols.indices.cpu(), want.indices), name
            cols, want = cols.values, want.values
        if name == "cumsum" or not t.is_floating_point():
            gold = None if not t.is_floating_point() else f(t.double(), 0)
            assert_aligned(cols, want, gold, what=name)


def test_long_float32_sums_match_the_cpu():
    """Sums of 1024-4M float32 elements: sequential 256-element chunks erred 3x PyTorch's own error on these (the
    leaves-and-pairs order of kernels/sim/reduce.cpp fixes it)."""
    from mytorch.testing._compare import assert_aligned

    x = torch.randn(1024, 2048, generator=torch.Generator().manual_seed(1))
    d = x.to("mytorch")
    for name, f in {"sum0": lambda t: t.sum(0), "sum1": lambda t: t.sum(1), "sum": lambda t: t.sum()}.items():
        assert_aligned(f(d), f(x), f(x.double()), what=name)
    y = torch.randn(4 * 10**6, generator=torch.Generator().manual_seed(2))
    assert_aligned(y.to("mytorch").sum(), y.sum(), y.double().sum(), what="sum of 4M")


@pytest.mark.skipif(
    __import__("platform").machine() not in ("x86_64", "AMD64"), reason="the order of x86 PyTorch's CPU sum"
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_contiguous_sums_have_the_cpus_bits(dtype):
    """Note [The CPU's summation order]: a float32/float64 sum, nansum or mean over a contiguous row of up to 32768
    elements has the CPU's bits (every length to 80, across each level of its cascade, both sides of 32768 the
    last one claimed). Values spread over six decades, so that two orders rarely round alike: the old order (in
    sequence below 33 elements, 32 lanes above) gave other float32 bits at 52 of the 81 lengths to 80."""
    g = torch.Generator().manual_seed(3)
    lengths = list(range(81)) + [127, 128, 129, 255, 256, 257, 1000, 1024, 4095, 4096, 4097, 20000, 32768]
    for n in lengths:
        x = (torch.randn(n, generator=g) * 10 ** (6 * torch.rand(n, generator=g) - 3)).to(dtype)
        xn = x.clone()
        xn[::5] = float("nan")
        for name, f, v in (
            ("sum", torch.sum, x),
            ("mean", torch.mean, x),
            ("nansum", torch.nansum, xn),
        ):
            got, want = f(v.to("mytorch")).cpu(), f(v)
            assert torch.equal(got, want) or bool(got.isnan() & want.isnan()), f"{name} of {n}: {got} != {want}"
    rows = (torch.randn(6, 37, generator=g) * 100).to(dtype)
    assert torch.equal(rows.to("mytorch").sum(-1).cpu(), rows.sum(-1))
    assert torch.equal(rows.to("mytorch").mean((0, 1)).cpu(), rows.mean((0, 1)))
