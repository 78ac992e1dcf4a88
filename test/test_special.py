"""The special functions of the pointwise table (Special group, kernels/include/mytorch/ops_special.h, Note [Special
functions]) and the other functions added with them, on grids that cross every branch point of their
implementations (series / asymptotic switches, reflections, poles, infinities, NaN), against the CPU at float64 by
the alignment rule, with the fallback forbidden. every_runtime: scripts/test.sh runs them on the emulated CUDA build
too."""

import math

import pytest
import torch

from mytorch.testing._compare import assert_aligned
from mytorch.testing._precise import has_precise_golden, precise_golden

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

SPECIAL = (0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, -1e-10, 1e-10)


def _grid(lo, hi, n=801, extra=()):
    g = torch.linspace(lo, hi, n, dtype=torch.float64)
    return torch.cat([g, torch.tensor(SPECIAL + tuple(extra), dtype=torch.float64)])


# the switch points of ops_special.h: 10 (recurrences), 20 and 26.6 (erfcx), 8 and 2 (the I and K expansions), 709.8
# (exp overflow), the integers (poles) and 0.5 (trigamma's reflection)
EDGES = (
    8.0,
    7.999999,
    8.000001,
    -8.000001,
    2.0,
    1.999999,
    2.000001,
    10.0,
    9.999999,
    20.0,
    20.000001,
    26.0,
    27.0,
    29.999999,
    30.0,
    30.000001,
    700.0,
    713.0,
    -713.0,
    0.5,
    -3.0,
    -2.5,
    1e5,
    -1e5,
)
X = _grid(-60, 60, extra=EDGES)
UNIT = torch.cat(
    [
        torch.rand(600, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),
        torch.tensor([0, 1, 0.5, 0.02425, 0.97575, 1e-300, 1e-20, 1 - 1e-16, -0.1, 1.1, math.nan], dtype=torch.float64),
        10 ** -torch.linspace(1, 300, 120, dtype=torch.float64),
    ]
)

UNARY = {
    "digamma": (torch.special.digamma, X),
    "polygamma1": (lambda a: torch.polygamma(1, a), X),
    "polygamma2": (lambda a: torch.polygamma(2, a), X),
    "polygamma5": (lambda a: torch.polygamma(5, a), X),
    "lgamma": (torch.lgamma, X),
    "erfinv": (torch.erfinv, UNIT * 2 - 1),
    "i0": (torch.special.i0, X),
    "i0e": (torch.special.i0e, X),
    "i1": (torch.special.i1, X),
    "i1e": (torch.special.i1e, X),
    "erfcx": (torch.special.erfcx, X),
    "erfc": (torch.special.erfc, X),
    "log_ndtr": (torch.special.log_ndtr, X),
    "ndtri": (torch.special.ndtri, UNIT),
    "entr": (torch.special.entr, X),
    "logit": (torch.logit, UNIT),
    "logit_eps": (lambda a: torch.logit(a, eps=0.05), UNIT),
    "sinc": (torch.sinc, X),
    "angle": (torch.angle, X),
    "cosh": (torch.cosh, X),
    "asin": (torch.asin, UNIT * 2 - 1),
    "acos": (torch.acos, UNIT * 2 - 1),
    "atan": (torch.atan, X),
    "asinh": (torch.asinh, X),
    "acosh": (torch.acosh, X),
    "atanh": (torch.atanh, UNIT * 2 - 1),
    # ToWide rows (no half kernels in ATen); Bessel J, Y and Airy against the functions themselves (_precise.py)
    "special.bessel_j0": (torch.special.bessel_j0, X),
    "special.bessel_j1": (torch.special.bessel_j1, X),
    "special.bessel_y0": (torch.special.bessel_y0, X),
    "special.bessel_y1": (torch.special.bessel_y1, X),
    "special.airy_ai": (torch.special.airy_ai, _grid(-30, 110, 701, extra=(-7.0, -7.000001, 2.0, 2.000001))),
    "modified_bessel_i0": (torch.special.modified_bessel_i0, X),
    "modified_bessel_i1": (torch.special.modified_bessel_i1, X),
    "modified_bessel_k0": (torch.special.modified_bessel_k0, X),
    "modified_bessel_k1": (torch.special.modified_bessel_k1, X),
    "scaled_modified_bessel_k0": (torch.special.scaled_modified_bessel_k0, X),
    "scaled_modified_bessel_k1": (torch.special.scaled_modified_bessel_k1, X),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, X),
}
WIDE = {"erfcx", "ndtri", "log_ndtr"} | {n for n in UNARY if "bessel" in n or "airy" in n}


