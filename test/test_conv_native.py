"""Convolutions and their column transforms on mytorch's own kernels (Note [Convolution family]), with the fallback
forbidden: F.unfold/F.fold (im2col/col2im) of every dtype the CPU takes, 1-D, 2-D and 3-D convolutions and
transposed convolutions forward and backward against the CPU, integer convolutions bit for bit, and the CPU's
refusals. (Split from test_nn_native.py, whose helper it shares.)"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from test_nn_native import DEV, assert_fwd_bwd_match_cpu

pytestmark = pytest.mark.native

g0 = torch.Generator().manual_seed(0)


FOLDS = [
    dict(kernel_size=3),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 1)),
    dict(kernel_size=(1, 4), padding=(0, 3), stride=3),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kwargs", FOLDS)
def test_unfold_and_fold(kwargs, dtype):
    """F.unfold (aten::im2col) and F.fold (aten::col2im), batched and unbatched, each with its gradient (the
    other op); overlapping windows make fold sum several columns into one pixel."""
    x = torch.randn(2, 3, 9, 8, generator=g0)
    assert_fwd_bwd_match_cpu(lambda t: F.unfold(t, **kwargs), x, dtype=dtype)
    assert_fwd_bwd_match_cpu(lambda t: F.unfold(t, **kwargs), x[0], dtype=dtype)
    cols = F.unfold(x, **kwargs)
    assert_fwd_bwd_match_cpu(lambda c: F.fold(c, (9, 8), **kwargs), cols, dtype=dtype)
    assert_fwd_bwd_match_cpu(lambda c: F.fold(c, (9, 8), **kwargs), cols[0], dtype=dtype)


@pytest.mark.parametrize("kwargs", FOLDS)
def test_unfold_and_fold_of_bool_and_complex(kwargs):
    """The CPU's other im2col/col2im dtypes: bool (fold ORs the overlapping columns) and complex (fold adds them)."""
    x = torch.randn(2, 3, 9, 8, generator=g0)
    for t in (x > 0.7, torch.complex(x, x.flip(-1)), torch.complex(x, -x).to(torch.complex128)):
        cols = F.unfold(t, **kwargs)
        assert torch.equal(F.unfold(t.to(DEV), **kwargs).cpu(), cols)
        assert torch.equal(F.fold(cols.to(DEV), (9, 8), **kwargs).cpu(), F.fold(cols, (9, 8), **kwargs))
    torch.mytorch.set_fallback_mode("silent")  # dtypes the CPU's kernels refuse, refused there
    for t in (x.int(), x.to(torch.complex32)):
        with pytest.raises(RuntimeError, match="not implemented"):
            F.unfold(t.to(DEV), **kwargs)


def test_unfold_and_fold_bad_arguments_and_empty():
    x = torch.randn(2, 3, 6, 6, generator=g0)
    for call in (
        lambda t: F.fold(F.unfold(t, 3), (7, 6), 3),  # columns of a 6x6 image folded into a 7x6 one
        lambda t: F.fold(t.flatten(2)[:, :5], (6, 6), 2),  # 5 rows: not a multiple of 2x2
        lambda t: F.unfold(t, 7),  # a window larger than the padded image
        lambda t: F.unfold(t, 0),
        lambda t: F.unfold(t, 2, dilation=2**40),
        lambda t: torch.ops.aten.im2col(t, [2], [1, 1], [0, 0], [1, 1]),
    ):
        with pytest.raises(RuntimeError) as dev:
            call(x.to(DEV))
        with pytest.raises(RuntimeError):
            call(x)
        assert "expected" in str(dev.value).lower() or "size" in str(dev.value).lower(), str(dev.value)
    empty = torch.randn(0, 3, 6, 6)
    assert F.unfold(empty.to(DEV), 2).shape == F.unfold(empty, 2).shape
    assert F.fold(F.unfold(empty, 2).to(DEV), (6, 6), 2).shape == (0, 3, 6, 6)
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    with pytest.raises(RuntimeError, match="dtype|Float|Double"):
        torch.ops.aten.im2col.out(x.to(DEV), [2, 2], [1, 1], [0, 0], [1, 1], out=out)


