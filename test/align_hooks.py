"""Test-only kernels for the alignment suite's own tests: preloaded into alignment workers with
--preload align_hooks (PYTHONPATH=test). They replace mytorch's handling of three aten ops:
neg gives wrong answers, sin aborts the process, cos never returns."""

import os
import time

import torch

_lib = torch.library.Library("aten", "IMPL")


def _broken_neg(x):
    return (-x.cpu() + 1).to(x.device)  # off by one: must be reported as a mismatch


def _crashing_sin(x):
    os.abort()  # kills the worker: must not end the run


def _hanging_cos(x):
    time.sleep(3600)  # must hit the per-op time limit


_lib.impl("neg", _broken_neg, "PrivateUse1")
_lib.impl("sin", _crashing_sin, "PrivateUse1")
_lib.impl("cos", _hanging_cos, "PrivateUse1")
