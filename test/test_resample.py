"""Resampling by index maps (Note [Resampling by index maps], csrc/aten/spatial/Resample.cpp: reflection and replication
padding, nearest and nearest-exact upsampling of every rank, max unpooling) and by weight matrices (Note [Resampling
by weight matrices], csrc/aten/spatial/Interpolate.cpp: linear, trilinear and bicubic upsampling, antialiased too, 3-D
adaptive average pooling). With the fallback forbidden (marker `native`): index-map forwards move elements, so they equal the CPU's
bit for bit; the rest, and every backward, align with the CPU against float64; bad arguments raise the CPU's
errors."""

import pytest
import torch
import torch.nn.functional as F

from mytorch.testing._compare import misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(5)
SHAPES = {1: (2, 3, 9), 2: (2, 3, 7, 6), 3: (1, 2, 5, 6, 4)}


def _fwd_bwd(fn, x, dtype, exact=True):
    """What differs between fn on mytorch and on the CPU at dtype: forward bit-equal (exact: the index-map ops move
    elements) or aligned,
    backward aligned, both against the CPU at float64 as the gold (the half types' gradients accumulate in float32
    on mytorch, in the half type on the CPU)."""
    outs, grads = [], []
    for device, dt in (("cpu", dtype), ("mytorch", dtype), ("cpu", torch.float64)):
        t = x.to(dt).to(device).requires_grad_()
        y = fn(t)
        cot = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype).to(dt).to(device)
        (gx,) = torch.autograd.grad(y, t, cot)
        outs.append(y.detach())
        grads.append(gx)
    problems = [] if outs[1].device.type == "mytorch" else [f"the result is on {outs[1].device}"]
    if exact:
        problems += [] if torch.equal(outs[1].cpu(), outs[0]) else ["forward differs"]
    else:
        problems.append(misalignment(outs[1], outs[0], outs[2], "forward"))
    problems.append(misalignment(grads[1], grads[0], grads[2], "gradient"))
    return [p for p in problems if p]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_padding_matches_the_cpu(mode, rank, dtype):
    x = torch.randn(SHAPES[rank], generator=g)
    pads = [(2, 3), (1, 0, 3, 2), (1, 2, 0, 3, 2, 1)][rank - 1]
    assert not _fwd_bwd(lambda t: F.pad(t, pads, mode=mode), x, dtype)
    # negative padding crops; replication takes it on every side
    crop = [(-1, 2), (2, -1, -2, 1), (-1, 1, 1, -2, 1, 0)][rank - 1]
    assert not _fwd_bwd(lambda t: F.pad(t, crop, mode=mode), x, dtype)


def test_padding_keeps_channels_last_and_takes_integers():
    x = torch.randn(2, 3, 7, 6, generator=g).to(memory_format=torch.channels_last)
    for mode in ("reflect", "replicate"):
        ref, dev = F.pad(x, (2, 1, 1, 2), mode=mode), F.pad(x.to("mytorch"), (2, 1, 1, 2), mode=mode)
        assert torch.equal(dev.cpu(), ref)
    i = torch.randint(-50, 50, (2, 4, 9), generator=g)
    assert torch.equal(F.pad(i.to("mytorch"), (3, 2), mode="reflect").cpu(), F.pad(i, (3, 2), mode="reflect"))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_nearest_upsampling_matches_the_cpu(mode, rank):
    x = torch.randn(SHAPES[rank], generator=g)
    spatial = x.shape[2:]
    for size in ([s * 2 for s in spatial], [s + 3 for s in spatial], [max(1, s - 2) for s in spatial]):
        assert not _fwd_bwd(lambda t: F.interpolate(t, size=size, mode=mode), x, torch.float32)
    # 1.05 and 2.1 give out == in and out == 2 * in with a scale the CPU reads as given: the identity (or o >> 1)
    # would differ
    for factor in (1.7, 0.6, 3.0, 1.05, 2.1):
        assert not _fwd_bwd(lambda t: F.interpolate(t, scale_factor=factor, mode=mode), x, torch.float32)
        assert not _fwd_bwd(
            lambda t: F.interpolate(t, scale_factor=factor, mode=mode, recompute_scale_factor=True), x, torch.float16
        )


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_max_unpool_matches_the_cpu(rank):
    x = torch.randn(SHAPES[rank], generator=g)
    pool = [F.max_pool1d, F.max_pool2d, F.max_pool3d][rank - 1]
    unpool = [F.max_unpool1d, F.max_unpool2d, F.max_unpool3d][rank - 1]
    y, idx = pool(x, 2, stride=2, return_indices=True)
    ref = unpool(y, idx, 2, stride=2, output_size=x.shape[2:])
    dev = unpool(y.to("mytorch"), idx.to("mytorch"), 2, stride=2, output_size=x.shape[2:])
    assert torch.equal(dev.cpu(), ref)
    assert (ref != 0).sum() == y.numel()  # not vacuous: every pooled value was placed, the rest is zero
    assert not _fwd_bwd(lambda t: unpool(t, idx.to(t.device), 2, stride=2), y, torch.float32)


