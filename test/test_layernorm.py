"""Fused LayerNorm / RMSNorm (issue: fused normalisation): forward and backward against an fp64 CPU
reference with tolerances relative to PyTorch's own error at the dtype, the odd and extreme shapes the
width-specialised kernels must survive, gradcheck in float64, the fused residual-add custom ops, and that
nn.LayerNorm / nn.RMSNorm reach our kernels without a fallback."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import mytorch
from mytorch.testing._compare import assert_aligned

DEV = "mytorch"
WIDTHS = [1, 7, 33, 1000, 4097, 65536]
pytestmark = pytest.mark.native


def assert_norm_like_torch(norm, x, w, b, dtype, ns):
    """Forward + backward of `norm` on mytorch, the CPU at `dtype` and the CPU at fp64."""
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    out = {}
    for name, dev, dt in [("dev", DEV, dtype), ("cpu", "cpu", dtype), ("gold", "cpu", torch.float64)]:
        xs = x.detach().to(dt).to(dev).clone().requires_grad_()
        ws = w.detach().to(dt).to(dev).clone().requires_grad_() if w is not None else None
        bs = b.detach().to(dt).to(dev).clone().requires_grad_() if b is not None else None
        y = norm(xs, ns, ws, bs)
        y.backward(g.to(dt).to(dev))
        out[name] = [y, xs.grad] + [t.grad for t in (ws, bs) if t is not None]
    for i, what in enumerate(["y", "dx", "dw", "db"][: len(out["dev"])]):
        assert_aligned(out["dev"][i], out["cpu"][i], out["gold"][i], what)


def _layer(x, ns, w, b):
    return F.layer_norm(x, ns, w, b, 1e-5)


def _rms(x, ns, w, b):
    return F.rms_norm(x, ns, w, 1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_widths_and_dtypes(norm, width, dtype):
    rows = 1 if width == 65536 else 5
    gen = torch.Generator().manual_seed(width)
    x = torch.randn(rows, width, generator=gen) * 2 + 0.5
    w = torch.rand(width, generator=gen) + 0.5
    b = torch.randn(width, generator=gen) if norm == "layer" else None
    assert_norm_like_torch(_layer if norm == "layer" else _rms, x, w, b, dtype, (width,))


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_one_row_no_affine_multi_dim_and_non_contiguous(norm):
    fn = _layer if norm == "layer" else _rms
    assert_norm_like_torch(fn, torch.randn(1, 64), None, None, torch.float32, (64,))
    x = torch.randn(3, 4, 6, 10)
    assert_norm_like_torch(
        fn, x, torch.rand(6, 10) + 0.5, torch.randn(6, 10) if norm == "layer" else None, torch.float32, (6, 10)
    )
    t = torch.randn(12, 40).t()  # non-contiguous: made contiguous once by the glue
    assert_norm_like_torch(fn, t, torch.rand(12) + 0.5, None, torch.float32, (12,))


def test_zero_variance_rows_and_large_magnitudes():
    x = torch.full((3, 256), 7.0)
    x[1] = 0.0
    assert_norm_like_torch(_layer, x, torch.rand(256) + 0.5, torch.randn(256), torch.float32, (256,))
    big = torch.randn(4, 777) * 1e-3 + 1e4  # a large mean over a small spread: a one-pass variance would cancel
    assert_norm_like_torch(_layer, big, None, None, torch.float32, (777,))
    assert_norm_like_torch(_rms, torch.randn(4, 300) * 3e4, torch.rand(300), None, torch.float32, (300,))


def test_mixed_precision_parameters():
    # autocast keeps LayerNorm's parameters in float32 with half activations
    x = torch.randn(6, 96)
    w, b = torch.rand(96) + 0.5, torch.randn(96)
    y = F.layer_norm(x.bfloat16().to(DEV), (96,), w.to(DEV), b.to(DEV))
    ref = F.layer_norm(x.bfloat16(), (96,), w, b)
    assert y.dtype == torch.bfloat16
    assert_aligned(
        y, ref, F.layer_norm(x.bfloat16().double(), (96,), w.double(), b.double()), "bf16 with fp32 parameters"
    )


def test_modules_and_autocast_run_native():
    for mod in (nn.LayerNorm(48), nn.RMSNorm(48), nn.LayerNorm(48, elementwise_affine=False)):
        ref = mod
        dev = type(mod)(48).to(DEV) if mod.weight is not None else nn.LayerNorm(48, elementwise_affine=False).to(DEV)
        dev.load_state_dict(ref.state_dict())
        x = torch.randn(2, 3, 48)
        assert_aligned(dev(x.to(DEV)), ref(x), copy.deepcopy(ref).double()(x.double()), type(mod).__name__)
    x = torch.randn(4, 48, device=DEV)
    with torch.autocast(DEV, dtype=torch.bfloat16):
        y = nn.LayerNorm(48).to(DEV)(x)
    assert y.dtype == torch.float32  # layer_norm runs in float32 under autocast, as on CUDA
    ops = mytorch.audit(lambda: F.rms_norm(x.requires_grad_(), (48,)).sum().backward()).ops
    assert "aten::_fused_rms_norm" in ops and "aten::_fused_rms_norm_backward" in ops
    assert "aten::pow.Tensor_Scalar" not in ops  # not the composite


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_gradcheck_float64(norm):
    x = torch.randn(3, 9, dtype=torch.float64, device=DEV, requires_grad=True)
    w = torch.rand(9, dtype=torch.float64, device=DEV, requires_grad=True)
    b = torch.randn(9, dtype=torch.float64, device=DEV, requires_grad=True)
    if norm == "layer":
        assert torch.autograd.gradcheck(lambda a, c, d: F.layer_norm(a, (9,), c, d), (x, w, b))
        assert torch.autograd.gradcheck(
            lambda a, r, c, d: mytorch.ops.add_layer_norm(a, r, (9,), c, d),
            (x, torch.randn_like(x).requires_grad_(), w, b),
        )
    else:
        assert torch.autograd.gradcheck(lambda a, c: F.rms_norm(a, (9,), c, 1e-6), (x, w))
        assert torch.autograd.gradcheck(
            lambda a, r, c: mytorch.ops.add_rms_norm(a, r, (9,), c, 1e-6), (x, torch.randn_like(x).requires_grad_(), w)
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_add_norm_matches_unfused(dtype):
    x, r = torch.randn(5, 130).to(dtype), torch.randn(5, 130).to(dtype)
    w, b = torch.rand(130).to(dtype) + 0.5, torch.randn(130).to(dtype)
    y, s = mytorch.ops.add_layer_norm(x.to(DEV), r.to(DEV), (130,), w.to(DEV), b.to(DEV), 1e-5)
    assert torch.equal(s.cpu(), x + r)  # the sum, rounded as the unfused add
    s64 = (x + r).double()  # the rounded sum, normalised in float64: the golden values
    assert_aligned(
        y,
        F.layer_norm(x + r, (130,), w, b, 1e-5),
        F.layer_norm(s64, (130,), w.double(), b.double(), 1e-5),
        "add_layer_norm",
    )
    y2, s2 = mytorch.ops.add_rms_norm(x.to(DEV), r.to(DEV), (130,), w.to(DEV), 1e-6)
    assert_aligned(y2, F.rms_norm(x + r, (130,), w, 1e-6), F.rms_norm(s64, (130,), w.double(), 1e-6), "add_rms_norm")
    # the CPU implementation of the custom ops (the reference) agrees
    yc, sc = mytorch.ops.add_layer_norm(x, r, (130,), w, b, 1e-5)
    assert_aligned(y, yc, F.layer_norm(s64, (130,), w.double(), b.double(), 1e-5), "the ops' CPU reference")


def test_fused_add_norm_opcheck_and_compile():
    torch.mytorch.set_fallback_mode("silent")
    x, r, w = torch.randn(4, 32), torch.randn(4, 32), torch.rand(32)
    torch.library.opcheck(torch.ops.mytorch.add_layer_norm.default, (x, r, [32], w, None, 1e-5))
    torch.library.opcheck(torch.ops.mytorch.add_rms_norm.default, (x, r, [32], w, 1e-6))

    def block(a, c):
        y, s = mytorch.ops.add_rms_norm(a, c, (32,), w, 1e-6)
        return y * 2 + s

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, r), block(x, r))


def test_bad_input_raises():
    x = torch.randn(3, 8, device=DEV)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (7,))
    with pytest.raises(RuntimeError, match="residual"):
        mytorch.ops.add_layer_norm(x, torch.randn(3, 9, device=DEV), (8,))
    with pytest.raises(RuntimeError, match="elements"):
        F.layer_norm(x, (8,), torch.ones(5, device=DEV))


@pytest.mark.parametrize("weight", [None, "same", "float32"])
def test_rms_norm_where_aten_composes_it(weight):
    """ATen's rms_norm is not the fused op for complex inputs and for a weight of another dtype: it composes
    pointwise ops, and so does mytorch's (on its own kernels), forward and backward, against complex128/float64."""
    torch.mytorch.set_fallback_mode("silent")  # complex rsqrt and pow have no native kernel
    from mytorch.testing._compare import compare_tensor

    g = torch.Generator().manual_seed(3)
    for dtype in (torch.complex64, torch.bfloat16):
        if dtype == torch.bfloat16 and weight is None:
            continue
        x = torch.randn(4, 6, dtype=dtype, generator=g)
        w = None if weight is None else torch.randn(6, dtype=dtype if weight == "same" else torch.float32, generator=g)
        out = {}
        for name, dev, up in [("dev", DEV, False), ("cpu", "cpu", False), ("gold", "cpu", True)]:
            xs = (x.to(torch.complex128 if x.is_complex() else torch.float64) if up else x).to(dev).clone()
            ws = None if w is None else (w.to(torch.complex128 if w.is_complex() else torch.float64) if up else w)
            ws = None if ws is None else ws.to(dev).clone().requires_grad_()
            xs.requires_grad_()
            y = F.rms_norm(xs, (6,), ws, 1e-6)
            y.abs().sum().backward()
            out[name] = [y, xs.grad] + ([] if ws is None else [ws.grad])
        for d, c, gold in zip(out["dev"], out["cpu"], out["gold"]):
            assert d.dtype == c.dtype
            e = compare_tensor(d, c, gold.to(c.dtype) if c.dtype == torch.bfloat16 else gold)
            assert e.ok, (dtype, weight, e.as_dict(), e.problems)


@pytest.mark.parametrize("width", [4, 1000, 4097])
def test_variance_overflow_reads_nan(width):
    """Finite values whose variance overflows float32: LayerNorm's rows read NaN at every width instead of a silent
    row of zeros (1 / sqrt(inf)); the CPU gives NaN up to some width and zeros beyond (its vectorized path).
    RMSNorm's mean of squares overflows to rstd 0, as ATen's RMSNorm gives. The normal row beside is normal."""
    x = torch.linspace(1e20, 4e20, width).reshape(1, width).repeat(2, 1)
    x[1] = torch.linspace(-1, 1, width)
    for norm in (_layer, _rms):
        ref = norm(x, (width,), None, None)
        got = norm(x.to(DEV), (width,), None, None).cpu()
        assert bool(got[0].isnan().all()) if norm is _layer else torch.equal(got[0], torch.zeros(width))
        if width <= 1000 or norm is _rms:
            assert torch.equal(got[0].isnan(), ref[0].isnan())
        assert_aligned(got[1], ref[1], norm(x[1:].double(), (width,), None, None)[0], "normal row")
