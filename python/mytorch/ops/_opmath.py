"""The CPU implementations' compute type, as the kernels' (ew::opmath_t): float32 for half types, else the dtype."""

from __future__ import annotations

import torch


def opmath_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def opmath(x: torch.Tensor) -> torch.Tensor:
    return x.to(opmath_dtype(x.dtype))