def test_max_unpool_refuses_as_the_cpu():
    """unpoolSizes checks in C++ what torch's decomposition (the meta function) checked: the CPU's exception type for
    each, and the words the decomposition used."""
    x, i = torch.randn(2, 4, 4, 4), torch.zeros(2, 4, 4, 4, dtype=torch.long)
    x3, i3 = torch.randn(1, 2, 2, 2, 2), torch.zeros(1, 2, 2, 2, 2, dtype=torch.long)
    u2, u3 = torch.ops.aten.max_unpool2d, torch.ops.aten.max_unpool3d
    cases = [
        (lambda t: u2(t(x), t(i.int()), [8, 8]), "should be type int64"),
        (lambda t: u2(t(x), t(i), [8]), "exactly two elements"),
        (lambda t: u2(t(x[0, 0]), t(i[0, 0]), [8, 8]), "3d or 4d Tensor"),
        (lambda t: u2(t(x), t(i[:, :2]), [8, 8]), "shape of indices"),
        (lambda t: u2(t(torch.randn(2, 0, 4, 4)), t(torch.zeros(2, 0, 4, 4, dtype=torch.long)), [8, 8]), "non-zero"),
        (lambda t: u3(t(x3), t(i3), [4, 4], [2, 2, 2], [0, 0, 0]), "exactly three elements"),
        (lambda t: u3(t(x3), t(i3), [4, 4, 4], [0, 2, 2], [0, 0, 0]), "greater than zero"),
        (lambda t: u3(t(x3), t(i3), [4, 4, 4], [2, 2], [0, 0, 0]), "in stride"),
        (lambda t: u3(t(x3), t(i3), [4, 4, 4], [2, 2, 2], [0, 0]), "in padding"),
        (lambda t: u3(t(x3[0, 0]), t(i3[0, 0]), [4, 4, 4], [2, 2, 2], [0, 0, 0]), "4d or 5d Tensor"),
    ]
    for fn, words in cases:
        with pytest.raises(RuntimeError) as cpu:
            fn(lambda a: a)
        with pytest.raises(type(cpu.value), match=words):
            fn(lambda a: a.to("mytorch"))
    out = torch.ops.aten.max_unpool2d(
        torch.randn(0, 3, 4, 4, device="mytorch"), torch.zeros(0, 3, 4, 4, dtype=torch.long, device="mytorch"), [8, 8]
    )
    assert out.shape == (0, 3, 8, 8)