def _refused_as_the_cpu(fn, *args):
    """Whether the CPU refuses these operands; if so, mytorch (fallback allowed: the fallback is what refuses)
    raises the same exception type."""
    try:
        fn(*args)
    except (RuntimeError, NotImplementedError) as e:
        torch.mytorch.set_fallback_mode("silent")
        with pytest.raises(type(e)):
            fn(*(a.to("mytorch") for a in args))
        return True
    return False


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_functions_match_the_cpu(name, dtype):
    fn, x = UNARY[name]
    a = x.to(dtype)
    if _refused_as_the_cpu(fn, a):  # no half kernels in ATen
        assert name in WIDE and dtype == torch.bfloat16
        return
    got = fn(a.to("mytorch"))
    assert got.device.type == "mytorch"
    gold = fn(a.double())
    if has_precise_golden(name):
        gold = precise_golden(name, a, gold)
        if dtype == torch.float64:  # within the floor of the function itself, not only of ATen's kernel
            assert_aligned(got, gold, None, name)
    assert_aligned(got, fn(a), gold, name)


def _pairs():
    g = torch.Generator().manual_seed(1)
    a = torch.cat([torch.randn(400, generator=g, dtype=torch.float64) * 5, torch.tensor(SPECIAL, dtype=torch.float64)])
    b = torch.cat(
        [torch.randn(400, generator=g, dtype=torch.float64) * 5, torch.tensor(SPECIAL[::-1], dtype=torch.float64)]
    )
    return a, b


BINARY = {
    "xlogy": torch.xlogy,
    "xlog1py": torch.special.xlog1py,
    "zeta": lambda a, b: torch.special.zeta(a.abs() + 1, b),  # s > 1 (s <= 1 is NaN), q of both signs
    "zeta_domain": torch.special.zeta,
    "igamma": lambda a, x: torch.igamma(a.abs(), x.abs()),
    "igammac": lambda a, x: torch.igammac(a.abs(), x.abs()),
    "igamma_domain": torch.igamma,  # a < 0 or x < 0: NaN
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
}


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_incomplete_gamma_with_large_shapes(fn):
    """a up to 1e5 with x within a few sqrt(a) of a, where the series and the fraction need hundreds of terms and
    ATen uses Temme's uniform expansion instead: two algorithms checked against each other, in float64."""
    g = torch.Generator().manual_seed(2)
    a = 10 ** (torch.rand(3000, generator=g, dtype=torch.float64) * 5)
    x = (a + torch.randn(3000, generator=g, dtype=torch.float64) * 3 * a.sqrt()).clamp_min(0)
    for dtype in (torch.float64, torch.float32):
        ad, xd = a.to(dtype), x.to(dtype)
        assert_aligned(fn(ad.to("mytorch"), xd.to("mytorch")), fn(ad, xd), fn(ad.double(), xd.double()), fn.__name__)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_functions_match_the_cpu(name, dtype):
    fn = BINARY[name]
    a, b = (t.to(dtype) for t in _pairs())
    if _refused_as_the_cpu(fn, a, b):
        assert name.startswith("zeta") and dtype == torch.float16
        return
    assert_aligned(fn(a.to("mytorch"), b.to("mytorch")), fn(a, b), fn(a.double(), b.double()), name)


POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials_match_the_cpu(name, dtype):
    """Degrees from -2 to 30, fractional ones (truncated toward zero: -0.5 is degree 0), NaN; x on and off
    [-1, 1] and at its ends (the closed forms), past 6 and 8 (the trigonometric forms)."""
    fn = getattr(torch.special, name)
    g = torch.Generator().manual_seed(4)
    x = torch.cat(
        [
            torch.rand(500, generator=g, dtype=torch.float64) * 4 - 2,
            torch.tensor([1.0, -1.0, 0.0, 0.5, 1.0, -1.0, 0.25, 0.75], dtype=torch.float64),
        ]
    )
    n = torch.cat(
        [
            torch.randint(-2, 31, (500,), generator=g).double(),
            torch.tensor([3.0, 4.0, 7.0, 9.0, -0.5, 2.7, math.nan, 12.0], dtype=torch.float64),
        ]
    )
    x, n = x.to(dtype), n.to(dtype)
    assert_aligned(fn(x.to("mytorch"), n.to("mytorch")), fn(x, n), fn(x.double(), n.double()), name)


def test_integer_inputs_compute_in_the_default_float():
    a = torch.arange(-5, 30)
    for fn in (
        torch.special.digamma,
        torch.special.i0e,
        torch.lgamma,
        torch.angle,
        torch.special.entr,
        lambda t: torch.polygamma(3, t),
        lambda t: torch.xlogy(t, t),
    ):
        got, ref = fn(a.to("mytorch")), fn(a)
        assert got.dtype == ref.dtype == torch.get_default_dtype()
        assert_aligned(got, ref, fn(a.double()))


