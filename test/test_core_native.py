"""The core tensor ops run on mytorch's own kernels: with the fallback forbidden, each op of the core-kernel
list runs (forward and, for differentiable ones, backward) and matches the CPU."""

import pytest
import torch

from mytorch.testing._compare import assert_aligned, compare_tensor

g = torch.Generator().manual_seed(0)
X = torch.randn(6, 7, generator=g)
Y = torch.randn(6, 7, generator=g).abs() + 0.5
I = torch.randint(-20, 20, (6, 7), generator=g)  # noqa: E741 - the integer operand, beside X and J
J = torch.randint(1, 5, (6, 7), generator=g)
B = X > 0
IDX = torch.tensor([0, 2, 5])

CASES = {
    # binary / ternary
    "add": lambda x, y, i, j, b, ix: torch.add(x, y, alpha=2),
    "sub": lambda x, y, i, j, b, ix: torch.sub(x, y, alpha=0.5),
    "mul": lambda x, y, i, j, b, ix: x * y,
    "div": lambda x, y, i, j, b, ix: x / y,
    "div_trunc": lambda x, y, i, j, b, ix: torch.div(i, j, rounding_mode="trunc"),
    "div_floor": lambda x, y, i, j, b, ix: torch.div(x, y, rounding_mode="floor"),
    "remainder": lambda x, y, i, j, b, ix: torch.remainder(i, j),
    "fmod": lambda x, y, i, j, b, ix: torch.fmod(x, y),
    "pow": lambda x, y, i, j, b, ix: torch.pow(y, x),
    "maximum": lambda x, y, i, j, b, ix: torch.maximum(x, y),
    "minimum": lambda x, y, i, j, b, ix: torch.minimum(x, y),
    "atan2": lambda x, y, i, j, b, ix: torch.atan2(x, y),
    "copysign": lambda x, y, i, j, b, ix: torch.copysign(y, x),
    "eq": lambda x, y, i, j, b, ix: i == j,
    "lt": lambda x, y, i, j, b, ix: x < y,
    "ge": lambda x, y, i, j, b, ix: x >= 0.1,
    "logical": lambda x, y, i, j, b, ix: torch.logical_xor(b, torch.logical_or(b, ~b)),
    "bitwise": lambda x, y, i, j, b, ix: (i & j) | (i ^ 3),
    "shift": lambda x, y, i, j, b, ix: (i << 2) >> j,
    "where": lambda x, y, i, j, b, ix: torch.where(b, x, y),
    "clamp": lambda x, y, i, j, b, ix: x.clamp(-0.3, 0.4),
    "clamp_t": lambda x, y, i, j, b, ix: x.clamp(min=-y, max=y),
    "lerp": lambda x, y, i, j, b, ix: torch.lerp(x, y, 0.3),
    "addcmul": lambda x, y, i, j, b, ix: torch.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda x, y, i, j, b, ix: torch.addcdiv(x, x, y, value=0.5),
    "masked_fill": lambda x, y, i, j, b, ix: x.masked_fill(b, 1.5),
    "hypot": lambda x, y, i, j, b, ix: torch.hypot(x, y),
    # unary
    **{
        f"u_{n}": (lambda n: lambda x, y, i, j, b, ix: getattr(torch, n)(x))(n)
        for n in [
            "neg",
            "abs",
            "sign",
            "exp",
            "exp2",
            "expm1",
            "sin",
            "cos",
            "tan",
            "tanh",
            "sigmoid",
            "erf",
            "floor",
            "ceil",
            "round",
            "trunc",
            "frac",
            "isnan",
            "isinf",
            "isfinite",
            "sinh",
        ]
    },
    **{
        f"u_{n}": (lambda n: lambda x, y, i, j, b, ix: getattr(torch, n)(y))(n)
        for n in ["log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal"]
    },
    "erfinv": lambda x, y, i, j, b, ix: torch.erfinv(x * 0.4),
    "nan_to_num": lambda x, y, i, j, b, ix: torch.nan_to_num(x / 0),
    "logical_not": lambda x, y, i, j, b, ix: torch.logical_not(i),
    "to_half": lambda x, y, i, j, b, ix: x.half(),
    # reductions
    "sum": lambda x, y, i, j, b, ix: x.sum(1),
    "nansum": lambda x, y, i, j, b, ix: torch.nansum(x.log(), 1),
    "mean": lambda x, y, i, j, b, ix: x.mean(0, keepdim=True),
    "prod": lambda x, y, i, j, b, ix: y.prod(1),
    "amax": lambda x, y, i, j, b, ix: x.amax(1),
    "amin": lambda x, y, i, j, b, ix: x.amin(),
    "max_dim": lambda x, y, i, j, b, ix: x.max(1),
    "min_dim": lambda x, y, i, j, b, ix: x.min(0),
    "argmax": lambda x, y, i, j, b, ix: x.argmax(),
    "argmin": lambda x, y, i, j, b, ix: x.argmin(1),
    "var": lambda x, y, i, j, b, ix: x.var(1),
    "std": lambda x, y, i, j, b, ix: x.std(0),
    "var_mean": lambda x, y, i, j, b, ix: torch.var_mean(x, 1),
    "std_mean": lambda x, y, i, j, b, ix: torch.std_mean(x),
    "norm": lambda x, y, i, j, b, ix: torch.linalg.vector_norm(x, 3, 1),
    "logsumexp": lambda x, y, i, j, b, ix: torch.logsumexp(x, 1),
    "all": lambda x, y, i, j, b, ix: b.all(1),
    "any": lambda x, y, i, j, b, ix: b.any(),
    "cumsum": lambda x, y, i, j, b, ix: x.cumsum(1),
    "cumprod": lambda x, y, i, j, b, ix: y.cumprod(0),
    "count_nonzero": lambda x, y, i, j, b, ix: torch.count_nonzero(i, 1),
    # indexing and data movement
    "cat": lambda x, y, i, j, b, ix: torch.cat([x, y], 1),
    "index_select": lambda x, y, i, j, b, ix: x.index_select(0, ix),
    "gather": lambda x, y, i, j, b, ix: x.gather(1, j),
    "scatter": lambda x, y, i, j, b, ix: torch.zeros_like(x).scatter(1, j, y),
    "scatter_add": lambda x, y, i, j, b, ix: torch.zeros_like(x).scatter_add(1, j, y),
    "scatter_reduce": lambda x, y, i, j, b, ix: x.scatter_reduce(1, j, y, "amax", include_self=False),
    "index": lambda x, y, i, j, b, ix: x[ix, 1:],
    "index_put": lambda x, y, i, j, b, ix: x.index_put((ix,), y[:3], accumulate=True),
    "index_add": lambda x, y, i, j, b, ix: x.index_add(0, ix, y[:3]),
    "index_copy": lambda x, y, i, j, b, ix: x.index_copy(0, ix, y[:3]),
    "masked_select": lambda x, y, i, j, b, ix: x.masked_select(b),
    "masked_scatter": lambda x, y, i, j, b, ix: x.masked_scatter(b, y),
    "nonzero": lambda x, y, i, j, b, ix: b.nonzero(),
    "take": lambda x, y, i, j, b, ix: x.take(ix),
    "flip": lambda x, y, i, j, b, ix: x.flip(0, 1),
    "roll": lambda x, y, i, j, b, ix: x.roll(2, 1),
    "repeat": lambda x, y, i, j, b, ix: x.repeat(2, 1, 2),
    "tril": lambda x, y, i, j, b, ix: x.tril(1),
    "triu": lambda x, y, i, j, b, ix: x.triu(-1),
    "sort": lambda x, y, i, j, b, ix: x.sort(1, descending=True),
    "topk": lambda x, y, i, j, b, ix: x.topk(3, 1),
    "unique": lambda x, y, i, j, b, ix: torch.unique(j, return_inverse=True, return_counts=True),
    "isin": lambda x, y, i, j, b, ix: (
        torch.isin(i, j),
        torch.isin(i, ix, invert=True),
        torch.isin(x, x[2]),
        torch.isin(i, 3),
        torch.isin(2, j),
        torch.isin(x.t(), x[1:3].to(torch.float64)),
    ),
}


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.native
def test_runs_natively_and_matches_cpu(name):
    fn = CASES[name]
    ref = fn(X, Y, I, J, B, IDX)
    dev = fn(*(t.to("mytorch") for t in (X, Y, I, J, B, IDX)))
    gold = fn(X.double(), Y.double(), I, J, B, IDX)
    for r, d, g in zip(_tuple(ref), _tuple(dev), _tuple(gold)):
        assert d.device.type == "mytorch"
        assert_aligned(d, r, g if g.is_floating_point() and r.is_floating_point() else None, name)


