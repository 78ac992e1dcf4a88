"""torch.nn.attention.flex_attention on mytorch tensors (issue 54; docs/torchtitan.md).

torch 2.13's flex_attention checks its inputs' device against a fixed set (`_validate_device`: cuda, cpu, xpu, hpu,
mps) before anything else, so a mytorch tensor is refused although the eager implementation (the higher-order op's
dense path, score and mask modifications applied by vmap) runs on any device's operators. The adaptation wraps that
one function when torch.nn.attention.flex_attention is imported (mytorch/_after_import.py), never by importing
mytorch: a mytorch query passes, forward and backward (as CUDA's); every other device gets torch's check unchanged.
Written against torch 2.13: another version is left alone with a warning, and test_flex_attention fails on it (the
loud failure a version bump needs, as the other adaptations').
"""

from __future__ import annotations

import warnings

import torch

TESTED = "2.13."


def adapt(module) -> bool:
    """Wraps module._validate_device; True when applied (idempotent)."""
    if not torch.__version__.startswith(TESTED):
        warnings.warn(
            f"mytorch: the flex_attention adaptation is written for torch {TESTED}x, not {torch.__version__}; "
            "flex_attention may refuse mytorch tensors (docs/torchtitan.md)",
            stacklevel=2,
        )
        return False
    original = getattr(module, "_validate_device", None)
    if not callable(original):
        warnings.warn("mytorch: torch's flex_attention has no _validate_device any more; not adapted", stacklevel=2)
        return False
    if getattr(original, "_mytorch", False):
        return True

    def _validate_device(query, key, value):
        if query.device.type == "mytorch":
            return None
        return original(query, key, value)

    _validate_device._mytorch = True
    _validate_device.__wrapped__ = original
    module._validate_device = _validate_device
    return True
