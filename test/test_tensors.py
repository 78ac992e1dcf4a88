"""Creation, round trips for every CPU dtype, copies with conversion and layouts, views, in-place ops,
printing, scalars, resize and set_ on the mytorch device. References are CPU results."""

import pytest
import torch

ALL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.complex32,
]
KERNEL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


def sample(dtype, shape=(5, 7), seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(shape, generator=g, dtype=torch.float64) * 50
    if dtype == torch.bool:
        return base > 0
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    if not dtype.is_floating_point:
        lo = 0 if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -100
        return torch.randint(lo, 100, shape, generator=g).to(dtype)
    return base.to(dtype)


def same(a, b):
    """Bit-exact equality (every dtype, including those without a CPU `equal` kernel)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    x = sample(dtype)
    y = x.to("mytorch")
    assert y.device.type == "mytorch" and y.dtype == dtype and y.shape == x.shape
    assert same(y.cpu(), x)
    z = torch.empty(x.shape, dtype=dtype, device="mytorch")
    z.copy_(x)
    assert same(z.cpu(), x)
    assert same(y.clone().cpu(), x)  # device -> device


@pytest.mark.parametrize("dst", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("src", KERNEL_DTYPES, ids=str)
def test_device_cast_matches_cpu(src, dst):
    x = sample(src, (3, 11))
    ref = x.to(dst)
    out = x.to("mytorch").to(dst)  # cast kernel on the device
    assert same(out.cpu(), ref)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.uint16, torch.complex32], ids=str)
def test_cast_outside_kernel_types(dtype):
    x = sample(torch.float32)
    y = x.to("mytorch").to(dtype)
    assert same(y.cpu(), x.to(dtype))
    assert same(y.to(torch.float32).cpu(), x.to(dtype).to(torch.float32))


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.filterwarnings("ignore:Casting complex values to real discards")
@pytest.mark.parametrize("other", KERNEL_DTYPES, ids=str)
def test_complex32_casts_match_the_cpu_bit_for_bit(other):
    """Note [complex32 copies] (csrc/aten/tensor/Copy.cpp): to and from complex32 through its halves, on the device,
    for every kernel dtype, a transposed source, a broadcast one, and the halves' edges (NaN, -0, overflow to inf,
    a subnormal half, a rounding tie)."""
    x = sample(other, (6, 9))
    if other.is_floating_point or other.is_complex:
        edges = torch.tensor([float("nan"), -0.0, 1e6, 6.1e-5 / 3, 1 + 2**-11, -65519.0], dtype=torch.float64)
        x = x.clone()
        x.view(-1)[: edges.numel()] = edges.to(other)
    d = x.to("mytorch")
    for view in (lambda t: t, lambda t: t.t()):
        assert same(view(d).to(torch.complex32).cpu(), view(x).to(torch.complex32)), other
        c = view(x).to(torch.complex32)
        assert same(c.to("mytorch").to(other).cpu(), c.to(other)), other
    wide = torch.empty(3, 6, 9, dtype=torch.complex32, device="mytorch")
    assert same(wide.copy_(d).cpu(), torch.empty(3, 6, 9, dtype=torch.complex32).copy_(x)), other
    # the control: the casts stay on the device (the CPU's conversion synchronises, which sync-debug "error" refuses)
    c = d.to(torch.complex32)
    torch.mytorch.set_sync_debug_mode("error")
    try:
        d.to(torch.complex32), c.to(other)
        with pytest.raises(RuntimeError, match="synchroniz"):
            d.to(torch.float8_e5m2)  # a type without kernels still converts on the CPU
    finally:
        torch.mytorch.set_sync_debug_mode("default")


def test_conversion_on_upload_and_download():
    x = sample(torch.float64)
    assert same(x.to("mytorch", dtype=torch.float16).cpu(), x.to(torch.float16))
    d = x.to("mytorch")
    out = torch.empty(5, 7, dtype=torch.int32)
    out.copy_(d)
    assert same(out, x.to(torch.int32))


def test_non_contiguous_layouts_all_directions():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    d = x.to("mytorch")
    for view in (
        lambda t: t.transpose(1, 3),
        lambda t: t[:, 1:, ::2],
        lambda t: t.permute(3, 1, 0, 2),
        lambda t: t[..., 2],
        lambda t: t.expand(2, 2, 3, 4, 5)[1],
    ):
        assert same(view(d).cpu(), view(x))  # device (strided) -> host
        assert same(view(d).contiguous().cpu(), view(x).contiguous())
        h = torch.zeros_like(view(x).contiguous())
        dd = torch.zeros(view(x).shape, device="mytorch").transpose(0, -1).contiguous().transpose(0, -1)
        dd.copy_(view(x))  # host (strided) -> device (strided)
        assert same(dd.cpu(), view(x))
        h.copy_(view(d))
        assert same(h, view(x))


def test_broadcasting_copy():
    d = torch.zeros(4, 3, device="mytorch")
    d.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert same(d.cpu(), torch.tensor([1.0, 2.0, 3.0]).expand(4, 3))
    d.copy_(torch.tensor([[5.0], [6.0], [7.0], [8.0]], device="mytorch"))
    assert same(d.cpu(), torch.tensor([[5.0], [6.0], [7.0], [8.0]]).expand(4, 3))
    with pytest.raises(RuntimeError, match="broadcast|expand|size"):
        d.copy_(torch.ones(5))


def test_device_copies_and_cat_parts_without_an_iterator():
    """Note [Copy description without an iterator]: copy_ on one device and torch.cat's parts describe the copy
    themselves (dimensions by the destination's strides, merged where both are contiguous, broadcast sources); every
    layout, cast, broadcast and dimension count must give the CPU's bits, and what the description refuses (float8,
    more dimensions than the kernels take, another device, lazy bits) must still be right through the iterator."""
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5) - 60
    d = x.to("mytorch")
    views = [
        lambda t: t,
        lambda t: t.transpose(1, 3),
        lambda t: t.permute(3, 1, 0, 2),
        lambda t: t[:, 1:, ::2],
        lambda t: t[..., 2:3],
        lambda t: t.expand(2, 2, 3, 4, 5)[1],
    ]
    for dst_dtype in (torch.float32, torch.bfloat16, torch.int32, torch.bool, torch.complex64):
        for i, view in enumerate(views):
            for j in range(2):  # the destination contiguous, or its dimensions in reverse order in memory
                ref = torch.zeros(view(x).shape, dtype=dst_dtype)
                out = torch.zeros(view(x).shape, dtype=dst_dtype, device="mytorch")
                # the destination in another layout: a permuted buffer seen in view(x)'s shape
                perm = list(range(ref.dim()))[::-1] if j else list(range(ref.dim()))
                out = out.permute(perm).contiguous().permute(perm) if j else out
                ref.copy_(view(x))
                out.copy_(view(d))
                assert out.dtype == ref.dtype and torch.equal(out.cpu(), ref), (dst_dtype, i, j)
    # broadcast sources: a row, a column, a scalar tensor, leading dimensions
    dst = torch.zeros(3, 4, 5, device="mytorch")
    for src in (x[0, 0, 0], x[0, 0, :, :1], x[0, 0, 0, 0], x[0, :, :1, :1]):
        dst.copy_(src.to("mytorch"))
        assert torch.equal(dst.cpu(), torch.zeros(3, 4, 5).copy_(src))
    # 26 dimensions of size 2 (more than the kernels' 25) and 30 of size 1: merged, or through the iterator
    big = torch.arange(2**13, dtype=torch.float32).reshape([2] * 13).permute(list(range(13))[::-1])
    assert torch.equal(big.to("mytorch").contiguous().cpu(), big.contiguous())
    ones = torch.arange(6.0).reshape([1] * 30 + [2, 3])
    assert torch.equal(ones.to("mytorch").mT.contiguous().cpu(), ones.mT.contiguous())
    # float8 has no kernel dtype: the iterator's path
    f8 = torch.randn(4, 5).to(torch.float8_e4m3fn)
    assert torch.equal(f8.to("mytorch").t().contiguous().cpu().view(torch.uint8), f8.t().contiguous().view(torch.uint8))
    # cat: parts of several layouts and dtypes, an empty part, a conjugate view, a part on the CPU (an error, as the
    # CPU's), along every dimension
    a = x[0]
    parts = [
        a,
        a.transpose(1, 2).contiguous().transpose(1, 2),
        a[:, :, :2].to(torch.float64),
        a[:, :, :0],
        a.to(torch.int32)[:, :, 1:],
    ]
    for dim in (0, 1, 2):
        sel = [p if dim == 2 else p.narrow(2, 0, 1) for p in parts if p.shape[2] or dim == 2]
        ref = torch.cat(sel, dim)
        got = torch.cat([p.to("mytorch") for p in sel], dim)
        assert got.dtype == ref.dtype and torch.equal(got.cpu(), ref), dim
        out = torch.zeros(ref.mT.shape, dtype=torch.float32, device="mytorch").mT
        torch.cat([p.to("mytorch") for p in sel], dim, out=out)
        assert torch.equal(out.cpu(), ref.float()), dim
    z = torch.complex(x[0], -x[0])
    assert torch.equal(torch.cat([z.to("mytorch").conj(), z.to("mytorch")], 1).cpu(), torch.cat([z.conj(), z], 1))
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([torch.zeros(2, device="mytorch"), torch.zeros(2)])


def test_overlapping_copy_on_device():
    x = torch.arange(10.0)
    d = x.to("mytorch")
    d[1:].copy_(d[:-1].clone())
    x[1:] = x[:-1].clone()
    assert same(d.cpu(), x)
    for dev in ("cpu", "mytorch"):  # partial overlap is refused, as by ATen (it used to be accepted)
        d2 = torch.arange(10.0, device=dev)
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            d2[1:].copy_(d2[:-1])
        assert same(d2.cpu(), torch.arange(10.0))
    with pytest.raises(RuntimeError, match="more than one element"):
        torch.zeros(1, device="mytorch").expand(3).copy_(torch.ones(3))


@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
def test_fill_and_zero(dtype):
    d = torch.empty(6, 5, dtype=dtype, device="mytorch")
    value = True if dtype == torch.bool else (3 + 2j if dtype.is_complex else 3)
    d.fill_(value)
    assert same(d.cpu(), torch.full((6, 5), value, dtype=dtype))
    d[:, 1::2].zero_()
    ref = torch.full((6, 5), value, dtype=dtype)
    ref[:, 1::2] = 0
    assert same(d.cpu(), ref)
    d.t().fill_(torch.tensor(1, dtype=dtype))  # 0-dim tensor value, strided destination
    assert same(d.cpu(), torch.ones(6, 5, dtype=dtype))


def test_fill_errors():
    with pytest.raises(RuntimeError, match="overflow"):
        torch.empty(3, dtype=torch.uint8, device="mytorch").fill_(300)
    with pytest.raises(RuntimeError, match="0-dimension"):
        torch.empty(3, device="mytorch").fill_(torch.ones(2))


def test_factories():
    assert same(torch.zeros(3, 4, device="mytorch").cpu(), torch.zeros(3, 4))
    assert same(torch.ones(2, dtype=torch.int64, device="mytorch").cpu(), torch.ones(2, dtype=torch.int64))
    assert same(torch.full((2, 2), 7.5, device="mytorch").cpu(), torch.full((2, 2), 7.5))
    assert same(torch.arange(10, device="mytorch").cpu(), torch.arange(10))
    e = torch.empty_strided((2, 3), (1, 2), device="mytorch")
    assert e.stride() == (1, 2)
    assert torch.empty(0, device="mytorch").numel() == 0
    cl = torch.empty(2, 3, 4, 5, device="mytorch", memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)


def test_item_and_scalars():
    for dtype, v in (
        (torch.float32, 2.5),
        (torch.int64, -7),
        (torch.bool, True),
        (torch.float16, 0.5),
        (torch.complex64, 1 - 2j),
    ):
        t = torch.tensor(v, dtype=dtype).to("mytorch")
        assert t.item() == v
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2, device="mytorch").item()


def test_views_share_storage():
    d = torch.arange(12.0, device="mytorch")
    v = d.view(3, 4)
    v[1].fill_(-1)
    assert d.cpu()[4:8].eq(-1).all()
    assert v.t().stride() == (1, 4)
    assert v.reshape(2, 6).data_ptr() == d.data_ptr()
    u = d.unfold(0, 4, 2)
    assert same(u.cpu(), d.cpu().unfold(0, 4, 2))
    assert u.data_ptr() == d.data_ptr()
    c = torch.randn(3, 2).to("mytorch")
    assert same(torch.view_as_complex(c).cpu(), torch.view_as_complex(c.cpu()))
    assert same(torch.view_as_real(torch.view_as_complex(c)).cpu(), c.cpu())
    a = d.as_strided((2, 2), (3, 1), 1)
    assert same(a.cpu(), d.cpu().as_strided((2, 2), (3, 1), 1))


def test_in_place_ops_through_fallback():
    x = torch.randn(4, 5)
    d = x.to("mytorch")
    d.mul_(2).add_(1)
    d[:, 2] += 10
    ref = x * 2 + 1
    ref[:, 2] += 10
    assert same(d.cpu(), ref)
    d.t()[1].sub_(1)
    ref.t()[1].sub_(1)
    assert same(d.cpu(), ref)


def test_printing():
    x = torch.tensor([[1.5, -2.0], [3.25, 4.0]])
    s = repr(x.to("mytorch"))
    assert "device='mytorch:0'" in s and "3.2500" in s
    assert "dtype=torch.int32" in repr(torch.arange(3, dtype=torch.int32, device="mytorch"))


def test_resize_and_set():
    d = torch.arange(6.0, device="mytorch")
    d.resize_(2, 3)
    assert same(d.cpu(), torch.arange(6.0).view(2, 3))
    d.resize_(4, 4)  # grows the storage, keeps the old bytes
    assert same(d.flatten()[:6].cpu(), torch.arange(6.0))
    d.resize_(0)
    assert d.numel() == 0
    with pytest.raises(RuntimeError, match="negative"):
        d.resize_(-1)
    src = torch.arange(8.0, device="mytorch")
    e = torch.empty(0, device="mytorch")
    e.set_(src.untyped_storage(), 2, (2, 3), (3, 1))
    assert same(e.cpu(), torch.arange(8.0).as_strided((2, 3), (3, 1), 2))
    f = torch.empty(0, device="mytorch").set_(src)
    assert f.data_ptr() == src.data_ptr()
    g = torch.empty(0, device="mytorch").set_(src.untyped_storage(), 0, (10,), (1,))
    assert src.untyped_storage().nbytes() == 40  # grows a resizable storage, as on the CPU
    assert same(g[:8].cpu(), torch.arange(8.0))
    with pytest.raises(RuntimeError, match="device"):
        torch.empty(0, device="mytorch").set_(torch.ones(3).untyped_storage())


def test_storage_resize():
    s = torch.arange(4.0, device="mytorch").untyped_storage()
    s.resize_(64)
    assert s.nbytes() == 64
    assert same(torch.empty(0, device="mytorch").set_(s, 0, (4,), (1,)).cpu(), torch.arange(4.0))


def test_wrong_sizes_raise_clearly():
    with pytest.raises(RuntimeError, match="shape"):
        torch.ones(6, device="mytorch").view(4, 2)
    with pytest.raises(RuntimeError, match="size"):
        torch.ones(3, device="mytorch") + torch.ones(4, device="mytorch")
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.empty(-2, device="mytorch")


def test_conjugate_and_negative_views_copy():
    # Regression (found by the alignment suite): copying a conj-bit tensor recursed until the stack overflowed.
    z = torch.complex(torch.randn(6), torch.randn(6))
    d = z.to("mytorch")
    assert same(d.conj().cpu().resolve_conj(), z.conj().resolve_conj())
    assert same(d.conj().clone().cpu(), z.conj().resolve_conj())
    assert same(torch.empty_like(d).copy_(z.conj()).cpu(), z.conj().resolve_conj())
    assert same(d._neg_view().clone().cpu(), -z)
    e = torch.empty_like(d)
    e.conj().copy_(z)  # a conjugate destination
    assert same(e.cpu(), z.conj().resolve_conj())
    f = d.clone()
    f.conj_physical_()
    assert same(f.cpu(), z.conj().resolve_conj())


def test_complex_ops_and_their_backward():
    a = torch.rand(5, dtype=torch.float64, requires_grad=True)
    b = torch.rand(5, dtype=torch.float64, requires_grad=True)
    ad = a.detach().to("mytorch").requires_grad_()
    bd = b.detach().to("mytorch").requires_grad_()
    cot = torch.complex(torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64))
    g = torch.autograd.grad(torch.polar(a, b), (a, b), cot)
    gd = torch.autograd.grad(torch.polar(ad, bd), (ad, bd), cot.to("mytorch"))
    for x, y in zip(g, gd):
        torch.testing.assert_close(y.cpu(), x)
    x = torch.randn(16, dtype=torch.float64)
    torch.testing.assert_close(torch.fft.ifft(x.to("mytorch")).cpu(), torch.fft.ifft(x))


def test_module_to_keeps_parameters_and_tied_weights():
    # Regression (found by the fused-attention issue's GPT-2 test): Module.to() built new Parameters for a
    # PrivateUse1 move, untying shared weights, because c10's shallow-copy check does not list PrivateUse1.
    lin_a, lin_b = torch.nn.Linear(3, 3, bias=False), torch.nn.Linear(3, 3, bias=False)
    lin_b.weight = lin_a.weight
    model = torch.nn.Sequential(lin_a, lin_b)
    w = lin_a.weight
    model.to("mytorch")
    assert model[0].weight is w and model[1].weight is w and w.device.type == "mytorch"
    model.cpu()
    assert model[0].weight is model[1].weight and w.device.type == "cpu"


NON_STANDARD_BOOL_OPS = {
    "to int64": lambda b, o: b.to(torch.int64),
    "to float (strided)": lambda b, o: b.t().to(torch.float32),
    "eq": lambda b, o: b == o,
    "ne": lambda b, o: torch.ne(b, o),
    "add": lambda b, o: b + o,
    "logical_and": lambda b, o: torch.logical_and(b, o),
    "bitwise_xor": lambda b, o: b ^ o,
    "mul by float": lambda b, o: b * 2.5,
    "where": lambda b, o: torch.where(b, 1.0, -1.0),
    "masked_fill": lambda b, o: torch.zeros(b.shape, device=b.device).masked_fill(b, 3.0),
    "sum": lambda b, o: b.sum(),
    "sum dim 0": lambda b, o: b.sum(0),
    "sum dim 1 (strided rows)": lambda b, o: b.sum(1),
    "any / all": lambda b, o: torch.stack([b.any(), b.all(), b.all(1).any()]),
    "count_nonzero": lambda b, o: torch.count_nonzero(b),
    "cumsum": lambda b, o: b.cumsum(1),
    "max": lambda b, o: b.to(torch.uint8).max(),
}


@pytest.mark.every_runtime
@pytest.mark.parametrize("name", sorted(NON_STANDARD_BOOL_OPS))
def test_bool_bytes_other_than_one_read_as_true(name):
    """A uint8 tensor viewed as bool may hold 2..255 (PyTorch's test_non_standard_bool_values): every kernel reads
    such a byte as True, as the CPU's loops do (mt_load in kernels/include/mytorch/dtype.h)."""
    g = torch.Generator().manual_seed(0)
    raw = torch.randint(0, 255, (9, 33), dtype=torch.uint8, generator=g) * (torch.rand(9, 33, generator=g) < 0.5)
    other = torch.rand(9, 33, generator=g) < 0.5
    fn = NON_STANDARD_BOOL_OPS[name]
    want = fn(raw.view(torch.bool), other)
    got = fn(raw.to("mytorch").view(torch.bool), other.to("mytorch"))
    assert got.dtype == want.dtype and torch.equal(got.cpu().to(torch.int64), want.to(torch.int64)), name
    assert raw.max() > 1  # the input does hold non-standard bytes (else the test could not fail)


@pytest.mark.parametrize("reduce", ["prod", "amax", "mean", "multiply"])
def test_complex_scatter_reductions_match_the_cpu(reduce):
    """Complex scatter reductions other than add and assign run through the CPU fallback (the kernels add and
    assign complex values as real pairs only): the CPU's result, not an error."""
    g = torch.Generator().manual_seed(0)
    self = torch.randn(4, 5, dtype=torch.complex64, generator=g)
    src = torch.randn(4, 5, dtype=torch.complex64, generator=g)
    index = torch.randint(0, 4, (4, 5), generator=g)
    if reduce == "multiply":
        want = self.clone().scatter_(0, index, src, reduce=reduce)
        got = self.to("mytorch").scatter_(0, index.to("mytorch"), src.to("mytorch"), reduce=reduce)
    elif reduce == "amax":
        with pytest.raises(RuntimeError) as cpu_error:
            self.scatter_reduce(0, index, src, reduce)
        with pytest.raises(RuntimeError, match=str(cpu_error.value)[:30]):
            self.to("mytorch").scatter_reduce(0, index.to("mytorch"), src.to("mytorch"), reduce)
        return
    else:
        want = self.scatter_reduce(0, index, src, reduce)
        got = self.to("mytorch").scatter_reduce(0, index.to("mytorch"), src.to("mytorch"), reduce)
    assert torch.equal(got.cpu(), want)  # the CPU's kernel on the same values: exact


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_row_scatter_matches_the_cpu(layout):
    """Note [Sim scatter]: a scatter whose index is constant along the last dimension goes by rows of targets, split
    over workers by target memory; the result is the CPU's (the same additions in the same order), also for a
    target whose rows interleave in memory, and an index out of bounds still raises IndexError."""
    g = torch.Generator().manual_seed(0)
    src = torch.randn(3000, 300, generator=g)
    index = torch.randint(0, 40, (3000,), generator=g)
    base = torch.randn(40, 300, generator=g) if layout == "contiguous" else torch.randn(300, 40, generator=g).t()
    want = base.clone().index_add_(0, index, src, alpha=0.5)
    dev_base = base.to("mytorch") if layout == "contiguous" else base.t().contiguous().to("mytorch").t()
    got = dev_base.index_add_(0, index.to("mytorch"), src.to("mytorch"), alpha=0.5)
    assert torch.equal(got.cpu(), want)
    perm = torch.randperm(3000, generator=g)
    want_copy = torch.zeros(3000, 300).index_copy_(0, perm, src)
    got_copy = torch.zeros(3000, 300, device="mytorch").index_copy_(0, perm.to("mytorch"), src.to("mytorch"))
    assert torch.equal(got_copy.cpu(), want_copy)
    bad = index.clone()
    bad[2500] = 40
    with pytest.raises(RuntimeError) as cpu_error:
        torch.zeros(40, 300).index_add_(0, bad, src)
    with pytest.raises(type(cpu_error.value), match="out of"):
        torch.zeros(40, 300, device="mytorch").index_add_(0, bad.to("mytorch"), src.to("mytorch")).cpu()


HALF_ACCUMULATIONS = {
    "index_add": lambda x, i, s: x.index_add(0, i, s),
    "scatter_add": lambda x, i, s: x.scatter_add(0, i.view(-1, 1).expand_as(s), s),
    "scatter_reduce_sum": lambda x, i, s: x.scatter_reduce(0, i.view(-1, 1).expand_as(s), s, "sum"),
    "scatter_reduce_prod": lambda x, i, s: x.scatter_reduce(0, i.view(-1, 1).expand_as(s), s, "prod"),
    "put_accumulate": lambda x, i, s: x.put(i, s[:, 0].contiguous(), accumulate=True),
}


@pytest.mark.every_runtime
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(HALF_ACCUMULATIONS))
def test_half_precision_scatter_accumulates_in_float(name, dtype):
    """Note [Reduced-precision scatter accumulation]: many contributions to one position (here 64 into each of 4,
    summing near zero) are accumulated in float32 and rounded once, as the CPU does: within an ulp of the float64
    result. Rounding after each contribution (the kernels' arithmetic in the target's dtype) misses by tens of
    ulps on these inputs: the second half of the test shows it, so the first can fail."""
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(4, 3, generator=g) + 1).to(dtype)
    src = (torch.rand(256, 3, generator=g) * 64 - 32).to(dtype)
    if name == "scatter_reduce_prod":
        src = (1 + (torch.rand(256, 3, generator=g) - 0.5) / 8).to(dtype)
    src[128:] = -src[:128] if name != "scatter_reduce_prod" else src[128:]  # sums cancel: large partial sums
    index = torch.arange(256) % 4
    fn = HALF_ACCUMULATIONS[name]
    gold = fn(x.double(), index, src.double())
    got = fn(x.to("mytorch"), index.to("mytorch"), src.to("mytorch")).cpu()
    ulp = gold.abs().clamp(min=torch.finfo(dtype).tiny) * torch.finfo(dtype).eps
    assert bool(((got.double() - gold).abs() <= ulp).all()), (name, (got.double() - gold).abs().max())
    # the negative control: the same sums rounded after every contribution are far from float64
    stepwise = x.clone().flatten() if name == "put_accumulate" else x.clone()
    for k in range(256):
        if name == "put_accumulate":
            pos = int(index[k])
            stepwise[pos] = stepwise[pos] + src[k, 0]
        elif name == "scatter_reduce_prod":
            stepwise[index[k]] = stepwise[index[k]] * src[k]
        else:
            stepwise[index[k]] = stepwise[index[k]] + src[k]
    stepwise = stepwise.view_as(gold)
    assert bool(((stepwise.double() - gold).abs() > ulp).any()), name


def test_complex_of_a_transposed_pair_takes_its_layout():
    """torch.complex of a transposed pair: the result, and an out= that gets resized (not one of the right shape),
    take the inputs' layout, as TensorIterator's restriding gives them on the CPU (Composed.cpp complexOut)."""
    import warnings

    gen = torch.Generator().manual_seed(3)
    re, im = torch.randn(4, 5, generator=gen).t(), torch.randn(4, 5, generator=gen).t()
    for out in (None, 0, 20, (5, 4)):
        if out is None:
            got, ref = torch.complex(re.to("mytorch"), im.to("mytorch")), torch.complex(re, im)
        else:
            shape = (out,) if isinstance(out, int) else out
            got = torch.empty(shape, dtype=torch.complex64, device="mytorch")
            ref = torch.empty(shape, dtype=torch.complex64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the 20-element out='s resize warning, on both sides
                torch.complex(re.to("mytorch"), im.to("mytorch"), out=got)
                torch.complex(re, im, out=ref)
        assert got.stride() == ref.stride(), (out, got.stride(), ref.stride())
        assert torch.equal(got.cpu(), ref), out
