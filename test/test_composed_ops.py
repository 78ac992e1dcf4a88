"""Operators mytorch composes from its native kernels (Note [Composed ops], csrc/aten/tensor/Composed.cpp) and the order
statistics read off its stable sort (Note [Order statistics from the sort], csrc/aten/reduce/OrderStats.cpp): with the
fallback forbidden (marker `native`), each matches the CPU, with ATen's edge cases and refusals."""

import pytest
import torch

from mytorch.testing._compare import assert_aligned, misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(31)
X = torch.randn(5, 6, 3, generator=g)
Y = torch.randn(5, 6, 3, generator=g)
TIES = torch.randint(-3, 4, (4, 40), generator=g)  # many ties: indices are implementation-defined there
NAN = torch.tensor([[float("nan")] * 3, [1.0, float("nan"), 2.0], [3.0, float("nan"), float("nan")], [7.0, 5.0, 4.0]])


def _dev(x):
    return x.to("mytorch")


def _problems(dev, ref, gold=None, what=""):
    """What differs between mytorch's outputs and the CPU's (each on mytorch, aligned to the shared rule)."""
    dev = dev if isinstance(dev, (tuple, list)) else (dev,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    gold = gold if isinstance(gold, (tuple, list)) else (gold,) * len(ref)
    if len(dev) != len(ref):
        return [f"{what}: {len(dev)} outputs, the CPU gives {len(ref)}"]
    out = []
    for d, r, o in zip(dev, ref, gold):
        if d.device.type != "mytorch":
            out.append(f"{what}: an output on {d.device}")
        out.append(misalignment(d, r, o if (o is not None and r.is_floating_point()) else None, what))
    return [p for p in out if p]


def _check(dev, ref, gold=None, what=""):
    problems = _problems(dev, ref, gold, what)
    assert not problems, problems


COMPOSED = {
    "trace": lambda x, y: torch.trace(x[:, :, 0]),
    "trace_int": lambda x, y: torch.trace((x[:, :, 0] * 10).int()),
    "aminmax": lambda x, y: torch.aminmax(x),
    "aminmax_dim": lambda x, y: torch.aminmax(x, dim=1, keepdim=True),
    "aminmax_all_keepdim": lambda x, y: torch.aminmax(x, keepdim=True),
    "norm": lambda x, y: torch.norm(x, p=3, dim=(0, 2)),
    "norm_dtype": lambda x, y: torch.norm(x, dim=1, dtype=torch.float64),
    "dist": lambda x, y: torch.dist(x, y, 1.5),
    "renorm": lambda x, y: torch.renorm(x, 2, 1, 1.5),
    "cross": lambda x, y: torch.linalg.cross(x, y),
    "cross_dim0": lambda x, y: torch.cross(x[:3], y[:3].transpose(1, 2).contiguous().transpose(1, 2), dim=0),
    "glu": lambda x, y: torch.nn.functional.glu(x, dim=1),
    "channel_shuffle": lambda x, y: torch.nn.functional.channel_shuffle(x.reshape(1, 6, 5, 3), 3),
    "unfold_overlapping": lambda x, y: x.unfold(1, 4, 1) * 1.0,
    "nonzero_static": lambda x, y: torch.nonzero_static(x > 0.5, size=20, fill_value=-7),
    "nonzero_static_cut": lambda x, y: torch.nonzero_static(x > 0, size=3),
    "repeat_interleave": lambda x, y: torch.repeat_interleave(torch.tensor([2, 0, 3, 1, 0], device=x.device)),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_composed_op_matches_the_cpu(name):
    fn = COMPOSED[name]
    problems = _problems(fn(_dev(X), _dev(Y)), fn(X, Y), fn(X.double(), Y.double()), name)
    assert not problems, problems


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_composed_backwards_match_the_cpu(dtype):
    """glu's backward, unfold's (overlapping windows add up), cross's and renorm's, in each floating dtype."""
    for name, fn in [
        ("glu", lambda a, b: torch.nn.functional.glu(a, 1)),
        ("unfold", lambda a, b: a.unfold(1, 3, 2)),
        ("cross", lambda a, b: torch.linalg.cross(a, b)),
        ("renorm", lambda a, b: torch.renorm(a, 1, 0, 2.0)),
    ]:
        grads = []
        for device in ("cpu", "mytorch"):
            a = X.to(dtype).to(device).clone().requires_grad_()
            b = Y.to(dtype).to(device).clone().requires_grad_()
            out = fn(a, b)
            cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(dtype).to(device)
            grads.append(torch.autograd.grad(out, [a, b], cot, allow_unused=True))
        for d, r in zip(grads[1], grads[0]):
            if r is None:
                assert d is None, name
            else:
                assert_aligned(d, r, None, f"{name} gradient {dtype}")


def test_equal_matches_the_cpu():
    a = _dev(X)
    assert torch.equal(a, _dev(X.clone()))
    b = X.clone()
    b[4, 5, 2] += 1
    assert not torch.equal(a, _dev(b))
    assert not torch.equal(a, _dev(X[:4]))  # another size: False, as the CPU
    n = torch.tensor([1.0, float("nan")])
    assert torch.equal(_dev(n), _dev(n)) == torch.equal(n, n.clone())  # NaN is not equal to itself
    assert torch.equal(_dev(torch.empty(0, 3)), _dev(torch.empty(0, 3)))
    # two dtypes: compared in their common dtype, as the CPU's and CUDA's kernels compare them
    for other in (X.double(), X.bfloat16(), (X * 4).round().long()):
        assert torch.equal(a, _dev(other)) == torch.equal(X, other)
    assert torch.equal(_dev(X.bfloat16()), _dev(X.bfloat16().float()))


def test_composed_ops_refuse_as_the_cpu():
    for fn in [
        lambda t: torch.trace(t),  # a 3-d tensor
        lambda t: torch.linalg.cross(t[:, :, :2], t[:, :, :2]),
        lambda t: torch.nn.functional.glu(t[:, :5], 1),
        lambda t: torch.renorm(t, -1, 0, 1.0),
        lambda t: torch.norm((t * 10).long(), dim=0),
        lambda t: torch.nn.functional.channel_shuffle(t.reshape(1, 6, 5, 3), 4),
        lambda t: torch.aminmax(t[:, :0], dim=1),
        lambda t: torch.nonzero_static(t, size=-1),
        lambda t: torch.repeat_interleave(torch.tensor([1, -1], device=t.device)),
    ]:
        with pytest.raises((RuntimeError, IndexError)) as ref:
            fn(X)
        with pytest.raises(ref.type) as dev:
            fn(_dev(X))
        assert str(dev.value).split("\n")[0] == str(ref.value).split("\n")[0]


def test_composed_out_variants_and_aliasing():
    out = torch.empty(0, device="mytorch")
    torch.linalg.cross(_dev(X), _dev(Y), out=out)
    assert_aligned(out, torch.linalg.cross(X, Y), None, "cross out=")
    a = _dev(X).clone()
    torch.linalg.cross(a, _dev(Y), out=a)  # out is an input: computed apart, then copied
    assert_aligned(a, torch.linalg.cross(X, Y), None, "cross out=input")
    with pytest.raises(RuntimeError, match="dtype"):
        torch.linalg.cross(_dev(X), _dev(Y), out=torch.empty(0, device="mytorch", dtype=torch.float64))
    lo, hi = torch.empty(0, device="mytorch"), torch.empty(0, device="mytorch")
    torch.aminmax(_dev(X), dim=0, out=(lo, hi))
    assert torch.equal(lo.cpu(), X.amin(0)) and torch.equal(hi.cpu(), X.amax(0))


def test_an_empty_out_adopts_only_a_temporary():
    """Note [An empty out= adopts a temporary]: a functional composed op's fresh out takes its result's storage,
    but an out whose storage another tensor shares, or that has room already, is resized and written as ATen does
    (the alias sees the data; the data pointer is kept), and no result aliases an input."""
    x = torch.randn(2, 3, 5, 5)
    pad = torch._C._nn.reflection_pad2d
    ref = pad(x, (1, 2, 2, 1))
    d = x.to("mytorch")
    a, b = pad(d, (1, 2, 2, 1)), pad(d, (1, 2, 2, 1))
    assert torch.equal(a.cpu(), ref) and torch.equal(b.cpu(), ref)
    ptrs = {t.untyped_storage().data_ptr() for t in (a, b, d)}
    assert len(ptrs) == 3  # two results, neither the input's memory
    for dev in ("cpu", "mytorch"):
        base = torch.empty(0, device=dev)
        alias = base.view(0)  # shares base's storage
        pad(x.to(dev), (1, 2, 2, 1), out=base)
        assert torch.equal(base.cpu(), ref)
        assert alias.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(), dev
        roomy = torch.empty(ref.numel() + 7, device=dev).resize_(0)  # an empty out with storage
        before = roomy.untyped_storage().data_ptr()
        pad(x.to(dev), (1, 2, 2, 1), out=roomy)
        assert torch.equal(roomy.cpu(), ref) and roomy.untyped_storage().data_ptr() == before, dev


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32])
def test_order_statistics_match_the_cpu(dtype):
    """Values equal the CPU's; where values tie, an index may differ but must point at an equal value."""
    x = (TIES if not dtype.is_floating_point else TIES.float() + 0.25 * torch.randn(4, 40, generator=g)).to(dtype)
    for name, fn in [
        ("median", lambda t: torch.median(t, 1)),
        ("median_kd", lambda t: torch.median(t, 0, keepdim=True)),
        ("nanmedian", lambda t: torch.nanmedian(t, 1)),
        ("kthvalue", lambda t: torch.kthvalue(t, 7, 1)),
        ("kthvalue_d0", lambda t: torch.kthvalue(t, 2, 0, keepdim=True)),
        ("mode", lambda t: torch.mode(t, 1)),
        ("mode_d0", lambda t: torch.mode(t, 0)),
    ]:
        ref, dev = fn(x), fn(_dev(x))
        assert torch.equal(dev.values.cpu(), ref.values), name
        d = 1 if dev.indices.dim() == 1 and dev.values.numel() == x.size(0) else 0
        picked = x.gather(d, dev.indices.cpu() if dev.indices.dim() == 2 else dev.indices.cpu().unsqueeze(d))
        assert torch.equal(picked.reshape(-1), ref.values.reshape(-1)), name
    assert torch.equal(torch.median(_dev(x)).cpu(), torch.median(x))
    assert torch.equal(torch.nanmedian(_dev(x)).cpu(), torch.nanmedian(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_kthvalue_by_top_k_is_the_stable_sorts_pair(dtype):
    """kthvalue with a small k takes the ascending top-k (csrc/aten/reduce/OrderStats.cpp), a larger k the sort: both
    give the stable sort's pair at position k - 1 (ties by index, NaN last), and the CPU's values. The k cover both
    branches (k <= 8 or 32 k <= n, then k beyond)."""
    x = (torch.randn(40, 70, generator=g) * 3).round().to(dtype)
    if dtype.is_floating_point:
        x[3, 5], x[7, :] = float("nan"), float("nan")
    d = _dev(x)
    for dim in (0, 1):
        n = x.shape[dim]
        s = d.sort(dim=dim, stable=True)
        for k in (1, 2, 8, 9, n // 2, n):
            v, i = d.kthvalue(k, dim)
            want_i = s.indices.narrow(dim, k - 1, 1).squeeze(dim)
            assert torch.equal(i.cpu(), want_i.cpu()), (dim, k)
            assert torch.equal(v.cpu().float().nan_to_num(1e9), x.kthvalue(k, dim).values.float().nan_to_num(1e9))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
@pytest.mark.parametrize("n", [1, 2, 15, 64, 65])
def test_short_slice_selection_is_the_stable_sorts_pair(dtype, n):
    """Note [Selection in short slices]: up to 64 elements median, nanmedian and kthvalue rank each element instead of
    sorting (65 takes the sort); both give the stable sort's pair at ATen's position (ties by index, NaN last): the
    first NaN for median, the lower median of the valid values for nanmedian, NaN when all are NaN."""
    x = (torch.randn(6, n, generator=g) * 2).round()
    if dtype.is_floating_point:
        x[1, n // 2] = float("nan")
        x[2, :] = float("nan")
    x = x.to(dtype)
    d = _dev(x)
    s = d.sort(dim=1, stable=True)
    nans = x.float().isnan().sum(1)
    valid = n - nans
    positions = {
        "median": torch.where(nans > 0, n - nans, torch.full_like(nans, (n - 1) // 2)),
        "nanmedian": torch.where(valid > 0, (valid - 1).div(2, rounding_mode="floor"), 0),
        "kthvalue": torch.full_like(nans, max(1, (2 * n) // 3) - 1),
    }
    for name, pos in positions.items():
        if name == "nanmedian" and not dtype.is_floating_point:
            continue
        if name == "kthvalue":
            got = d.kthvalue(int(pos[0]) + 1, 1)
        else:
            got = getattr(torch, name)(d, 1)
        want_i = s.indices.cpu().gather(1, pos.unsqueeze(1)).squeeze(1)
        assert torch.equal(got.indices.cpu(), want_i), name
        assert torch.equal(
            got.values.cpu().float().nan_to_num(1e9),
            x.gather(1, want_i.unsqueeze(1)).squeeze(1).float().nan_to_num(1e9),
        ), name


def test_mode_picks_the_smallest_of_the_most_frequent_values():
    x = torch.tensor([[5, 1, 5, 1, 2, 9], [3, 3, 3, 0, 0, 0]])
    v, i = torch.mode(_dev(x), 1)
    assert v.cpu().tolist() == [1, 0]  # equal counts: the smallest value, as the CPU
    assert x.gather(1, i.cpu().unsqueeze(1)).squeeze(1).tolist() == [1, 0]


def test_median_and_nanmedian_with_nan_match_the_cpu():
    for fn in (torch.median, torch.nanmedian):
        ref, dev = fn(NAN, 1), fn(_dev(NAN), 1)
        torch.testing.assert_close(dev.values.cpu(), ref.values, equal_nan=True)
        assert torch.equal(dev.indices.cpu(), ref.indices), fn  # the first NaN; the lower median of the rest
        torch.testing.assert_close(fn(_dev(NAN)).cpu(), fn(NAN), equal_nan=True)


def test_order_statistics_edge_cases():
    e = torch.empty(0, 3)
    for fn in [lambda t: torch.median(t, 0), lambda t: torch.mode(t, 0), lambda t: torch.kthvalue(t, 1, 0)]:
        with pytest.raises(IndexError) as ref:
            fn(e)
        with pytest.raises(IndexError) as dev:
            fn(_dev(e))
        assert str(dev.value).split("\n")[0] == str(ref.value).split("\n")[0]
        r, d = fn(e.t()), fn(_dev(e.t()))  # empty along the kept dimension: empty results
        assert d.values.shape == r.values.shape and d.indices.shape == r.indices.shape
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(_dev(X), 7, 0)
    s = torch.tensor(2.5)
    for fn in [lambda t: torch.median(t, 0), lambda t: torch.mode(t), lambda t: torch.kthvalue(t, 1)]:
        assert torch.equal(fn(_dev(s)).values.cpu(), fn(s).values)


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive_matches_the_cpu(dim):
    x = torch.tensor([[1, 1, 2, 2, 2, 3], [1, 1, 2, 2, 2, 4], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    for t in (x, x.float(), x.t().contiguous()):
        ref = torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=dim)
        dev = torch.unique_consecutive(_dev(t), return_inverse=True, return_counts=True, dim=dim)
        for d, r in zip(dev, ref):
            assert torch.equal(d.cpu(), r)
    n = torch.tensor([float("nan"), float("nan"), 1.0, 1.0])  # NaN is unequal to NaN: two runs
    assert torch.equal(
        torch.unique_consecutive(_dev(n), return_counts=True)[1].cpu(),
        torch.unique_consecutive(n, return_counts=True)[1],
    )
    e = torch.empty(5, 0, 5)
    for d in (None, 1):
        for a, b in zip(torch.unique_consecutive(_dev(e), True, True, d), torch.unique_consecutive(e, True, True, d)):
            assert a.shape == b.shape and a.dtype == b.dtype
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        torch.unique_consecutive(_dev(e), dim=0)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce_matches_the_cpu(reduce, dtype):
    """index_reduce as a scatter_reduce over the spread index (csrc/aten/tensor/IndexOps.cpp): repeated indices, rows never
    indexed, both include_self settings, a leading and a trailing dim, in place too, bad indices."""
    x = (torch.randn(6, 5, generator=g) * 4).to(dtype)
    src = (torch.randn(7, 5, generator=g) * 4).to(dtype)
    idx = torch.tensor([0, 2, 2, 5, 0, 2, 3])
    for include_self in (True, False):
        ref = x.index_reduce(0, idx, src, reduce, include_self=include_self)
        dev = _dev(x).index_reduce(0, _dev(idx), _dev(src), reduce, include_self=include_self)
        _check(dev, ref, None, f"index_reduce {reduce} {include_self}")
        ref = x.t().index_reduce(1, idx, src.t(), reduce, include_self=include_self)
        dev = _dev(x).t().index_reduce(1, _dev(idx), _dev(src).t(), reduce, include_self=include_self)
        _check(dev, ref, None, f"index_reduce dim 1 {reduce} {include_self}")
    a = _dev(x)
    a.index_reduce_(0, _dev(idx), _dev(src), reduce)
    _check(a, x.clone().index_reduce_(0, idx, src, reduce), None, "index_reduce_")
    assert not torch.equal(a.cpu(), x)  # the reduction changed rows: not vacuous
    for bad in (7, -1):  # past the end, negative: IndexError, as the CPU's kernel raises
        with pytest.raises(IndexError):
            _dev(x).index_reduce_(0, _dev(torch.tensor([0, bad])), _dev(src[:2]), reduce)
            torch.mytorch.synchronize()


def test_factories_prelu_and_complex_match_the_cpu():
    """tril/triu_indices, logspace (each dtype rounds its start, end and result as the CPU's kernel), prelu's
    kernels with their gradients, complex(real, imag)."""
    dev = torch.device("mytorch")
    for fn in (torch.tril_indices, torch.triu_indices):
        for args in ((5, 7, 0), (6, 4, -2), (4, 4, 3), (0, 3, 0)):
            ref, got = fn(*args), fn(*args, device=dev)
            assert got.device.type == "mytorch" and torch.equal(got.cpu(), ref), (fn, args)
        assert torch.equal(fn(5, 6, 1, dtype=torch.int32, device=dev).cpu(), fn(5, 6, 1, dtype=torch.int32))
    for dtype in (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32):
        for start, end, steps, base in ((0, 3, 7, 10.0), (-2.5, 4.25, 11, 2.0), (1, 1, 1, 3.0), (3, -1, 4, 0.5)):
            ref = torch.logspace(start, end, steps, base, dtype=dtype)
            got = torch.logspace(start, end, steps, base, dtype=dtype, device=dev)
            gold = torch.logspace(start, end, steps, base, dtype=torch.float64)
            _check(got, ref, gold.to(ref.dtype) if dtype.is_floating_point else None, f"logspace {dtype}")
    w = torch.tensor([0.25, -0.5, 2.0])
    x = torch.randn(4, 3, 5, generator=g)
    grads = []
    for device in ("cpu", "mytorch"):
        a, b = x.to(device).requires_grad_(), w.to(device).requires_grad_()
        y = torch.nn.functional.prelu(a, b)
        grads.append((y.detach(), *torch.autograd.grad(y, [a, b], torch.ones_like(y))))
    for d, r in zip(grads[1], grads[0]):
        _check(d, r, None, "prelu")
    re, im = torch.randn(3, 1, generator=g), torch.randn(4, generator=g)
    _check(torch.complex(_dev(re), _dev(im)), torch.complex(re, im), None, "complex")


def test_nonzero_static_reads_prefixes_as_the_cpu_reads_the_whole():
    """nonzeroStaticOut searches growing prefixes of the flattened input: sizes below, at and above the count of
    non-zeros (padded), non-zeros only past the first prefix, a permuted (non-contiguous) input, a 0-dim one."""
    x = (torch.rand(40, 30, 25, generator=g) > 0.97).float()
    late = torch.zeros(200_000)
    late[-3:] = 1.0  # found only once the prefixes reach the end
    for t in (x, x.permute(2, 0, 1), late, torch.tensor(2.0), torch.tensor(0.0)):
        count = int(t.count_nonzero())
        for size in (0, 1, count, count + 5, 4 * count + 9000):
            want = torch.nonzero_static(t, size=size, fill_value=-3)
            assert torch.equal(torch.nonzero_static(t.to("mytorch"), size=size, fill_value=-3).cpu(), want), size


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_frexp_matches_the_cpu_bit_for_bit(dtype):
    edge = [0.0, -0.0, 1.0, 0.5, 3.0, -7.99999, 8.0, 1e-40, float("inf"), float("-inf"), float("nan"), -2.5e30]
    edge += [
        5e-324,
        1.7e308,
        -2.2250738585072014e-308,
    ]  # the smallest subnormal double, the largest, the smallest normal
    x = torch.cat([torch.tensor(edge, dtype=torch.float64), torch.randn(200, generator=g, dtype=torch.float64) * 1e3])
    x = x.to(dtype)
    m, e = torch.frexp(x)
    dm, de = torch.frexp(x.to("mytorch"))
    assert de.dtype == torch.int32 and torch.equal(de.cpu(), e)
    assert torch.equal(dm.cpu().isnan(), m.isnan()) and torch.equal(dm.cpu()[~m.isnan()], m[~m.isnan()])
    # two rows of the engine (ops_math.h frexp_bits): a transposed input keeps its layout, and the mantissa may be
    # written over the input itself (the exponent is read first)
    xt = x[:208].reshape(16, 13).t()
    mt, et = torch.frexp(xt)
    d = xt.to("mytorch")
    dmt, det = torch.frexp(d)
    assert dmt.stride() == mt.stride() and det.stride() == et.stride() and torch.equal(det.cpu(), et)
    assert torch.equal(dmt.cpu().nan_to_num(7.0), mt.nan_to_num(7.0))
    ie = torch.empty(0, dtype=torch.int32, device="mytorch")
    torch.frexp(d, out=(d, ie))
    assert torch.equal(ie.cpu(), et) and torch.equal(d.cpu().nan_to_num(7.0), mt.nan_to_num(7.0))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8])
def test_threshold_of_integers_matches_the_cpu(dtype):
    x = torch.randint(0, 100, (50,), generator=g).to(dtype)
    for threshold, value in [(20, 3), (20.7, -1 if dtype != torch.uint8 else 1), (0, 0)]:
        assert torch.equal(
            torch.threshold(x.to("mytorch"), threshold, value).cpu(), torch.threshold(x, threshold, value)
        )


def test_zero_tensor_gradients_stay_on_the_device():
    """sgn's gradient at a real input is a ZeroTensor (no storage): made natively, and every use materialises it."""
    x = torch.randn(5, generator=g, requires_grad=True)
    d = x.detach().to("mytorch").requires_grad_()
    (gx,) = torch.autograd.grad(torch.sgn(x).sum(), x)
    (gd,) = torch.autograd.grad(torch.sgn(d).sum(), d)
    assert gd.device.type == "mytorch" and torch.equal(gd.cpu(), gx)
    z = torch._efficientzerotensor((2, 3), device="mytorch")
    assert z._is_zerotensor() and z.device.type == "mytorch"
    y = torch.randn(2, 3, generator=g)
    _check(z + y.to("mytorch"), y, None, "zerotensor + y")
    _check(z * y.to("mytorch"), torch.zeros(2, 3), None, "zerotensor * y")
    assert torch.equal(z.cpu(), torch.zeros(2, 3)) and torch.equal(z.clone().cpu(), torch.zeros(2, 3))
    with pytest.raises(RuntimeError, match="immutable"):
        z.add_(1)


@pytest.mark.parametrize(
    "dtype",
    [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.uint8, torch.bool],
)
def test_hash_tensor_matches_the_cpu_bit_for_bit(dtype):
    x = (torch.randn(5, 7, 3, generator=g) * 50).to(dtype)
    if dtype.is_floating_point:
        x[0, 0, 0], x[1, 1, 1], x[2, 2, 2] = float("nan"), -0.0, float("-inf")
    d = x.to("mytorch")
    for kwargs in [{}, dict(dim=1), dict(dim=(0, 2), keepdim=True), dict(dim=-1)]:
        ref, out = torch.hash_tensor(x, **kwargs), torch.hash_tensor(d, **kwargs)
        assert out.device.type == "mytorch" and out.dtype == torch.uint64 and torch.equal(out.cpu(), ref), kwargs
    assert torch.equal(torch.hash_tensor(d[:0], dim=1).cpu(), torch.hash_tensor(x[:0], dim=1))
    for bad in [dict(mode=1), dict(out=torch.empty(0, dtype=torch.int64, device="mytorch"))]:
        with pytest.raises(RuntimeError):
            torch.hash_tensor(d, **bad)
    with pytest.raises(RuntimeError, match="dim"):
        torch.hash_tensor(d[:0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_hash_tensor_on_every_path_of_the_reduction_engine(dtype):
    """The XorSum row (kernels/include/mytorch/reduce.h) through the engine's paths: all of 1M elements (chunks over
    threads), inner rows short and long, an outer dimension, a transposed view, several dims: the CPU's bits. The
    emulated CUDA build takes 6 rows (30k elements: its engine splits them over blocks too)."""
    x = torch.randn(200 if torch.mytorch.runtime() == "sim" else 6, 70, 75, generator=g) * 1e3
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    d = x.to("mytorch")
    for view, kwargs in [
        (lambda t: t, {}),
        (lambda t: t, dict(dim=-1)),
        (lambda t: t, dict(dim=0)),
        (lambda t: t, dict(dim=(0, 2))),
        (lambda t: t[:, :, :3], dict(dim=-1)),
        (lambda t: t.transpose(0, 2), dict(dim=1, keepdim=True)),
        (lambda t: t[::2, 5], {}),
    ]:
        ref, out = torch.hash_tensor(view(x), **kwargs), torch.hash_tensor(view(d), **kwargs)
        assert torch.equal(out.cpu(), ref), kwargs
        assert ref.numel() == 1 or ref.unique().numel() > 1, kwargs  # the control: hashes that differ


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multi_margin_loss_forward_and_backward_match_the_cpu(dtype):
    x = torch.randn(6, 5, generator=g, dtype=torch.float64)
    t = torch.tensor([0, 4, 2, 2, 1, 3])
    w = torch.rand(5, generator=g, dtype=torch.float64) + 0.5
    cases = [
        ((x, t), dict(p=p, margin=margin, weight=weight, reduction=reduction))
        for p in (1, 2)
        for margin in (1.0, 0.3)
        for weight in (None, w)
        for reduction in ("mean", "sum", "none")
    ]
    cases += [((x[0], t[:1]), dict(reduction="none")), ((x[0], t[0]), dict(reduction="none", p=2))]
    for (inp, tgt), kw in cases:
        what = f"multi_margin_loss {dtype} {tuple(inp.shape)} {kw}"
        kd = {k: (v.to(dtype).to("mytorch") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        kc = {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        cpu, dev = inp.to(dtype).requires_grad_(), inp.to(dtype).to("mytorch").requires_grad_()
        ref = torch.nn.functional.multi_margin_loss(cpu, tgt, **kc)
        out = torch.nn.functional.multi_margin_loss(dev, tgt.to("mytorch"), **kd)
        gold = torch.nn.functional.multi_margin_loss(inp, tgt, **kw)
        cot = torch.randn(ref.shape, generator=g, dtype=torch.float64).to(dtype)
        (rg,) = torch.autograd.grad(ref, cpu, cot)
        (dg,) = torch.autograd.grad(out, dev, cot.to("mytorch"))
        assert not _problems(out, ref, gold, what) + _problems(dg, rg, None, what + " gradient")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multilabel_margin_loss_forward_and_backward_match_the_cpu(dtype):
    """Targets end at the first -1 (entries after it are read by nothing but the range check), repeats count
    twice, a row may have none; the gradient of every reduction, batched and not."""
    x = torch.randn(5, 6, generator=g, dtype=torch.float64)
    t = torch.tensor(
        [[3, 0, -1, 1, 2, 2], [5, 5, 1, -1, 4, -1], [-1, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [4, 4, 4, -1, 0, 0]]
    )
    cases = [((x, t), r) for r in ("mean", "sum", "none")] + [((x[1], t[1]), r) for r in ("none", "mean")]
    for (inp, tgt), reduction in cases:
        what = f"multilabel_margin_loss {dtype} {tuple(inp.shape)} {reduction}"
        cpu, dev = inp.to(dtype).requires_grad_(), inp.to(dtype).to("mytorch").requires_grad_()
        ref = torch.nn.functional.multilabel_margin_loss(cpu, tgt, reduction=reduction)
        out = torch.nn.functional.multilabel_margin_loss(dev, tgt.to("mytorch"), reduction=reduction)
        gold = torch.nn.functional.multilabel_margin_loss(inp, tgt, reduction=reduction)
        cot = torch.randn(ref.shape, generator=g, dtype=torch.float64).to(dtype)
        (rg,) = torch.autograd.grad(ref, cpu, cot)
        (dg,) = torch.autograd.grad(out, dev, cot.to("mytorch"))
        assert not _problems(out, ref, gold, what) + _problems(dg, rg, None, what + " gradient")
    torch.mytorch.set_fallback_mode("silent")  # the CPU's refusals, through its kernel
    with pytest.raises(RuntimeError) as cpu:
        torch.nn.functional.multilabel_margin_loss(x, t - 1)  # -2 after a -1
    with pytest.raises(RuntimeError) as dev:
        torch.nn.functional.multilabel_margin_loss(x.to("mytorch"), (t - 1).to("mytorch"))
    assert str(dev.value) == str(cpu.value)


def _embedding_bag_case(dtype, mode, padding_idx, weighted, include_last_offset, scale, by_rows=False, dev="mytorch"):
    w = torch.randn(10, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    w[3, 1] = w[7, 2] = float("nan")  # NaN rows: a bag's first row (kept by max) and later ones (ignored by max)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 7, 7, 9, 3, 6, 6])
    off = torch.tensor([0, 2, 2, 5, 8, 12] + ([14] if include_last_offset else []))
    psw = torch.rand(14, generator=torch.Generator().manual_seed(6), dtype=torch.float64) if weighted else None
    w = w.to(dtype).to(dev).requires_grad_()
    psw = psw.to(dtype).to(dev).requires_grad_() if weighted else None
    if by_rows:  # sum/mean spelled out with F.embedding, whose scale_grad_by_freq divides by each index's count
        rows = torch.nn.functional.embedding(idx, w, padding_idx=padding_idx, scale_grad_by_freq=scale)
        keep = (idx != padding_idx).unsqueeze(1) if padding_idx is not None else torch.ones(14, 1, dtype=torch.bool)
        rows = torch.where(keep, rows, 0)
        rows = rows * psw.unsqueeze(1) if weighted else rows
        bags = len(off) - include_last_offset
        bag = torch.searchsorted(off[:bags], torch.arange(14), right=True) - 1
        y = torch.zeros(bags, 4, dtype=w.dtype).index_add(0, bag, rows)
        if mode == "mean":
            count = torch.zeros(bags).index_add(0, bag, keep.squeeze(1).float()).clamp_min(1)
            y = y / count.unsqueeze(1).to(w.dtype)
    else:
        y = torch.nn.functional.embedding_bag(
            idx.to(dev),
            w,
            off.to(dev),
            mode=mode,
            padding_idx=padding_idx,
            per_sample_weights=psw,
            include_last_offset=include_last_offset,
            scale_grad_by_freq=scale,
        )
    cot = torch.randn(y.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(dtype).to(dev)
    grads = torch.autograd.grad(y, [w] + ([psw] if weighted else []), cot)
    return [y] + list(grads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_embedding_bag_matches_the_cpu(dtype):
    """Note [Embedding bag]: sum (with and without per-sample weights), mean and max; an empty bag, padding_idx,
    include_last_offset, NaN rows; the weight's and the per-sample weights' gradients. scale_grad_by_freq divides
    by each index's own count, as torch.cuda does (the CPU's kernel divides by the count of another index, a
    PyTorch bug), so its reference is the bag spelled out with F.embedding on the CPU."""
    for mode in ("sum", "mean", "max"):
        for padding_idx in (None, 4, 3):
            for weighted in (False, True) if mode == "sum" else (False,):
                for include_last_offset in (False, True):
                    for scale in (False, True) if mode != "max" else (False,):
                        what = f"embedding_bag {dtype} {mode} pad={padding_idx} psw={weighted} last={include_last_offset} scale={scale}"
                        args = (mode, padding_idx, weighted, include_last_offset, scale)
                        out = _embedding_bag_case(dtype, *args)
                        ref = _embedding_bag_case(dtype, *args, by_rows=scale, dev="cpu")
                        gold = _embedding_bag_case(torch.float64, *args, by_rows=scale, dev="cpu")
                        assert not _problems(out, ref, gold, what)
    assert torch.mytorch.fallback_stats() == {}


def test_embedding_bag_keeps_the_cpus_refusals():
    """Arguments the composition does not take are the CPU's kernel (counted), with its own errors."""
    torch.mytorch.set_fallback_mode("silent")
    w, idx = torch.randn(5, 3), torch.tensor([0, 4, 1, 2])
    for i, off in ((idx, torch.tensor([1, 2])), (idx + 1, torch.tensor([0, 2])), (idx, torch.tensor([0, 5]))):
        with pytest.raises((RuntimeError, IndexError)) as cpu:
            torch.nn.functional.embedding_bag(i, w, off)
        with pytest.raises((RuntimeError, IndexError)) as dev:
            torch.nn.functional.embedding_bag(i.to("mytorch"), w.to("mytorch"), off.to("mytorch"))
        assert str(dev.value) == str(cpu.value)


def test_multi_margin_loss_keeps_the_cpus_refusals():
    """What the composition does not cover is the CPU's kernel (counted), which raises its own errors."""
    torch.mytorch.set_fallback_mode("silent")
    x, t = torch.randn(3, 4, device="mytorch"), torch.tensor([0, 4, 1], device="mytorch")
    with pytest.raises(RuntimeError, match="target out of range"):
        torch.nn.functional.multi_margin_loss(x, t)
    with pytest.raises(RuntimeError, match="inconsistent weight size"):
        torch.nn.functional.multi_margin_loss(x, t.clamp_max(3), weight=torch.ones(3, device="mytorch"))
    with pytest.raises(NotImplementedError):
        torch.nn.functional.multi_margin_loss(x.bfloat16(), t.clamp_max(3))


def _nonzero_inputs():
    """Inputs across nonzero's blocks (kNonzeroBlock = 4096 elements): block edges, non-zeros only in a late block,
    every dtype, NaN (not zero), -0 (zero) and inf, 0-d and empty, up to 6 dimensions, non-contiguous views."""
    gen = torch.Generator().manual_seed(7)
    for dt in (
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.float64,
        torch.int64,
        torch.int32,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
    ):
        for shape in (
            (),
            (0,),
            (1,),
            (4095,),
            (4096,),
            (4097,),
            (3, 5000),
            (20, 30, 21),
            (2, 3, 0, 4),
            (2, 3, 4, 5, 6, 7),
        ):
            x = torch.randint(-2, 3, shape, generator=gen).to(dt)
            if dt.is_floating_point and x.numel() > 3:
                x.view(-1)[:3] = torch.tensor([float("nan"), -0.0, float("inf")])
            yield x
        late = torch.zeros(3 * 4096 + 5, dtype=dt)
        late[2 * 4096 + 7 :: 5] = 1
        yield late
        yield torch.ones(9000, dtype=dt)
    x = torch.randn(300, 70, generator=gen) > 0.3
    yield x.t()
    yield x[::2, 5:]
    # complex32, which the kernels do not load: non-zero where either half is (NaN is, -0 is not)
    yield torch.tensor([0.0, 1.5, -0.0, 0.0, 2.0, float("nan")]).to(torch.complex32)
    # complex: non-zero when either part is
    yield torch.complex(torch.tensor([0.0, 0.0, 1.0, -0.0]), torch.tensor([0.0, 2.0, 0.0, -0.0]))


def test_nonzero_by_prefix_sums_matches_the_cpu():
    """nonzero (Note [Nonzero by prefix sums], mytorch/index.h): the rows, their order and the CPU's by-column strides,
    as_tuple, argwhere and out=, for each input of _nonzero_inputs."""
    for x in _nonzero_inputs():
        want, got = torch.nonzero(x), torch.nonzero(_dev(x))
        assert torch.equal(got.cpu(), want), (x.dtype, x.shape)
        assert got.shape == want.shape and (want.numel() == 0 or got.stride() == want.stride()), (x.shape, got.stride())
        assert torch.equal(torch.argwhere(_dev(x)).cpu(), torch.argwhere(x))
        if x.dim():
            for a, b in zip(torch.nonzero(_dev(x), as_tuple=True), torch.nonzero(x, as_tuple=True), strict=True):
                assert torch.equal(a.cpu(), b)
        out = torch.empty(0, dtype=torch.long, device="mytorch")
        assert torch.nonzero(_dev(x), out=out) is out and torch.equal(out.cpu(), want)


def test_masked_ops_on_nonzero_match_the_cpu():
    """masked_select, masked_scatter_ and boolean indexing, which are built on nonzero's positions."""
    gen = torch.Generator().manual_seed(8)
    for shape in ((50, 60), (4097,), (3, 4096, 2)):
        v = torch.randn(shape, generator=gen)
        m = torch.rand(shape, generator=gen) > 0.4
        assert torch.equal(_dev(v)[_dev(m)].cpu(), v[m])
        assert torch.equal(torch.masked_select(_dev(v), _dev(m)).cpu(), torch.masked_select(v, m))
        assert torch.equal(torch.masked_select(_dev(v), _dev(m[..., :1])).cpu(), torch.masked_select(v, m[..., :1]))
        src = torch.randn(v.numel(), generator=gen)
        want = v.clone().masked_scatter_(m, src)
        assert torch.equal(_dev(v).masked_scatter_(_dev(m), _dev(src)).cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_ldexp_of_integer_exponents_is_the_cpus(dtype):
    """torch.ldexp with an integral exponent runs ATen's ldexp_stub (BinaryOps.cpp ldexpStub: x * 2^n in double,
    rounded once), as the CPU and torch.cuda do, bit for bit the CPU's std::ldexp: over- and underflowing scales,
    inf, NaN, zeros and the dtype's extremes among the values, every exponent dtype the CPU takes, broadcast, out=
    and in place; bool and uint16 exponents refused as the CPU refuses them. Without the stub ATen composes
    pow(2, n) in x's dtype, which overflowed float16 at n = 16 (the negative control below)."""
    g = torch.Generator().manual_seed(5)
    fi = torch.finfo(dtype)
    x = torch.randn(3000, generator=g) * torch.exp2(torch.randint(-20, 20, (3000,), generator=g).float())
    x = torch.cat(
        [
            x.to(dtype),
            torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, fi.tiny, fi.max], dtype=dtype),
        ]
    )
    if dtype == torch.float64:
        x = torch.cat([x, torch.tensor([2.0**-1074, 3 * 2.0**-1074, 2.0**-1000, 2.0**1000], dtype=dtype)])
    for bound in (30, 300, 5000):
        n = torch.randint(-bound, bound, x.shape, generator=g)
        for nt in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            e = n.to(nt) if nt in (torch.int64, torch.int32, torch.int16) else (n.abs() % 100).to(nt)
            torch.testing.assert_close(
                torch.ldexp(x.to("mytorch"), e.to("mytorch")).cpu(), torch.ldexp(x, e), rtol=0, atol=0, equal_nan=True
            )
    half = torch.tensor([-0.1815, 0.5], dtype=dtype)
    assert torch.ldexp(half.to("mytorch"), torch.tensor([16, 3], device="mytorch")).isfinite().all()
    col, row = x[:5].view(5, 1), torch.tensor([1, -2, 3])
    assert torch.equal(torch.ldexp(col.to("mytorch"), row.to("mytorch")).cpu(), torch.ldexp(col, row))
    y, yd = x[:6].clone(), x[:6].to("mytorch")
    y.ldexp_(torch.arange(6))
    yd.ldexp_(torch.arange(6, device="mytorch"))
    torch.testing.assert_close(yd.cpu(), y, rtol=0, atol=0, equal_nan=True)
    for nt in (torch.bool, torch.uint16):
        with pytest.raises(NotImplementedError):
            torch.ldexp(x.to("mytorch"), torch.ones(x.shape, dtype=nt, device="mytorch"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_pow_of_two_is_exp2_and_matches_the_cpu(dtype):
    """pow(2, e) with a floating result runs as exp2(e) (csrc/aten/pointwise/BinaryOps.cpp powOfTwo, powTtOut): bit
    for bit exp2's result (the Pow row gave other bits on a fifth of these float32 values, so the route is seen),
    exact at integer exponents, aligned with the CPU's pow elsewhere; an integer result stays integer pow."""
    from mytorch.testing._compare import assert_aligned

    g = torch.Generator().manual_seed(11)
    ints = torch.arange(-30, 31, dtype=torch.float32)
    specials = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0, 0.0, 1e-30])
    e = torch.cat([ints, specials, torch.randn(4096, generator=g) * 8]).to(dtype)
    d = e.to("mytorch")
    got = torch.pow(2.0, d)
    torch.testing.assert_close(got.cpu(), torch.exp2(d).cpu(), rtol=0, atol=0, equal_nan=True)
    # 2 as a 0-dim CPU tensor takes the same route, and so does a 0-dim device tensor on the sim, whose memory the
    # glue reads without a synchronisation (how ATen composes ldexp of a floating exponent: BinaryOps.cpp powTtOut);
    # ldexp is then x * exp2(e). On CUDA (and the emulated build) the device's 2 stays the Pow row, aligned.
    x = torch.randn(e.shape, generator=g).to(dtype).to("mytorch")
    torch.testing.assert_close(torch.pow(torch.tensor(2.0), d).cpu(), got.cpu(), rtol=0, atol=0, equal_nan=True)
    two = torch.tensor(2.0, dtype=dtype, device="mytorch")
    if torch.mytorch.runtime() == "sim":
        torch.testing.assert_close(torch.pow(two, d).cpu(), got.cpu(), rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(torch.ldexp(x, d).cpu(), (x * got).cpu(), rtol=0, atol=0, equal_nan=True)
    assert_aligned(torch.pow(two, d).cpu(), torch.pow(2.0, e), torch.pow(2.0, e.double()), what="pow(2-tensor, e)")
    assert torch.equal(got.cpu()[: ints.numel()], torch.pow(2.0, e[: ints.numel()]))
    assert_aligned(got.cpu(), torch.pow(2.0, e), torch.pow(2.0, e.double()), what="pow(2, e)")
    k = torch.arange(12)
    assert torch.equal(torch.pow(2, k.to("mytorch")).cpu(), torch.pow(2, k))  # int64 pow
