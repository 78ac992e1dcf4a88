"""Integer GEMMs (Note [Integer GEMM] in kernels/include/mytorch/gemm.h): mm, bmm, addmm, baddbmm, addbmm, addmv,
dot and vdot on every integer dtype, bit for bit equal to the CPU, wrapping at the dtype's width as the CPU does.
With the fallback forbidden (marker `native`); on the emulated build and a GPU they run the CUDA tile kernel
(cuda/gemm_int.cu), on sim ATen's CPU loop on host views."""

import pytest
import torch

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
g = torch.Generator().manual_seed(7)


def _ints(dtype, *shape, lo=-9, hi=10):
    lo = 0 if dtype == torch.uint8 else lo
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def _difference(dev, ref, what):
    """ "" when mytorch's result is on the device and equals the CPU's bit for bit, else what differs."""
    if dev.device.type != "mytorch" or dev.dtype != ref.dtype or dev.shape != ref.shape:
        return f"{what}: {dev.device} {dev.dtype} {tuple(dev.shape)}, the CPU gives {ref.dtype} {tuple(ref.shape)}"
    return "" if torch.equal(dev.cpu(), ref) else f"{what}: {(dev.cpu() != ref).sum()} elements differ"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_integer_gemms_match_the_cpu(dtype):
    a, b = _ints(dtype, 37, 53), _ints(dtype, 53, 29)  # tiles of 16 with ragged edges
    s, v = _ints(dtype, 37, 29), _ints(dtype, 53)
    ba, bb = _ints(dtype, 3, 21, 18), _ints(dtype, 3, 18, 17)
    cases = {
        "mm": lambda a, b, s, v, ba, bb: torch.mm(a, b),
        "mm_transposed": lambda a, b, s, v, ba, bb: torch.mm(b.t(), a.t()),
        "addmm": lambda a, b, s, v, ba, bb: torch.addmm(s, a, b, beta=3, alpha=-2),
        "addmm_beta0": lambda a, b, s, v, ba, bb: torch.addmm(s, a, b, beta=0),
        "addmm_row_bias": lambda a, b, s, v, ba, bb: torch.addmm(s[0], a, b),
        "bmm": lambda a, b, s, v, ba, bb: torch.bmm(ba, bb),
        "bmm_transposed": lambda a, b, s, v, ba, bb: torch.bmm(bb.transpose(1, 2), ba.transpose(1, 2)),
        "baddbmm": lambda a, b, s, v, ba, bb: torch.baddbmm(ba[:, :, :17], ba, bb, beta=2, alpha=3),
        "addbmm": lambda a, b, s, v, ba, bb: torch.addbmm(s[:21, :17], ba, bb, beta=-1, alpha=2),
        "addmv": lambda a, b, s, v, ba, bb: torch.addmv(s[:, 0], a, v, beta=2, alpha=5),
        "mv": lambda a, b, s, v, ba, bb: torch.mv(a, v),
        "dot": lambda a, b, s, v, ba, bb: torch.dot(v, a[0]),
        "vdot": lambda a, b, s, v, ba, bb: torch.vdot(v, a[1]),
        "matmul_batched": lambda a, b, s, v, ba, bb: ba @ bb,
    }
    dev = [t.to("mytorch") for t in (a, b, s, v, ba, bb)]
    for name, fn in cases.items():
        assert not _difference(fn(*dev), fn(a, b, s, v, ba, bb), f"{name} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_integer_gemm_wraps_as_the_cpu(dtype):
    """Sums past the dtype's range wrap modulo 2^width on both sides. Negative control: the wide (int64 from
    the same inputs) result differs, so the check would catch a kernel that accumulated wider and saturated or
    never wrapped."""
    big = {torch.int8: 100, torch.uint8: 200, torch.int16: 30000, torch.int32: 2**30, torch.int64: 2**62}[dtype]
    a = torch.full((5, 40), big, dtype=dtype)
    b = _ints(dtype, 40, 6, lo=1, hi=4)
    ref = torch.mm(a, b)
    assert not _difference(torch.mm(a.to("mytorch"), b.to("mytorch")), ref, f"wrapping mm {dtype}")
    if dtype != torch.int64:
        assert not torch.equal(ref.long(), torch.mm(a.long(), b.long())), "the inputs do not overflow"


def test_integer_gemm_empty_and_out_variants():
    a, b = _ints(torch.int32, 4, 0), _ints(torch.int32, 0, 3)
    s = _ints(torch.int32, 4, 3)
    assert not _difference(
        torch.addmm(s.to("mytorch"), a.to("mytorch"), b.to("mytorch"), beta=2), torch.addmm(s, a, b, beta=2), "k=0"
    )
    out = torch.empty(0, dtype=torch.int64, device="mytorch")
    x, y = _ints(torch.int64, 6, 5), _ints(torch.int64, 5, 7)
    torch.mm(x.to("mytorch"), y.to("mytorch"), out=out)  # resized
    assert torch.equal(out.cpu(), torch.mm(x, y))
    with pytest.raises(RuntimeError):
        torch.mm(x.to("mytorch"), y.to("mytorch"), out=torch.empty(6, 7, dtype=torch.int32, device="mytorch"))
    with pytest.raises(RuntimeError):
        torch.mm(x.to("mytorch"), y.to("mytorch").int())
