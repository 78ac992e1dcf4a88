"""aten::_assert_async on mytorch (issue 54; csrc/aten/tensor/Assert.cpp): native, the value checked on the device
with no synchronisation, a zero raised with the CPU's message (Note [Device-side errors]: at once on the sim, at the
next synchronisation on the cuda/emu runtimes), the element count checked on the host as torch.cuda does."""

import pytest
import torch

import mytorch

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

DEV = "mytorch"


def _raised_by_now_or_at_sync(fn, match):
    with pytest.raises(RuntimeError, match=match):
        fn()
        torch.mytorch.synchronize()


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32, torch.bfloat16, torch.complex64])
def test_nonzero_passes_zero_raises_the_cpus_message(dtype):
    one, zero = torch.ones((), dtype=dtype, device=DEV), torch.zeros(1, dtype=dtype, device=DEV)
    report = mytorch.audit(lambda: (torch._assert_async(one), torch._assert_async(one, "routing is balanced")))
    assert report.ops.get("aten::_assert_async") == "native" and report.ops.get("aten::_assert_async.msg") == "native"
    torch.mytorch.synchronize()
    with pytest.raises(RuntimeError) as cpu:
        torch._assert_async(torch.zeros(1, dtype=dtype), "routing is balanced")
    _raised_by_now_or_at_sync(lambda: torch._assert_async(zero, "routing is balanced"), str(cpu.value))
    _raised_by_now_or_at_sync(lambda: torch._assert_async(zero), "single nonzero value, but got zero")
    torch._assert_async(one)  # the device is usable after the error was raised
    torch.mytorch.synchronize()


def test_element_count_checked_on_the_host_and_functional_form():
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        torch._assert_async(torch.ones(2, device=DEV))
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        torch._assert_async(torch.ones(0, device=DEV))
    token = torch.ops.aten._make_dep_token(device=DEV)
    out = torch.ops.aten._functional_assert_async.msg(torch.ones(1, device=DEV), "fine", token)
    assert out.shape == token.shape
    _raised_by_now_or_at_sync(
        lambda: torch.ops.aten._functional_assert_async.msg(torch.zeros(1, device=DEV), "not fine", token), "not fine"
    )