def test_resampling_refuses_as_the_cpu():
    x = torch.randn(2, 3, 4, generator=g)
    for fn in [
        lambda t: F.pad(t, (4, 1), mode="reflect"),  # padding not smaller than the input
        lambda t: F.pad(t, (-3, -2), mode="replicate"),  # nothing left
        lambda t: (
            torch.ops.aten.reflection_pad2d(t, [1, 1, 1, 1]).sum() + torch.ops.aten.reflection_pad2d(t[0, 0], [1])
        ),
        lambda t: torch.ops.aten.upsample_nearest1d(t, [0], None),
        lambda t: torch.ops.aten.replication_pad1d.out(
            t, [1, 1], out=torch.empty(0, dtype=torch.float64, device=t.device)
        ),
        lambda t: torch.ops.aten.reflection_pad2d.out(
            t, [1, 1, 1, 1], out=torch.empty(0, dtype=torch.int64, device=t.device)
        ),
    ]:
        with pytest.raises(RuntimeError) as ref:
            fn(x)
        with pytest.raises(RuntimeError) as dev:
            fn(x.to("mytorch"))
        # ATen's checks run on meta tensors, where some of torch's Python meta functions word them a little
        # differently (a size printed as torch.Size): the same error, the same opening words
        assert str(dev.value)[:40] == str(ref.value)[:40]


@pytest.mark.parametrize("mode,rank", [("linear", 1), ("trilinear", 3), ("bicubic", 2)])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_and_cubic_upsampling_match_the_cpu(mode, rank, align_corners, dtype):
    x = torch.randn(SHAPES[rank], generator=g)
    spatial = x.shape[2:]
    for size in ([s * 2 + 1 for s in spatial], [max(1, s - 2) for s in spatial], list(spatial)):
        assert not _fwd_bwd(
            lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align_corners), x, dtype, False
        )
    assert not _fwd_bwd(
        lambda t: F.interpolate(t, scale_factor=1.7, mode=mode, align_corners=align_corners), x, dtype, False
    )


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_antialiased_upsampling_matches_the_cpu(mode, align_corners, dtype):
    """Note [Antialiased resampling]: downsampling (windows widened by the scale), upsampling, the identity and
    scale factors, forward and backward."""
    x = torch.randn(2, 3, 13, 17, generator=g)
    for size in ((7, 5), (25, 40), (13, 17), (1, 3)):
        fn = lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align_corners, antialias=True)  # noqa: E731
        assert not _fwd_bwd(fn, x, dtype, False)
    for sf in ((0.3, 0.7), (2.5, 1.3)):
        fn = lambda t: F.interpolate(t, scale_factor=sf, mode=mode, align_corners=align_corners, antialias=True)  # noqa: E731
        assert not _fwd_bwd(fn, x, dtype, False)


def test_adaptive_avg_pool3d_matches_the_cpu():
    x = torch.randn(2, 3, 7, 5, 6, generator=g)
    for size in ((3, 2, 4), (7, 5, 6), (1, 1, 1), (9, 6, 2)):  # overlapping, identity, global and growing windows
        assert not _fwd_bwd(lambda t: F.adaptive_avg_pool3d(t, size), x, torch.float32, False)
    assert not _fwd_bwd(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 3)), x[0], torch.float16, False)


def test_adaptive_avg_pool3d_by_windows_and_by_gemms():
    """Note [Adaptive average pooling in 3-D]: an input of 2^20 elements takes the GEMMs for 120 output positions and
    the direct windows for 64; a channels-last input's result comes back channels-last, as on the CPU."""
    big = torch.randn(2, 8, 16, 64, 64, generator=g)
    for size, gemms in (((4, 5, 6), True), ((2, 4, 8), False)):
        assert not _fwd_bwd(lambda t: F.adaptive_avg_pool3d(t, size), big, torch.float32, False), size
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            F.adaptive_avg_pool3d(big.to("mytorch"), size)
        assert gemms == any(e.name == "aten::matmul" for e in prof.events()), size  # the control: the path taken
    cl = torch.randn(2, 3, 6, 7, 8, generator=g).contiguous(memory_format=torch.channels_last_3d)
    ref, out = F.adaptive_avg_pool3d(cl, (3, 4, 5)), F.adaptive_avg_pool3d(cl.to("mytorch"), (3, 4, 5))
    assert out.stride() == ref.stride(), (out.stride(), ref.stride())
    assert not misalignment(out, ref, F.adaptive_avg_pool3d(cl.double(), (3, 4, 5)), "channels-last")
