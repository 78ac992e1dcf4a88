"""Test-only kernels for the fuzzer's negative control (test_fuzz.py): preloaded into fuzz workers with
--preload fuzz_hooks (PYTHONPATH=test). They put back the range factories' out= bug of issue 49: linspace and
arange resize a right-sized, non-contiguous out= to a contiguous 1-D tensor (the CPU writes through its strides
and keeps its shape), so the reshaped_out and factory_out variants must report them."""

import torch

_lib = torch.library.Library("aten", "IMPL")


def _reshaping_linspace(start, end, steps, *, out):
    values = torch.linspace(start, end, steps, dtype=out.dtype)  # the right values, on the CPU
    out.resize_(steps)  # the bug: the out= loses its shape and strides
    return out.copy_(values)


def _reshaping_arange(start, end, step=1, *, out):
    values = torch.arange(start, end, step, dtype=out.dtype)
    out.resize_(values.numel())
    return out.copy_(values)


_lib.impl("linspace.out", _reshaping_linspace, "PrivateUse1")
_lib.impl("arange.start_out", _reshaping_arange, "PrivateUse1")