def test_integer_average_pooling_is_the_cpus():
    """int64 average pooling (the CPU's one integer type there): the window's sum in int64, wrapping, and the
    truncated quotient, with and without the padding, a negative divisor_override and sums that overflow."""
    xi = torch.randint(-1000, 1000, (2, 3, 5, 6, 7), generator=g0)
    xi[0, 0, :2, :2, :2] = 2**62  # eight of these wrap
    for f in (
        lambda t: F.avg_pool3d(t, 3, 2, 1),
        lambda t: F.avg_pool3d(t, (2, 3, 2), 2, 1, True, False),
        lambda t: F.avg_pool3d(t, 2, divisor_override=-3),
        lambda t: F.avg_pool2d(t[:, :, 0], 3, 2, 1),
        lambda t: F.avg_pool2d(t[:, :, 3], 2, 1, 1, True, False, -1),
        lambda t: F.avg_pool1d(t[:, :, 0, 0], 3),
    ):
        # (t[:, :, 3] holds no 2**62: a window summing to INT64_MIN divided by -1 traps in the CPU's kernel)
        assert torch.equal(f(xi.to(DEV)).cpu(), f(xi))
    with pytest.raises(RuntimeError):  # int32: the CPU's refusal
        F.avg_pool2d(xi[:, :, 0].int().to(DEV), 2)


@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2, groups=3), dict(padding="same", bias=False)],
)
def test_conv2d(kwargs):
    conv = nn.Conv2d(3, 6, 3, **kwargs)
    assert_fwd_bwd_match_cpu(
        lambda t, w: F.conv2d(
            t,
            w,
            conv.bias.to(t.device, t.dtype) if conv.bias is not None else None,
            conv.stride,
            conv.padding,
            conv.dilation,
            conv.groups,
        ),
        torch.randn(2, 3, 8, 9, generator=g0),
        conv.weight.detach(),
        grad_inputs=(0, 1),
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(stride=2, padding=1, output_padding=1),
        dict(
            stride=(3, 2), padding=(1, 2), dilation=(4, 4), output_padding=(2, 3), groups=3
        ),  # output_padding >= stride
        dict(dilation=2, groups=3, bias=False),
    ],
)
def test_conv_transpose2d(kwargs):
    """Transposed convolutions on the convolution's own passes (Note [Transposed convolution]), input, weight and
    bias gradients."""
    conv = nn.ConvTranspose2d(6, 9, 3, **kwargs)
    bias = conv.bias.detach() if conv.bias is not None else None
    assert_fwd_bwd_match_cpu(
        lambda t, w: F.conv_transpose2d(
            t,
            w,
            bias.to(t.device, t.dtype) if bias is not None else None,
            conv.stride,
            conv.padding,
            conv.output_padding,
            conv.groups,
            conv.dilation,
        ),
        torch.randn(2, 6, 5, 4, generator=g0),
        conv.weight.detach(),
        grad_inputs=(0, 1),
    )


def test_conv_transpose1d():
    assert_fwd_bwd_match_cpu(
        lambda t, w: F.conv_transpose1d(t, w, stride=3, padding=2, output_padding=1, dilation=2),
        torch.randn(2, 4, 7, generator=g0),
        torch.randn(4, 5, 3, generator=g0),
        grad_inputs=(0, 1),
    )


def test_conv1d_and_errors():
    assert_fwd_bwd_match_cpu(
        lambda t, w: F.conv1d(t, w, padding=1, stride=2),
        torch.randn(2, 4, 11),
        torch.randn(5, 4, 3),
        grad_inputs=(0, 1),
    )
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(torch.randn(1, 3, 5, 5, device=DEV), torch.randn(4, 2, 3, 3, device=DEV))


CONV3D = [
    dict(),
    dict(stride=(1, 2, 2), padding=(1, 0, 2), dilation=(2, 1, 1), groups=3),
    dict(padding="same", dilation=(1, 2, 1), bias=False),
]


@pytest.mark.parametrize("kwargs", CONV3D)
def test_conv3d(kwargs):
    """3-D convolutions on the convolution family's passes (vol2col + GEMM on sim, cuDNN's Nd descriptors on a GPU),
    input, weight and bias gradients."""
    conv = nn.Conv3d(3, 6, (2, 3, 2), **kwargs)
    bias = conv.bias.detach() if conv.bias is not None else None
    assert_fwd_bwd_match_cpu(
        lambda t, w, *b: F.conv3d(t, w, b[0] if b else None, conv.stride, conv.padding, conv.dilation, conv.groups),
        torch.randn(2, 3, 5, 6, 7, generator=g0),
        conv.weight.detach(),
        *([bias] if bias is not None else []),
        grad_inputs=(0, 1, 2) if bias is not None else (0, 1),
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(stride=2, padding=1, output_padding=1),
        dict(stride=(1, 2, 3), padding=(0, 1, 1), dilation=(2, 1, 1), output_padding=(1, 0, 2), groups=3),
    ],  # the second's output padding reaches the dilation in depth (the canvas path)
)
def test_conv_transpose3d(kwargs):
    conv = nn.ConvTranspose3d(6, 3, (2, 3, 2), **kwargs)
    assert_fwd_bwd_match_cpu(
        lambda t, w, b: F.conv_transpose3d(
            t, w, b, conv.stride, conv.padding, conv.output_padding, conv.groups, conv.dilation
        ),
        torch.randn(2, 6, 3, 4, 5, generator=g0),
        conv.weight.detach(),
        conv.bias.detach(),
        grad_inputs=(0, 1, 2),
    )


