"""The sim runtime's GEMMs (Note [Sim GEMM library], csrc/core/SimBlas.cpp): float32 GEMMs of a few million
multiply-adds or more run on oneDNN on CPUs other than Intel's, everything else on MKL as the CPU does; both
against the CPU within the alignment rule, with and without the oneDNN path (the counter is the control that the
path under test really ran)."""

import pytest
import torch

import mytorch
from mytorch.testing._compare import assert_aligned

pytestmark = pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim runtime's GEMMs")


def _cases(g):
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    a, b, bias = r(512, 192), r(192, 576), r(576)
    bt = r(576, 192).t()  # a transposed operand
    c = r(512, 576)
    a3, b3 = r(96, 128, 64), r(96, 64, 128)
    c3 = r(96, 128, 128)
    return {
        "mm": (lambda t: torch.mm(t(a), t(b))),
        "mm_t": (lambda t: t(a) @ t(bt)),
        "addmm_bias": (lambda t: torch.addmm(t(bias), t(a), t(b), beta=0.5, alpha=2.0)),
        "addmm_beta0_nan": (lambda t: torch.addmm(t(torch.full((576,), float("nan"))), t(a), t(b), beta=0)),
        "addmm_inplace": (lambda t: t(c.clone()).addmm_(t(a), t(b), alpha=0.25)),
        "linear": (lambda t: torch.nn.functional.linear(t(a), t(bt.t()), t(bias))),  # a . W^T
        "bmm": (lambda t: torch.bmm(t(a3), t(b3))),
        "baddbmm": (lambda t: torch.baddbmm(t(c3), t(a3), t(b3), beta=0.5, alpha=1.5)),
        "strided": (lambda t: t(r(512, 384))[:, ::2] @ t(b)),  # no unit stride: declined, MKL runs it
    }


@pytest.mark.parametrize("name", list(_cases(torch.Generator().manual_seed(0))))
def test_large_float32_gemms_match_the_cpu(name):
    g = torch.Generator().manual_seed(0)
    f = _cases(g)[name]
    before = mytorch._C._sim_gemm_onednn_calls()
    got = f(lambda x: x.to("mytorch"))
    taken = mytorch._C._sim_gemm_onednn_calls() - before
    want = f(lambda x: x)
    gold = f(lambda x: x.double())
    assert_aligned(got, want, gold, what=name)
    if name == "strided":
        assert taken == 0
    elif torch.backends.cpu.get_cpu_capability() and not _intel():
        assert taken >= 1, "the oneDNN path did not run: the test would compare MKL with MKL"


def test_small_and_double_gemms_stay_on_mkl():
    before = mytorch._C._sim_gemm_onednn_calls()
    x = torch.randn(64, 64, device="mytorch")
    (x @ x).cpu()
    (x.double() @ x.double()).cpu()
    assert mytorch._C._sim_gemm_onednn_calls() == before


def test_mkldnn_switch_off_keeps_mkl():
    x = torch.randn(512, 512, device="mytorch")
    before = mytorch._C._sim_gemm_onednn_calls()
    with torch.backends.mkldnn.flags(enabled=False):
        (x @ x).cpu()
    assert mytorch._C._sim_gemm_onednn_calls() == before


def _intel() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "GenuineIntel" in f.read()
    except OSError:
        return False