@pytest.mark.native
def test_factories_and_random_natively():
    assert torch.equal(torch.arange(3, 20, 4, device="mytorch").cpu(), torch.arange(3, 20, 4))
    torch.testing.assert_close(torch.linspace(-1, 2, 11, device="mytorch").cpu(), torch.linspace(-1, 2, 11))
    torch.mytorch.manual_seed(3)
    p = torch.randperm(50, device="mytorch").cpu()
    assert sorted(p.tolist()) == list(range(50))
    torch.mytorch.manual_seed(3)
    assert torch.equal(torch.randperm(50, device="mytorch").cpu(), p)
    m = torch.multinomial(torch.tensor([0.2, 0.0, 0.8], device="mytorch"), 200, replacement=True).cpu()
    assert 1 not in m.tolist()
    x = torch.ones(100, device="mytorch", requires_grad=True)
    torch.nn.functional.dropout(x, 0.3).sum().backward()
    assert set(x.grad.cpu().unique().tolist()) <= {0.0, torch.tensor(1 / 0.7).item()}


@pytest.mark.parametrize(
    "name",
    [
        "add",
        "mul",
        "div",
        "u_exp",
        "u_tanh",
        "u_sigmoid",
        "where",
        "clamp",
        "sum",
        "mean",
        "var",
        "amax",
        "logsumexp",
        "index_select",
        "gather",
        "cat",
        "flip",
        "cumsum",
    ],
)
@pytest.mark.native
def test_backward_natively(name):
    fn = CASES[name]
    leaves = [t.double().requires_grad_() if t.is_floating_point() else t for t in (X, Y, I, J, B, IDX)]
    dev_leaves = [
        t.detach().to("mytorch").requires_grad_() if t.is_floating_point() else t.to("mytorch") for t in leaves
    ]
    ref, dev = fn(*leaves), fn(*dev_leaves)
    ref = ref[0] if isinstance(ref, tuple) else ref
    dev = dev[0] if isinstance(dev, tuple) else dev
    cot = torch.randn(ref.shape, dtype=ref.dtype, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad(ref, [leaves[0], leaves[1]], cot, allow_unused=True)
    dgrads = torch.autograd.grad(dev, [dev_leaves[0], dev_leaves[1]], cot.to("mytorch"), allow_unused=True)
    for r, d in zip(grads, dgrads):
        if r is None:
            assert d is None
        else:
            assert_aligned(d, r, None, f"{name} gradient")


@pytest.mark.native
def test_isin_edge_cases_match_the_cpu():
    """isin (every generate() with an EOS token): NaN and signed zero, promotion between the two sides and with
    Python scalars, empty sides, a large test set, out= on a non-contiguous tensor, and ATen's refusals."""
    nan, inf = float("nan"), float("inf")
    cases = [
        (torch.tensor([nan, 1.0, -0.0, 2.5, inf]), torch.tensor([0.0, nan, inf, 1.0])),
        (torch.randint(0, 5, (4,), generator=g), torch.tensor([1.5, 2.0])),
        (torch.randint(0, 5, (0,), generator=g), torch.tensor([1])),
        (torch.randint(0, 5, (6,), generator=g), torch.tensor([], dtype=torch.long)),
        (torch.randint(0, 3000, (3000,), generator=g).to(torch.int32), torch.randint(0, 3000, (2500,), generator=g)),
        (torch.randint(0, 9, (5, 4), generator=g).to(torch.uint8), torch.tensor([3, 300])),
        (torch.randn(8, generator=g).bfloat16(), torch.randn(8, generator=g).bfloat16()[:4]),
    ]
    for e, t in cases:
        for invert in (False, True):
            assert torch.equal(
                torch.isin(e.to("mytorch"), t.to("mytorch"), invert=invert).cpu(), torch.isin(e, t, invert=invert)
            )
    assert torch.equal(
        torch.isin(torch.tensor([1, 2, 3], device="mytorch"), 2.5).cpu(), torch.isin(torch.tensor([1, 2, 3]), 2.5)
    )
    out = torch.empty(4, 6, dtype=torch.bool, device="mytorch").t()
    torch.isin(I[:, :4].t().to("mytorch"), J.to("mytorch"), out=out)
    assert torch.equal(out.cpu(), torch.isin(I[:, :4].t(), J))
    for e, t, match in [
        (torch.tensor([True]), torch.tensor([True]), "Unsupported input type encountered for isin"),
        (torch.tensor([1]), torch.tensor([1j]), "Unsupported input type encountered for isin"),
    ]:
        with pytest.raises(RuntimeError, match=match):
            torch.isin(e.to("mytorch"), t.to("mytorch"))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype bool"):
        torch.isin(
            torch.tensor([1], device="mytorch"),
            torch.tensor([1], device="mytorch"),
            out=torch.empty(1, device="mytorch"),
        )
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.isin(torch.tensor([1], device="mytorch"), torch.tensor([1, 2]))


@pytest.mark.native
def test_histc_matches_the_cpu_and_counts_integers_as_cuda():
    """histc (mytorch/histogram.h, Note [histc bins]): float32/float64 bin for bin as the CPU (ranges given, from
    the data, empty; NaN and out-of-range elements not counted); integer inputs counted, as on CUDA (the CPU
    refuses them: compared with the CPU on the same values as float); ATen's refusals."""
    for dt in (torch.float32, torch.float64):
        x = (torch.randn(1000, generator=g) * 3).to(dt)
        with_nan = x.clone()
        with_nan[::97] = float("nan")  # not counted in a given range; a range from NaN data is refused, as on the CPU
        for data, kw in (
            (x, dict(bins=10)),
            (with_nan, dict(bins=7, min=-2, max=2)),
            (x, dict(bins=1)),
            (x, dict(bins=5, min=1, max=1)),
        ):
            want = torch.histc(data, **kw)
            got = torch.histc(data.to("mytorch"), **kw)
            assert got.dtype == dt and torch.equal(got.cpu(), want), (dt, kw)
    assert torch.equal(torch.histc(torch.tensor([2.0, 2.0], device="mytorch"), bins=2).cpu(), torch.tensor([0.0, 2.0]))
    ids = torch.randint(-1, 9, (500,), generator=g)
    for dt in (torch.int32, torch.int64, torch.uint8):
        got = torch.histc(ids.clamp(min=0).to(dt).to("mytorch"), bins=8, min=0, max=7)
        assert got.dtype == dt
        assert torch.equal(got.cpu().double(), torch.histc(ids.clamp(min=0).double(), bins=8, min=0, max=7).double())
    out = torch.empty(3, device="mytorch")
    torch.histc(torch.tensor([0.5, 1.5, 2.5], device="mytorch"), bins=3, min=0, max=3, out=out)
    assert torch.equal(out.cpu(), torch.ones(3))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(torch.ones(2, device="mytorch"), bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.ones(2, device="mytorch"), bins=2, min=3, max=1)
    for data in ([1.0, float("inf")], [1.0, float("nan")]):
        with pytest.raises(RuntimeError, match="is not finite"):
            torch.histc(torch.tensor(data, device="mytorch"), bins=2)


@pytest.mark.native
def test_eye_natively():
    for args, kw in [
        ((3,), {}),
        ((2, 4), dict(dtype=torch.int32)),
        ((4, 2), dict(dtype=torch.bool)),
        ((0,), {}),
        ((3, 0), dict(dtype=torch.bfloat16)),
    ]:
        got, want = torch.eye(*args, device="mytorch", **kw), torch.eye(*args, **kw)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    out = torch.empty(0, device="mytorch")
    torch.eye(2, 3, out=out)
    assert torch.equal(out.cpu(), torch.eye(2, 3))
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        torch.eye(-1, device="mytorch")


@pytest.mark.native
def test_is_set_to_and_storage_type():
    """Tensor.is_set_to compares storage, offset, sizes and strides natively; Tensor.storage_type() answers the
    device's legacy storage class (torch.mytorch.FloatStorage), as on CUDA."""
    x = torch.arange(12.0, device="mytorch")
    y = torch.empty(0, device="mytorch").set_(x.untyped_storage(), 0, (12,), (1,))
    assert y.is_set_to(x) and x.is_set_to(y)
    assert not x.view(3, 4).is_set_to(x) and not x[1:].is_set_to(x[:-1]) and not x.clone().is_set_to(x)
    assert x.storage_type() is torch.mytorch.FloatStorage
    assert torch.ones(2, dtype=torch.bfloat16, device="mytorch").storage_type() is torch.mytorch.BFloat16Storage
    assert torch.mytorch.LongStorage.dtype == torch.int64


def test_complex_value_in_addcmul_addcdiv():
    """A complex `value=` computes as on the CPU (complex arithmetic goes through the fallback) instead of
    raising while converting it to a real alpha."""
    a = torch.randn(3, dtype=torch.cfloat, generator=g)
    b = torch.randn(3, dtype=torch.cfloat, generator=g)
    for f in (torch.addcmul, torch.addcdiv):
        got = f(a.to("mytorch"), a.to("mytorch"), b.to("mytorch"), value=2 - 1j).cpu()
        assert torch.equal(got, f(a, a, b, value=2 - 1j))  # the CPU kernel itself, through the fallback


@pytest.mark.native
def test_bincount_natively():
    x = torch.randint(0, 40, (500,), generator=g)
    for kw in (
        {},
        dict(minlength=64),
        dict(weights=torch.rand(500, generator=g)),
        dict(weights=torch.rand(500, generator=g, dtype=torch.float64)),
        dict(weights=torch.arange(500)),
    ):
        got = torch.bincount(
            x.to("mytorch"), **{k: v.to("mytorch") if torch.is_tensor(v) else v for k, v in kw.items()}
        )
        want = torch.bincount(x, **kw)
        assert got.dtype == want.dtype
        if want.dtype == torch.float32:  # sums in double, rounded once (the CPU sums in float32)
            assert compare_tensor(got, want, torch.bincount(x, weights=kw["weights"].double())).ok
        else:
            assert torch.equal(got.cpu(), want)
    assert torch.equal(
        torch.bincount(torch.tensor([], dtype=torch.long, device="mytorch"), minlength=3).cpu(),
        torch.zeros(3, dtype=torch.long),
    )
    for bad in (torch.tensor([-1]), torch.tensor([[1]]), torch.tensor([1.0])):
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
            torch.bincount(bad.to("mytorch"))


@pytest.mark.parametrize("ndim", [9, 12])
@pytest.mark.native
def test_indexing_with_more_index_tensors_than_the_kernel_takes(ndim):
    """A boolean mask over more than 8 dims (and as many integer indices) folds the leading index tensors into
    one offset tensor: gathers, writes, accumulation, negative indices and the CPU's out-of-bounds error."""
    x = torch.randn([2] * ndim + [3], generator=g)
    mask = x.sum(-1) > 0
    base = torch.zeros([3] + [2] * ndim + [3]).to("mytorch")
    xm = base[1].copy_(x.to("mytorch"))  # a view with an offset into a larger tensor
    assert torch.equal(xm[mask.to("mytorch")].cpu(), x[mask])
    idx = tuple(torch.randint(-2, 2, (5,), generator=g) for _ in range(ndim))
    idx_m = tuple(i.to("mytorch") for i in idx)
    assert torch.equal(xm[idx_m].cpu(), x[idx])
    assert torch.equal(xm[(idx_m[0], slice(None)) + idx_m[2:]].cpu(), x[(idx[0], slice(None)) + idx[2:]])
    xm[mask.to("mytorch")] = 7.0
    x[mask] = 7.0
    xm.index_put_(idx_m, torch.ones(3, device="mytorch"), accumulate=True)
    x.index_put_(idx, torch.ones(3), accumulate=True)
    assert torch.equal(xm.cpu(), x)
    assert base[0].eq(0).all() and base[2].eq(0).all()  # the rest of the base is untouched
    bad = (torch.tensor([0, 5, 0, 0, 0]),) + idx[1:]
    for dev in ("cpu", "mytorch"):
        with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
            x.to(dev)[tuple(i.to(dev) for i in bad)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.native
def test_grouped_mm_natively(dtype):
    """torch._grouped_mm (the mixture-of-experts GEMM) in every mode, forward and backward, equal to the CPU's;
    its argument errors are ATen's."""
    from conftest import grouped_mm_cases

    for name, (a, b, offs) in grouped_mm_cases(dtype).items():
        a_d, b_d = a.to("mytorch").requires_grad_(), b.to("mytorch").requires_grad_()
        a_c, b_c = a.clone().requires_grad_(), b.clone().requires_grad_()
        o_d = offs.to("mytorch") if offs is not None else None
        got = torch._grouped_mm(a_d, b_d, o_d)
        want = torch._grouped_mm(a_c, b_c, offs)
        assert torch.equal(got.detach().cpu(), want.detach()), name
        cot = torch.randn(want.shape, generator=g).to(dtype)
        got.backward(cot.to("mytorch"))
        want.backward(cot)
        assert torch.equal(a_d.grad.cpu(), a_c.grad) and torch.equal(b_d.grad.cpu(), b_c.grad), name
    a, b, offs = grouped_mm_cases(torch.bfloat16)["rows"]
    a, b, offs = a.to("mytorch"), b.to("mytorch"), offs.to("mytorch")
    with pytest.raises(RuntimeError, match="Offsets have to be int32"):
        torch._grouped_mm(a, b, offs.long())
    with pytest.raises(RuntimeError, match="Have to provide offsets"):
        torch._grouped_mm(a, b)
    with pytest.raises(RuntimeError, match="contraction dimension of mat_a and mat_b must match"):
        torch._grouped_mm(a[:, :16], b, offs)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._grouped_mm(a, b, offs.cpu())


@pytest.mark.native
def test_complex_add_sub_mul_conj_polar_natively():
    """Complex arithmetic composed on real views (Complex.cpp): tensors, real tensors, real and complex scalars,
    broadcasting, in-place, mixed precision, abs/sgn (0 at 0)/neg, sum and mean, and autograd, within the
    tolerance rule against complex128."""
    a = torch.randn(3, 4, dtype=torch.cfloat, generator=g)
    b = torch.randn(4, dtype=torch.cfloat, generator=g)
    r = torch.randn(3, 1, generator=g)
    cases = {
        "mul": lambda x, y, z: x * y,
        "mul_real": lambda x, y, z: z * x,
        "mul_scalar": lambda x, y, z: x * 0.5,
        "mul_complex_scalar": lambda x, y, z: x * (1 - 2j),
        "add_alpha": lambda x, y, z: torch.add(x, y, alpha=2),
        "sub_real": lambda x, y, z: x - z,
        "rsub": lambda x, y, z: z - x,
        "conj": lambda x, y, z: torch.conj_physical(x),
        "polar": lambda x, y, z: torch.polar(z.abs(), z),
        "in_place": lambda x, y, z: x.clone().mul_(y),
        "to_cdouble": lambda x, y, z: x * y.to(torch.cdouble),
        "conj_real": lambda x, y, z: torch.conj_physical(z),
        "abs": lambda x, y, z: x.abs(),
        "sgn": lambda x, y, z: torch.sgn(x * (z > 0)),
        "neg": lambda x, y, z: -x,
        "sum_dim": lambda x, y, z: x.sum(0),
        "sum_all": lambda x, y, z: x.sum(),
        "sum_0d": lambda x, y, z: x[0, 0].sum(),
        "mean_keepdim": lambda x, y, z: x.mean(-1, keepdim=True),
    }
    for name, f in cases.items():
        got, want = f(a.to("mytorch"), b.to("mytorch"), r.to("mytorch")), f(a, b, r)
        gold = f(a.to(torch.cdouble), b.to(torch.cdouble), r.double())
        assert got.dtype == want.dtype and compare_tensor(got, want, gold).ok, name
    x = a.to("mytorch").requires_grad_()
    y = b.to("mytorch").requires_grad_()
    (x * y).abs().sum().backward()  # the backward multiplies by conj(): conj_physical and complex mul
    xc, yc = a.clone().requires_grad_(), b.clone().requires_grad_()
    (xc * yc).abs().sum().backward()
    assert compare_tensor(x.grad, xc.grad, None).ok and compare_tensor(y.grad, yc.grad, None).ok


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.native
def test_complex_index_writes_change_the_tensor(dtype):
    """Every native index write on complex tensors writes (Note [Complex index writes]): they used to leave the
    tensor unchanged and report success."""
    x = torch.randn(5, 4, dtype=dtype, generator=g)
    v = torch.randn(3, 4, dtype=dtype, generator=g)
    i = torch.tensor([4, 0, 2])
    m = torch.tensor([[True, False, True, False]] * 5)
    cases = {
        "setitem": lambda t: t.__setitem__(i, v.to(t.device)),
        "setitem_scalar": lambda t: t.__setitem__((i, 1), 2 - 3j),
        "index_put_acc": lambda t: t.index_put_((i,), v.to(t.device), accumulate=True),
        "scatter_": lambda t: t.scatter_(0, i.view(3, 1).expand(3, 4).to(t.device), v.to(t.device)),
        "scatter_add_": lambda t: t.scatter_add_(0, i.view(3, 1).expand(3, 4).to(t.device), v.to(t.device)),
        "index_copy_": lambda t: t.index_copy_(0, i.to(t.device), v.to(t.device)),
        "index_add_": lambda t: t.index_add_(0, i.to(t.device), v.to(t.device), alpha=2),
        "index_fill_": lambda t: t.index_fill_(0, i[:2].to(t.device), 1j),
        "put_": lambda t: t.put_(i.to(t.device), v[0, :3].to(t.device), accumulate=True),
        "masked_scatter_": lambda t: t.masked_scatter_(m.to(t.device), v.repeat(3, 1).to(t.device)),
    }
    for name, f in cases.items():
        want, got = x.clone(), x.to("mytorch")
        f(want)
        f(got)
        assert not torch.equal(want, x), name  # the case writes something
        assert torch.equal(got.cpu(), want), name
    # the reductions the kernels have no complex form for run through the CPU fallback: the CPU's result
    mode = torch.mytorch.get_fallback_mode()
    torch.mytorch.set_fallback_mode("warn")
    try:
        want = x.clone().scatter_reduce_(0, i.view(3, 1).expand(3, 4), v, "prod")
        got = x.to("mytorch").scatter_reduce_(0, i.view(3, 1).expand(3, 4).to("mytorch"), v.to("mytorch"), "prod")
        assert torch.equal(got.cpu(), want)
    finally:
        torch.mytorch.set_fallback_mode(mode)


def test_complex_ranges_and_solves_match_the_cpu():
    """Complex linspace is computed (it returned stale memory); complex arange raises as the CPU's and CUDA's;
    the fallback carries the conjugate bit an out= comes back with (lu_solve(left=False) read conjugated)."""
    for dtype in (torch.complex64, torch.complex128):
        for start, end, steps in ((0, 1 + 2j, 5), (-1j, 3, 7), (2 - 1j, 2 - 1j, 1), (0, 1j, 0)):
            want = torch.linspace(start, end, steps, dtype=dtype)
            assert torch.equal(torch.linspace(start, end, steps, dtype=dtype, device="mytorch").cpu(), want)
        for device in ("cpu", "mytorch"):
            with pytest.raises(NotImplementedError, match="not implemented for 'Complex"):
                torch.arange(0, 4, dtype=dtype, device=device)
    a = torch.randn(4, 4, dtype=torch.complex64, generator=g)
    lu, piv = torch.linalg.lu_factor(a)
    b = torch.randn(2, 4, dtype=torch.complex64, generator=g)
    for kw in (dict(left=False), dict(adjoint=True, left=False), dict()):
        bb = b if kw.get("left", True) is False else b.mT
        want = torch.linalg.lu_solve(lu, piv, bb, **kw)
        got = torch.linalg.lu_solve(lu.to("mytorch"), piv.to("mytorch"), bb.to("mytorch"), **kw)
        assert torch.equal(got.cpu(), want), kw
    x = torch.linalg.solve(a.to("mytorch"), b.mT.to("mytorch")).cpu()
    assert torch.equal(x, torch.linalg.solve(a, b.mT))


@pytest.mark.native
def test_flip_takes_the_cpus_layout():
    """flip's result takes a dense input's layout, as ATen's (empty_like's preserve format), and is contiguous for a
    non-dense input: the CPU's values and strides for permuted, transposed and sliced inputs, one or several flipped
    dimensions, and rot90/fliplr built on it."""
    x = torch.randn(6, 7, 8, generator=g)
    d = x.to("mytorch")
    views = (
        (lambda t: t, (0,)),
        (lambda t: t.permute(2, 0, 1), (0, 2)),
        (lambda t: t.transpose(0, 1), (1,)),
        (lambda t: t.permute(1, 2, 0), (0, 1, 2)),
        (lambda t: t[:, ::2], (1,)),
        (lambda t: t[..., 1:5].transpose(0, 2), (0, 2)),
    )
    for view, dims in views:
        got, want = view(d).flip(dims), view(x).flip(dims)
        assert got.stride() == want.stride(), (dims, got.stride(), want.stride())
        assert torch.equal(got.cpu(), want)
    p = x.permute(2, 0, 1)
    for fn in (torch.fliplr, lambda t: torch.rot90(t, 1, [0, 1]), lambda t: torch.rot90(t, 2, [1, 2])):
        got, want = fn(d.permute(2, 0, 1)), fn(p)
        assert got.stride() == want.stride() and torch.equal(got.cpu(), want)


@pytest.mark.native
def test_pow_by_zero_and_one_and_predicates_as_the_cpu():
    """pow(x, 0) and pow(x, 1) as ATen's pow_Tensor_Scalar_out (ones, and x copied: NaN and -0 kept, integers too),
    out= of another dtype refused as the CPU refuses it; x ** 2's gradient (which asks for x ** 1) exact. The
    predicates (isnan, isinf, isfinite, isposinf, isneginf) give the CPU's values and strides for a transposed
    input."""
    x = torch.tensor([[0.0, -0.0, float("nan"), 1.5], [float("inf"), -float("inf"), -2.25, 3.0]])
    d = x.to("mytorch")
    for e in (0, 1, 0.0, 1.0, True, False, 2, 0.5):
        for t, dt in ((x, d), (x.t(), d.t()), (x.to(torch.int64).abs(), d.to(torch.int64).abs())):
            if t.dtype == torch.int64 and isinstance(e, float) and e == 0.5:
                continue
            want, got = torch.pow(t, e), torch.pow(dt, e)
            assert got.dtype == want.dtype and got.stride() == want.stride(), (e, t.dtype)
            assert torch.equal(got.cpu().nan_to_num(7.0), want.nan_to_num(7.0))
            if got.is_floating_point():  # -0 kept (a NaN's sign is not a value)
                assert torch.equal((torch.signbit(got) & ~got.isnan()).cpu(), torch.signbit(want) & ~want.isnan()), e
    for e in (0, 1):
        with pytest.raises(RuntimeError) as cpu:
            torch.pow(x, e, out=torch.empty(2, 4, dtype=torch.int32))
        with pytest.raises(RuntimeError, match=str(cpu.value).split("\n")[0][:40]):
            torch.pow(d, e, out=torch.empty(2, 4, dtype=torch.int32, device="mytorch"))
    y = torch.randn(5, 7, generator=g, requires_grad=True)
    dy = y.detach().to("mytorch").requires_grad_()
    (y**2).sum().backward()
    (dy**2).sum().backward()
    assert torch.equal(dy.grad.cpu(), y.grad)
    for fn in (torch.isnan, torch.isinf, torch.isfinite, torch.isposinf, torch.isneginf):
        want, got = fn(x.t()), fn(d.t())
        assert got.stride() == want.stride() and torch.equal(got.cpu(), want), fn.__name__