def test_gcd_lcm_signbit_and_rsub():
    g = torch.Generator().manual_seed(2)
    for dtype in (torch.int64, torch.int32, torch.int16, torch.uint8):
        a = torch.randint(-60 if dtype != torch.uint8 else 0, 60, (300,), generator=g).to(dtype)
        b = torch.randint(-60 if dtype != torch.uint8 else 0, 60, (300,), generator=g).to(dtype)
        for fn in (torch.gcd, torch.lcm, torch.fmax, torch.fmin):
            assert torch.equal(fn(a.to("mytorch"), b.to("mytorch")).cpu(), fn(a, b))
        assert torch.equal(torch.signbit(a.to("mytorch")).cpu(), torch.signbit(a))
    x = torch.tensor([0.0, -0.0, -1.5, 2.0, math.inf, -math.inf, math.nan, -math.nan])
    assert torch.equal(torch.signbit(x.to("mytorch")).cpu(), torch.signbit(x))
    a, b = torch.randn(5, 7, generator=g), torch.randn(7, generator=g)
    assert_aligned(torch.rsub(a.to("mytorch"), b.to("mytorch"), alpha=3), torch.rsub(a, b, alpha=3))
    with pytest.raises(RuntimeError, match="polygamma"):
        torch.polygamma(-1, a.to("mytorch"))


def test_out_dtypes_as_the_cpu():
    """signbit refuses a non-bool out=; angle of a real tensor casts into a wider out= (both as the CPU)."""
    x = torch.randn(9, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="signbit does not support non-boolean outputs"):
        torch.signbit(x.to("mytorch"), out=torch.empty(9, dtype=torch.float64, device="mytorch"))
    out = torch.empty(9, dtype=torch.float64, device="mytorch")
    torch.angle(x.to("mytorch"), out=out)
    assert torch.equal(out.cpu(), torch.angle(x, out=torch.empty(9, dtype=torch.float64)))


def test_heaviside_refuses_mixed_dtypes_as_the_cpu():
    a, b = torch.randn(6), torch.randn(6)
    torch.mytorch.set_fallback_mode("silent")  # the refusal is the fallback's (ATen's message)
    for args, out in (((a, b.double()), None), ((a, b), torch.empty(6, dtype=torch.float64))):
        with pytest.raises(RuntimeError, match="heaviside is not yet implemented for tensors with different dtypes"):
            torch.heaviside(*(t.to("mytorch") for t in args), out=out.to("mytorch") if out is not None else None)


def test_logit_in_place_and_backward():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(64, generator=g, dtype=torch.float64) * 1.2 - 0.1  # values outside [0, 1] too
    for eps in (None, 0.1):
        d = x.to("mytorch").clone()
        torch.logit_(d, eps)
        assert_aligned(d, torch.logit(x, eps))
        xd = x.to("mytorch").requires_grad_()
        xc = x.clone().requires_grad_()
        torch.logit(xd, eps).sum().backward()
        torch.logit(xc, eps).sum().backward()
        assert_aligned(xd.grad, xc.grad)


# The float forms (Note [Special functions in float], special_float.h): dense grids over each function's range in
# float32 and bfloat16, where a float accumulation's cancellation shows (I1 near x = 8, K0 near 1.3, ndtri's central
# rational near p = 0.024, 1.9e-4 off in float before it moved to double), J and Y near their zeros; lgamma's
# (Note [lgamma in float], ops_math.h) poles and roots, erfinv's tails.
DENSE_X = torch.cat([torch.linspace(-100, 100, 40001, dtype=torch.float64), 10 ** torch.linspace(-30, 30, 601)])
DENSE_UNIT = torch.cat([torch.linspace(0, 1, 40001, dtype=torch.float64), 10 ** -torch.linspace(1, 45, 441)])
DENSE_SIGNED_UNIT = torch.cat([DENSE_UNIT, -DENSE_UNIT, 1 - DENSE_UNIT, DENSE_UNIT - 1])
FLOAT_FORMS = ["i0", "i0e", "i1", "i1e", "ndtri", "lgamma", "erfinv"]
FLOAT_FORMS += [n for n in UNARY if "bessel" in n]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", FLOAT_FORMS)
def test_float_forms_on_dense_grids(name, dtype):
    fn = UNARY[name][0]
    a = {"ndtri": DENSE_UNIT, "erfinv": DENSE_SIGNED_UNIT}.get(name, DENSE_X).to(dtype)
    if _refused_as_the_cpu(fn, a):
        assert name in WIDE and dtype == torch.bfloat16
        return
    got = fn(a.to("mytorch"))
    assert_aligned(got, fn(a), fn(a.double()), name)


def test_the_grid_check_is_not_vacuous():
    """Negative control: the comparison the tests above make rejects a result one part in 1e5 off."""
    x = X[torch.isfinite(X) & (X.abs() < 50)]
    got = torch.special.digamma(x.to("mytorch"))
    assert_aligned(got, torch.special.digamma(x), torch.special.digamma(x))
    with pytest.raises(AssertionError):
        assert_aligned(got * (1 + 1e-5), torch.special.digamma(x), torch.special.digamma(x))
