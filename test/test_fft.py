"""The FFT family (Note [FFT family] in kernels/include/mytorch/fft.h, csrc/aten/linalg/Fft.cpp): torch.fft, stft and istft
with the fallback forbidden, against the CPU (float64 as the gold). On sim the glue runs torch's CPU FFT on host
views; on the emulated build (and a GPU) the cuFFT path: packed copies, three dimensions a plan, the one-sided
half completed by conjugate symmetry, normalisation after the transform."""

import pytest
import torch

from mytorch.testing._compare import assert_aligned, misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(3)


def _mismatch(fn, x, what):
    """fn on mytorch against the CPU (float64 as the gold): "" when aligned, else what differs."""
    ref = fn(x)
    dev = fn(x.to("mytorch"))
    gold = fn(x.to(torch.complex128 if x.is_complex() else torch.float64))
    if dev.device.type != "mytorch" or dev.dtype != ref.dtype or dev.shape != ref.shape:
        return f"{what}: {dev.device} {dev.dtype} {tuple(dev.shape)}, the CPU gives {ref.dtype} {tuple(ref.shape)}"
    return misalignment(dev, ref, gold, what)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_one_dimensional_transforms_match_the_cpu(dtype, norm):
    x = torch.randn(3, 10, 7, generator=g, dtype=dtype)
    z = torch.randn(3, 10, 7, generator=g, dtype=dtype) * 1j + x
    for n in (None, 5, 12):  # trimmed and zero-padded signals
        assert not _mismatch(lambda t: torch.fft.fft(t, n=n, dim=1, norm=norm), z, f"fft n={n}")
        assert not _mismatch(lambda t: torch.fft.ifft(t, n=n, norm=norm), z, f"ifft n={n}")
        assert not _mismatch(lambda t: torch.fft.rfft(t, n=n, dim=1, norm=norm), x, f"rfft n={n}")
        assert not _mismatch(lambda t: torch.fft.irfft(t, n=n, norm=norm), z, f"irfft n={n}")
        assert not _mismatch(lambda t: torch.fft.hfft(t, n=n, dim=0, norm=norm), z, f"hfft n={n}")
        assert not _mismatch(lambda t: torch.fft.ihfft(t, n=n, norm=norm), x, f"ihfft n={n}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multi_dimensional_transforms_match_the_cpu(dtype):
    x = torch.randn(2, 5, 4, 6, 3, generator=g, dtype=dtype)
    z = torch.complex(x, torch.randn(x.shape, generator=g, dtype=dtype))
    assert not _mismatch(lambda t: torch.fft.fft2(t, dim=(1, 3)), z, "fft2 over separated dims")
    assert not _mismatch(lambda t: torch.fft.fftn(t, dim=(0, 1, 2, 3, 4)), z, "fftn over 5 dims (two plans)")
    assert not _mismatch(lambda t: torch.fft.ifftn(t, dim=(3, 1, 2), norm="ortho"), z, "ifftn, dims out of order")
    assert not _mismatch(lambda t: torch.fft.rfftn(t, dim=(1, 2, 3, 4)), x, "rfftn over 4 dims")
    assert not _mismatch(
        lambda t: torch.fft.irfftn(t, dim=(0, 2, 3, 4), s=(2, 4, 6, 5)), z, "irfftn over 4 dims, odd length"
    )
    assert not _mismatch(lambda t: torch.fft.rfft2(t, norm="forward"), x, "rfft2")
    assert not _mismatch(lambda t: torch.fft.irfft2(t, s=(6, 4)), z, "irfft2 with sizes")
    assert not _mismatch(lambda t: torch.fft.hfftn(t, dim=(1, 2)), z, "hfftn")
    assert not _mismatch(lambda t: torch.fft.ihfftn(t, dim=(1, 3, 4)), x, "ihfftn")


def test_two_sided_real_transform_and_out_variants():
    x = torch.randn(4, 6, 7, generator=g)
    for dims in ([2], [1, 2], [0, 1, 2]):  # even, odd and mixed lengths; the conjugate half over every dim
        assert not _mismatch(lambda t: torch.ops.aten._fft_r2c(t, dims, 0, False), x, f"r2c two-sided {dims}")
    z = torch.fft.fft(x)
    out = torch.empty(0, dtype=torch.complex64, device="mytorch")
    torch.ops.aten._fft_c2c.out(z.to("mytorch"), [1, 2], 2, True, out=out)
    assert_aligned(out, torch.ops.aten._fft_c2c(z, [1, 2], 2, True), None, "c2c out=")
    wide = torch.empty(0, dtype=torch.complex128, device="mytorch")  # another dtype: the CPU's kernel (fallback)
    torch.mytorch.set_fallback_mode("silent")
    torch.ops.aten._fft_c2c.out(z.to("mytorch"), [1], 0, True, out=wide)
    torch.mytorch.set_fallback_mode("error")
    assert wide.dtype == torch.complex128
    assert_aligned(wide.to(torch.complex64), torch.ops.aten._fft_c2c(z, [1], 0, True), None, "c2c out= complex128")


def test_stft_istft_and_inputs_left_intact():
    sig = torch.randn(2, 400, generator=g)
    win = torch.hann_window(64)
    assert not _mismatch(
        lambda t: torch.stft(t, 64, hop_length=16, window=win.to(t.device), return_complex=True), sig, "stft"
    )
    assert not _mismatch(
        lambda t: torch.stft(t, 64, window=win.to(t.device), return_complex=True, onesided=False), sig, "stft 2-sided"
    )
    spec = torch.stft(sig, 64, hop_length=16, window=win, return_complex=True)
    assert not _mismatch(lambda t: torch.istft(t, 64, hop_length=16, window=win.to(t.real.device)), spec, "istft")
    # A complex-to-real transform may overwrite its input (cuFFT's does; the emulated one fills it with NaN): the
    # caller's tensor must come back unchanged.
    half = spec.to("mytorch")
    before = half.cpu()
    torch.fft.irfft(half, dim=1)
    torch.fft.irfftn(half, dim=(0, 1, 2))
    assert torch.equal(half.cpu(), before)


def test_empty_batches_and_the_cpu_refusals():
    # An empty batch: an empty result, as torch.cuda gives (the CPU's MKL refuses to plan it).
    e = torch.empty(0, 8, device="mytorch")
    assert torch.fft.fft(e).shape == (0, 8) and torch.fft.fft(e).dtype == torch.complex64
    assert torch.fft.rfft(e).shape == (0, 5)
    assert torch.fft.irfft(e.to(torch.complex64)).shape == (0, 14)
    for fn in (
        lambda t: torch.fft.fft(t, n=0),
        lambda t: torch.fft.rfft(t.to(torch.complex64)),
        lambda t: torch.fft.fft(t.half()),
    ):
        with pytest.raises(RuntimeError) as ref:
            fn(torch.randn(3, 8))
        with pytest.raises(RuntimeError) as dev:
            fn(torch.randn(3, 8).to("mytorch"))
        assert type(dev.value) is type(ref.value)


def test_results_have_the_cpus_layout():
    """The sim's host route returns the CPU operator's own result, moved into device memory (Fft.cpp's onDevice):
    the CPU's sizes and strides, for a permuted input and the transforms over the leading dimension too. On the
    cuFFT path the layout is the meta kernel's (Note [Cached meta results])."""
    x = torch.randn(6, 5, 8, generator=g)
    z = torch.randn(6, 5, 8, generator=g) * 1j + x
    for fn, t in (
        (lambda u: torch.fft.fft(u, dim=0), z),
        (lambda u: torch.fft.rfftn(u, dim=(0, 2)), x.permute(2, 0, 1)),
        (lambda u: torch.fft.irfft2(u), z.transpose(0, 1)),
        (lambda u: torch.fft.ihfft(u, dim=1), x),
    ):
        got, want = fn(t.to("mytorch")), fn(t)
        assert got.shape == want.shape
        if torch.mytorch.runtime() == "sim":
            assert got.stride() == want.stride(), (got.stride(), want.stride())
        assert_aligned(got.cpu(), want)
