"""Complex GEMMs (Note [Complex GEMM] in csrc/aten/linalg/Blas.cpp), complex division and add/sub with a complex alpha
(Complex.cpp, BinaryOps.cpp): mm, bmm, addmm,
baddbmm, addbmm, addmv, dot and vdot on complex64/complex128, conjugate views as operands, complex alpha and beta,
aligned with the CPU against complex128. With the fallback forbidden (marker `native`); on the emulated build and
a GPU they run the four-real-GEMM composition, on sim ATen's CPU BLAS on host views."""

import pytest
import torch

from mytorch.testing._compare import misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

DTYPES = [torch.complex64, torch.complex128]
g = torch.Generator().manual_seed(11)


def _c(dtype, *shape):
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dtype)


def _problem(fn, args, what):
    ref = fn(*args)
    dev = fn(*[a.to("mytorch") for a in args])
    gold = fn(*[a.to(torch.complex128) for a in args])
    if dev.device.type != "mytorch" or dev.dtype != ref.dtype or dev.shape != ref.shape:
        return f"{what}: {dev.device} {dev.dtype} {tuple(dev.shape)}, the CPU gives {ref.dtype} {tuple(ref.shape)}"
    return misalignment(dev, ref, gold, what)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_complex_gemms_match_the_cpu(dtype):
    a, b, s, v = _c(dtype, 37, 53), _c(dtype, 53, 29), _c(dtype, 37, 29), _c(dtype, 53)
    ba, bb = _c(dtype, 3, 21, 18), _c(dtype, 3, 18, 17)
    cases = {
        "mm": lambda a, b, s, v, ba, bb: torch.mm(a, b),
        "mm_adjoints": lambda a, b, s, v, ba, bb: torch.mm(b.mH, a.mH),
        "mm_conjugate": lambda a, b, s, v, ba, bb: torch.mm(a.conj(), b),
        "addmm": lambda a, b, s, v, ba, bb: torch.addmm(s, a, b, beta=0.5 - 1j, alpha=2 + 0.25j),
        "addmm_beta0": lambda a, b, s, v, ba, bb: torch.addmm(s * float("nan"), a, b, beta=0),
        "addmm_row_bias": lambda a, b, s, v, ba, bb: torch.addmm(s[0], a, b),
        "bmm": lambda a, b, s, v, ba, bb: torch.bmm(ba, bb),
        "bmm_conjugate_transposed": lambda a, b, s, v, ba, bb: torch.bmm(bb.mH, ba.transpose(1, 2).conj()),
        "baddbmm": lambda a, b, s, v, ba, bb: torch.baddbmm(ba[:, :, :17], ba, bb, beta=1j, alpha=-1),
        "addbmm": lambda a, b, s, v, ba, bb: torch.addbmm(s[:21, :17], ba, bb, beta=-1, alpha=2j),
        "addmv": lambda a, b, s, v, ba, bb: torch.addmv(s[:, 0], a, v, beta=2, alpha=1j),
        "mv_conjugate": lambda a, b, s, v, ba, bb: torch.mv(a.conj(), v),
        "dot": lambda a, b, s, v, ba, bb: torch.dot(v, a[0]),
        "vdot": lambda a, b, s, v, ba, bb: torch.vdot(v, a[1]),
        "matmul_batched": lambda a, b, s, v, ba, bb: ba @ bb,
    }
    problems = [_problem(fn, (a, b, s, v, ba, bb), f"{name} {dtype}") for name, fn in cases.items()]
    assert not [p for p in problems if p]


def test_complex_gemm_negative_control():
    """The check above can fail: a product with one operand conjugated is not aligned with the plain product."""
    a, b = _c(torch.complex64, 8, 6), _c(torch.complex64, 6, 5)
    wrong = torch.mm(a.conj().to("mytorch"), b.to("mytorch"))
    assert misalignment(wrong, torch.mm(a, b), torch.mm(a.to(torch.complex128), b.to(torch.complex128)), "control")


def test_complex_gemm_out_variants():
    a, b = _c(torch.complex64, 5, 4), _c(torch.complex64, 4, 3)
    out = torch.empty(0, dtype=torch.complex64, device="mytorch")
    torch.mm(a.to("mytorch"), b.to("mytorch"), out=out)
    assert not misalignment(out, torch.mm(a, b), torch.mm(a.to(torch.complex128), b.to(torch.complex128)), "mm out")
    strided = torch.zeros(3, 5, dtype=torch.complex64, device="mytorch").t()  # an out that is not row-major
    torch.mm(a.to("mytorch"), b.to("mytorch"), out=strided)
    assert not misalignment(strided, torch.mm(a, b), None, "mm strided out")
    with pytest.raises(RuntimeError):
        torch.mm(a.to("mytorch"), b.to("mytorch"), out=torch.empty(5, 3, device="mytorch"))  # a real out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_complex_division_matches_the_cpu(dtype):
    """c10::complex's division: Smith's scaling, zero divisors (infinities and NaN per part), infinite and NaN
    divisors, and tiny and huge ones where an unscaled c^2 + d^2 would overflow or underflow."""
    a = _c(dtype, 6, 7)
    b = _c(dtype, 6, 7)
    b[0, :4] = torch.tensor([0j, complex(0, 0), 1e-30 + 0j, 1e30j])
    b[1, :4] = torch.tensor(
        [complex(float("inf"), 0), complex(float("nan"), 1), complex(0, float("-inf")), 1e20 + 1e20j]
    )
    a[0, 1] = 0j
    for name, fn in {
        "tensor": lambda x, y: x / y,
        "real divisor": lambda x, y: x / y.real,
        "scalar": lambda x, y: x / (2 - 3j),
        "reverse": lambda x, y: 1.5 / y,
    }.items():
        ref, dev = fn(a, b), fn(a.to("mytorch"), b.to("mytorch")).cpu()
        assert torch.equal(ref.isnan(), dev.isnan()) and torch.equal(ref.isinf(), dev.isinf()), name
        finite = ref.isfinite()
        gold = fn(a.to(torch.complex128), b.to(torch.complex128))
        assert not misalignment(dev[finite], ref[finite], gold[finite], f"division {name} {dtype}")


def test_complex_alpha_of_add_and_sub():
    """add/sub with a complex alpha (complex operands only, as ATen's alpha_check says)."""
    a, b = _c(torch.complex64, 4, 5), _c(torch.complex64, 4, 5)
    for fn in (lambda x, y: torch.add(x, y, alpha=1j), lambda x, y: torch.sub(x, y.real, alpha=2 - 1j)):
        assert not _problem(fn, (a, b), "complex alpha")
    for dev in ("cpu", "mytorch"):
        with pytest.raises(RuntimeError, match="alpha must not be a complex number"):
            torch.add(a.real.to(dev), b.real.to(dev), alpha=1j)
