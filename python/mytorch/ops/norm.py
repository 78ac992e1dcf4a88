"""The residual add fused into LayerNorm / RMSNorm.

    y, s = mytorch.ops.add_layer_norm(x, residual, (d,), weight, bias, eps)   # s = x + residual, y = LN(s)
    y, s = mytorch.ops.add_rms_norm(x, residual, (d,), weight, eps)           # y = RMSNorm(s)

A pre-norm transformer block writes `h = h + attn(...)` and then normalises `h`: fused, the sum is written
once and the norm reads it from registers instead of reading it back (one pass over memory instead of
three). The ops are `torch.ops.mytorch.add_layer_norm` / `add_rms_norm` (schemas in csrc/ops/Library.cpp)
with autograd (gradients for x, residual, weight and bias, through aten's native norm backwards, which are
our kernels on mytorch), fake kernels for torch.compile, and a CPU implementation (the reference).
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["add_layer_norm", "add_rms_norm"]


def _stat_shape(x: torch.Tensor, normalized_shape) -> tuple:
    nd = len(normalized_shape)
    return tuple(x.shape[: x.dim() - nd]) + (1,) * nd


def _acc(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


@torch.library.register_fake("mytorch::add_layer_norm")
def _add_layer_norm_fake(x, residual, normalized_shape, weight, bias, eps):
    stat = _stat_shape(x, normalized_shape)
    return (
        torch.empty_like(x),
        x.new_empty(stat, dtype=_acc(x)),
        x.new_empty(stat, dtype=_acc(x)),
        torch.empty_like(x),
    )


@torch.library.register_fake("mytorch::add_rms_norm")
def _add_rms_norm_fake(x, residual, normalized_shape, weight, eps):
    return torch.empty_like(x), x.new_empty(_stat_shape(x, normalized_shape), dtype=_acc(x)), torch.empty_like(x)


@torch.library.impl("mytorch::add_layer_norm", "cpu")
def _add_layer_norm_cpu(x, residual, normalized_shape, weight, bias, eps):
    s = x + residual
    y, mean, rstd = torch.ops.aten.native_layer_norm(s, normalized_shape, weight, bias, eps)
    return y, mean.to(_acc(x)), rstd.to(_acc(x)), s


@torch.library.impl("mytorch::add_rms_norm", "cpu")
def _add_rms_norm_cpu(x, residual, normalized_shape, weight, eps):
    s = x + residual
    y, rstd = torch.ops.aten._fused_rms_norm(s, normalized_shape, weight, eps)
    return y, rstd.to(_acc(x)), s


def _setup_layer(ctx, inputs, output):
    _, _, normalized_shape, weight, bias, _ = inputs
    _, mean, rstd, s = output
    ctx.normalized_shape = list(normalized_shape)
    ctx.save_for_backward(s, mean, rstd, weight, bias)


def _backward_layer(ctx, gy, _gmean, _grstd, gsum):
    s, mean, rstd, weight, bias = ctx.saved_tensors
    if gy is None:
        gy = torch.zeros_like(s)
    mask = [True, weight is not None and ctx.needs_input_grad[3], bias is not None and ctx.needs_input_grad[4]]
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(
        gy,
        s,
        ctx.normalized_shape,
        mean.to(s.dtype) if s.device.type == "cpu" else mean,
        rstd.to(s.dtype) if s.device.type == "cpu" else rstd,
        weight,
        bias,
        mask,
    )
    if gsum is not None:
        dx = dx + gsum
    return dx, dx, None, dw, db, None


def _setup_rms(ctx, inputs, output):
    _, _, normalized_shape, weight, eps = inputs
    _, rstd, s = output
    ctx.normalized_shape = list(normalized_shape)
    ctx.eps = eps
    ctx.save_for_backward(s, rstd, weight)


def _backward_rms(ctx, gy, _grstd, gsum):
    s, rstd, weight = ctx.saved_tensors
    if gy is None:
        gy = torch.zeros_like(s)
    mask = [True, weight is not None and ctx.needs_input_grad[3]]
    if s.device.type == "cpu":  # aten's CPU build has no _fused_rms_norm_backward: autograd of the composition
        with torch.enable_grad():
            x = s.detach().requires_grad_()
            w = weight.detach().requires_grad_() if mask[1] else weight
            y = torch.nn.functional.rms_norm(x, ctx.normalized_shape, w, ctx.eps)
            grads = torch.autograd.grad(y, [x, w] if mask[1] else [x], gy)
        dx, dw = grads[0], grads[1] if mask[1] else None
    else:
        dx, dw = torch.ops.aten._fused_rms_norm_backward(gy, s, ctx.normalized_shape, rstd, weight, mask)
    if gsum is not None:
        dx = dx + gsum
    return dx, dx, None, dw, None


torch.library.register_autograd("mytorch::add_layer_norm", _backward_layer, setup_context=_setup_layer)
torch.library.register_autograd("mytorch::add_rms_norm", _backward_rms, setup_context=_setup_rms)


def add_layer_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (layer_norm(x + residual), x + residual) in one fused pass."""
    y, _, _, s = torch.ops.mytorch.add_layer_norm(x, residual, list(normalized_shape), weight, bias, eps)
    return y, s


def add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (rms_norm(x + residual), x + residual) in one fused pass."""
    y, _, s = torch.ops.mytorch.add_rms_norm(x, residual, list(normalized_shape), weight, eps)
    return y, s
