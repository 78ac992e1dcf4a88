"""Golden values from the functions themselves (mpmath at 30 digits) for the ops whose CPU float64 kernels are
measurably less accurate than the alignment floor (1e-7): ATen's float64 Bessel J0, J1, Y0, Y1 and Airy Ai come
from rational approximations within ~1e-9 of the functions on most of the line but up to ~7e-7 near some zeros
(J0(-5.52): ATen -2.67356e-05, the function -2.65784e-05). mytorch's kernels are within ~1e-16 of the
functions (Note [Special functions] in kernels/include/mytorch/ops_special.h), so against ATen as the golden they
would "mismatch" where ATen is wrong. Where the argument is outside the function's real domain or not finite,
the CPU's float64 value stays the golden (its conventions: NaN at +-inf, -inf at Y(0)). mpmath comes with torch
(through sympy)."""

from __future__ import annotations

import torch

_FUNCTIONS = {
    "special.bessel_j0": lambda mp, x: mp.besselj(0, x),
    "special.bessel_j1": lambda mp, x: mp.besselj(1, x),
    "special.bessel_y0": lambda mp, x: mp.bessely(0, x) if x > 0 else None,
    "special.bessel_y1": lambda mp, x: mp.bessely(1, x) if x > 0 else None,
    "special.airy_ai": lambda mp, x: mp.airyai(x),
}


def has_precise_golden(key: str) -> bool:
    return key in _FUNCTIONS


def precise_golden(key: str, x: torch.Tensor, cpu64: torch.Tensor) -> torch.Tensor:
    """The function at x (rounded to float64), elementwise; cpu64 (the CPU's float64 result) where the function
    is not real or x is not finite."""
    import math

    import mpmath

    fn = _FUNCTIONS[key]
    flat, ref = x.detach().double().cpu().flatten().tolist(), cpu64.detach().double().cpu().flatten()
    out = ref.clone()
    with mpmath.workdps(30):
        for i, v in enumerate(flat):
            if not math.isfinite(v) or not math.isfinite(ref[i].item()):
                continue
            r = fn(mpmath, mpmath.mpf(v))
            if r is not None:
                out[i] = float(r)
    return out.reshape(cpu64.shape)