def test_integer_convolutions_are_the_cpus():
    """Integer convolutions (which torch.cuda lacks; the CPU takes every integer dtype, dilated and transposed ones
    only int64) run on im2col + the integer GEMM: exact, wrapping as the CPU does; what the CPU refuses is refused."""
    x = torch.randint(-100, 100, (2, 4, 5, 6, 7), generator=g0)
    w = torch.randint(-100, 100, (6, 2, 2, 3, 2), generator=g0)
    b = torch.randint(-100, 100, (6,), generator=g0)
    x[0, :, :3, :3, :3] = 2**40  # int64 products that wrap
    calls = [
        lambda t, k, c: F.conv3d(t, k, c, stride=(1, 2, 1), padding=1, groups=2),
        lambda t, k, c: F.conv2d(t[:, :, 1], k[:, :, 0], c, padding=(2, 0), groups=2),
        lambda t, k, c: F.conv1d(t[:, :, 1, 2], k[:, :, 0, 1], None, stride=3, groups=2),
    ]
    for dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        xt, wt, bt = x.to(dtype), w.to(dtype), b.to(dtype)
        for f in calls:
            ref = f(xt, wt, bt)
            assert torch.equal(f(xt.to(DEV), wt.to(DEV), bt.to(DEV)).cpu(), ref), dtype

    def dilated(t, k, c):
        return F.conv3d(t, k, c, padding=1, dilation=(2, 1, 1), groups=2)

    assert torch.equal(dilated(x.to(DEV), w.to(DEV), b.to(DEV)).cpu(), dilated(x, w, b))
    wt = torch.randint(-100, 100, (4, 3, 2, 3, 2), generator=g0)  # (in, out / groups, kernel...)
    transposed = (
        lambda t, k: F.conv_transpose3d(t, k, stride=2, padding=1, output_padding=1),
        lambda t, k: F.conv_transpose2d(t[:, :, 0], k[:, :, 0], stride=(1, 3), groups=2),
    )
    for f in transposed:
        assert torch.equal(f(x.to(DEV), wt.to(DEV)).cpu(), f(x, wt))
    torch.mytorch.set_fallback_mode("silent")  # the refusals are the CPU's, reached through the fallback
    for f, args in [
        (transposed[1], (x.to(torch.uint8), wt.to(torch.uint8))),
        (dilated, (x.int(), w.int(), None)),
        (calls[1], (x.bool(), w.bool(), None)),
    ]:
        with pytest.raises(RuntimeError, match="not implemented") as cpu:
            f(*args)
        with pytest.raises(RuntimeError, match="not implemented") as dev:
            f(*(a.to(DEV) if a is not None else None for a in args))
        assert str(dev.value) == str(cpu.value)


def test_convolutions_of_every_rank_do_not_fall_back():
    """convolution_overrideable and its backward run on mytorch's passes for 1-D to 3-D, plain and transposed (the
    module runs with the fallback forbidden; the counters say it too)."""
    for nd in (1, 2, 3):
        for conv in (getattr(nn, f"Conv{nd}d")(4, 2, 3, padding=1), getattr(nn, f"ConvTranspose{nd}d")(4, 2, 2, 2)):
            x = torch.randn((2, 4) + (5,) * nd, device=DEV, requires_grad=True)
            conv.to(DEV)(x).square().sum().backward()
            assert x.grad is not None and conv.weight.grad is not None
    assert torch.mytorch.fallback_stats() == {}


