"""Automatic mixed precision on mytorch: torch.autocast("mytorch") uses CUDA autocast's op policy
(registered in csrc/aten/tensor/Autocast.cpp) and torch.amp.GradScaler("mytorch") runs its unscale and
scale-update ops as native kernels."""

import torch


def get_amp_supported_dtype() -> list:
    """The dtypes torch.autocast("mytorch", dtype=...) accepts (as torch.cuda.get_amp_supported_dtype)."""
    return [torch.float16, torch.bfloat16, torch.float32]