@pytest.mark.every_runtime
def test_large_convolutions_take_the_sims_host_route_for_forward_and_input_gradient():
    """Note [Sim convolution host route]: on sim a convolution past kHostConvMacs runs its forward and input-gradient
    passes on the CPU's oneDNN (counted as the host route "conv"), its weight gradient, small and 1x1 convolutions on
    the sim's own passes; the results are the CPU's within the alignment rule. Other runtimes never take it."""
    from mytorch.testing._compare import assert_aligned

    g = torch.Generator().manual_seed(5)
    for dtype, (xs, ws, kw) in (
        (torch.float32, ((2, 32, 32, 32), (32, 32, 3, 3), dict(padding=1))),
        (torch.bfloat16, ((4, 16, 512), (32, 16, 5), dict(padding=2, stride=2))),
        (torch.float32, ((2, 16, 24, 24), (8, 16, 3, 3), dict(padding=1, dilation=2, groups=1))),
        (torch.float32, ((2, 64, 32, 32), (64, 64, 1, 1), {})),  # large but 1x1: one GEMM, the sim's own
    ):
        f = torch.nn.functional.conv2d if len(xs) == 4 else torch.nn.functional.conv1d
        x, w = torch.randn(xs, generator=g).to(dtype), torch.randn(ws, generator=g).to(dtype)
        gy_shape = f(x, w, **kw).shape
        gy = torch.randn(gy_shape, generator=g).to(dtype)
        torch.mytorch.reset_host_route_stats()
        res = {}
        for dev, dt in (("cpu", dtype), ("mytorch", dtype), ("gold", torch.float64)):
            xx, ww = (t.clone().to(dt).to("cpu" if dev == "gold" else dev).requires_grad_() for t in (x, w))
            y = f(xx, ww, **kw)
            y.backward(gy.to(dt).to(xx.device))
            res[dev] = (y.detach().cpu(), xx.grad.cpu(), ww.grad.cpu())
        for k, name in enumerate(("output", "input gradient", "weight gradient")):
            assert_aligned(res["mytorch"][k], res["cpu"][k], res["gold"][k], what=f"{xs} {dtype} {name}")
        macs = gy.numel() * (xs[1] // kw.get("groups", 1)) * w[0, 0].numel()
        routed = torch.mytorch.host_route_stats().get("conv", 0)
        if torch.mytorch.runtime() != "sim":
            assert routed == 0
        elif macs >= 1 << 22 and w[0, 0].numel() > 1:
            assert routed == 2, (xs, routed)  # forward and input gradient, not the weight's
        else:
            assert routed == 0, (xs, routed)


@pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim's own weight-gradient sum; cuDNN sums its way")
def test_weight_gradient_sums_in_blocks():
    """Note [Sim convolution]: the float32 weight gradient sums each image's positions in blocks of 128 whose partial
    sums add in float64. Over 65,536 positions of positive terms (no cancellation: the relative error is the sum's
    own) it lands within eps of float64 (5.1e-8 here), where one float32 GEMM over the image landed at 2.5e-7 (the
    negative control, run on the build before the blocks). A conv3d of the shape of the OpInfo sample that one GEMM
    per image put 2.97x farther from float64 than the CPU (1320 positions, 'same' padding, dilation 3) aligns."""
    from mytorch.testing._compare import assert_aligned

    g = torch.Generator().manual_seed(0)
    n = 1 << 16
    x, gy, w = torch.rand(1, 1, n, generator=g), torch.rand(1, 1, n - 2, generator=g), torch.rand(1, 1, 3, generator=g)

    def weight_grad(dev, dtype, x=x, gy=gy, w=w, **conv):
        args = [a.to(dev, dtype) for a in (gy, x, w)]
        dims = x.dim() - 2
        out = torch.ops.aten.convolution_backward(
            *args,
            None,
            conv.get("stride", [1] * dims),
            conv.get("padding", [0] * dims),
            conv.get("dilation", [1] * dims),
            False,
            [0] * dims,
            1,
            [False, True, False],
        )
        return out[1].cpu()

    gold = weight_grad("cpu", torch.float64)
    rel = ((weight_grad(DEV, torch.float32).double() - gold).abs() / gold.abs()).max().item()
    assert rel <= torch.finfo(torch.float32).eps, rel

    x3 = torch.randn(1, 1, 10, 11, 12, generator=g) * 9
    w3 = torch.randn(1, 1, 4, 4, 4, generator=g) * 9
    y = F.conv3d(x3, w3, padding="same", dilation=3)
    gy3 = torch.randn(y.shape, generator=g)
    pad = [(4, 5)] * 3  # 'same' with dilation 3 and 4 taps: the CPU pads 4 before and 5 after, then convolves
    xp = F.pad(x3, [p for lo_hi in reversed(pad) for p in lo_hi])
    conv = dict(dilation=[3, 3, 3])
    got = weight_grad(DEV, torch.float32, x=xp, gy=gy3, w=w3, **conv)
    assert_aligned(
        got,
        weight_grad("cpu", torch.float32, x=xp, gy=gy3, w=w3, **conv),
        weight_grad("cpu", torch.float64, x=xp, gy=gy3, w=w3, **conv),
        "conv3d weight gradient",
    )
