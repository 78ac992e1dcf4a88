"""Gated MLP activations, SwiGLU and GeGLU, fused (Note [Fused LLM ops] in kernels/include/mytorch/llm.h).

    y = mytorch.ops.swiglu(gate, up)                    # silu(gate) * up
    y = mytorch.ops.swiglu(gate_up)                     # a packed projection [..., 2 * I]: gate half first
    y = mytorch.ops.geglu(gate, up, approximate="tanh")  # gelu(gate) * up
    y = mytorch.ops.clamped_swiglu(gate_up, alpha=1.702, limit=7.0)  # GPT-OSS's gate, interleaved gate_up

One pass each way, in float32 for half-precision inputs (rounded once), keeping only gate and up for the backward:
aten's composition keeps act(gate) as well. With a packed gate_up (one GEMM for both projections, as Phi-3 and
GPT-OSS store it) the backward writes both gradients into one buffer of gate_up's shape, so no cat follows.
`torch.ops.mytorch.glu` / `glu_backward` (schemas in csrc/ops/Library.cpp) are each defined once (Note [A fused op,
defined once]): the reference below is the CPU implementation and, run on fake tensors, the fake kernel for
torch.compile; glu's autograd is glu_backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._define import fused_op, saved_inputs
from ._opmath import opmath

__all__ = ["swiglu", "geglu", "clamped_swiglu"]


def _halves(gate: torch.Tensor, up: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    if up is not None:
        return gate, up
    n = gate.shape[-1] // 2
    return gate[..., :n], gate[..., n:]


def _act(x: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "silu":
        return F.silu(x)
    return F.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")


def _setup(ctx, inputs, output):
    gate, up, activation = inputs
    ctx.activation = activation
    ctx.packed = up is None
    ctx.save_for_backward(gate, up)


def _backward(ctx, grad):
    gate, up = ctx.saved_tensors
    both = torch.ops.mytorch.glu_backward(grad, gate, up, ctx.activation)
    if ctx.packed:
        return both, None, None
    n = both.shape[-1] // 2
    return both[..., :n], both[..., n:], None


@fused_op("glu", setup=_setup, backward=_backward)
def _glu_reference(gate, up, activation):
    """act(gate) * up in opmath, rounded once; gate the packed [..., 2 * I] projection when up is None."""
    g, u = _halves(gate, up)
    return (_act(opmath(g), activation) * opmath(u)).to(g.dtype)


@fused_op("glu_backward")
def _glu_backward_reference(grad, gate, up, activation):
    """Both gradients in one buffer [..., dgate | dup] of the operands' shape with the last dim doubled."""
    g, u = _halves(gate, up)
    g32, u32, d32 = opmath(g), opmath(u), opmath(grad)
    du = d32 * _act(g32, activation)
    if activation == "silu":
        dg = torch.ops.aten.silu_backward(d32 * u32, g32)
    else:
        dg = torch.ops.aten.gelu_backward(d32 * u32, g32, approximate="tanh" if activation == "gelu_tanh" else "none")
    return torch.cat([dg, du], dim=-1).to(g.dtype)


def swiglu(gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up; with `up` omitted, `gate` is a packed [..., 2 * I] projection (gate half first)."""
    return torch.ops.mytorch.glu(gate, up, "silu")


def geglu(gate: torch.Tensor, up: torch.Tensor | None = None, approximate: str = "none") -> torch.Tensor:
    """gelu(gate, approximate) * up (approximate "none" or "tanh"); `up` omitted as in swiglu."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"geglu: expected approximate 'none' or 'tanh', but got {approximate!r}")
    return torch.ops.mytorch.glu(gate, up, "gelu_tanh" if approximate == "tanh" else "gelu")


# ---- GPT-OSS's clamped SwiGLU: one definition each (Note [A fused op, defined once]) -----------------------------
def _clamped_backward(ctx, grad):
    gate, up, alpha, limit = saved_inputs(ctx)
    need_gate, need_up = ctx.needs_input_grad[:2]
    dgate = torch.ops.mytorch.clamped_swiglu_grad_gate(grad, gate, up, alpha, limit) if need_gate else None
    dup = torch.ops.mytorch.clamped_swiglu_grad_up(grad, gate, up, alpha, limit) if need_up else None
    return dgate, dup, None, None


@fused_op("clamped_swiglu", backward=_clamped_backward)
def clamped_swiglu_reference(gate, up, alpha, limit):
    """GPT-OSS's gate, transformers' GptOssExperts._apply_gate on gate and up: g = gate.clamp(max=limit),
    (up.clamp(-limit, limit) + 1) * g * sigmoid(alpha * g), in float32 for half types, rounded once. Kept for the
    backward: gate and up only (the composition keeps five tensors)."""
    dtype = torch.result_type(gate, up)
    g, u = opmath(gate.to(dtype)).clamp(max=limit), opmath(up.to(dtype)).clamp(-limit, limit)
    return ((u + 1) * (g * torch.sigmoid(g * alpha))).to(dtype)


@fused_op("clamped_swiglu_grad_gate")
def _clamped_grad_gate_reference(grad, gate, up, alpha, limit):
    """d clamped_swiglu / d gate * grad: zero where gate > limit (clamp's gradient), as aten's autograd."""
    dtype = torch.result_type(gate, up)
    d, g, u = opmath(grad.to(dtype)), opmath(gate.to(dtype)), opmath(up.to(dtype))
    s = torch.sigmoid(alpha * g)
    return torch.where(g <= limit, d * (u.clamp(-limit, limit) + 1) * (s + alpha * g * s * (1 - s)), 0).to(dtype)


@fused_op("clamped_swiglu_grad_up")
def _clamped_grad_up_reference(grad, gate, up, alpha, limit):
    """d clamped_swiglu / d up * grad: zero where |up| > limit (clamp's gradient), as aten's autograd."""
    dtype = torch.result_type(gate, up)
    d, g, u = opmath(grad.to(dtype)), opmath(gate.to(dtype)).clamp(max=limit), opmath(up.to(dtype))
    return torch.where((u >= -limit) & (u <= limit), d * g * torch.sigmoid(alpha * g), 0).to(dtype)


def clamped_swiglu(
    gate: torch.Tensor, up: torch.Tensor | None = None, *, alpha: float = 1.702, limit: float = 7.0
) -> torch.Tensor:
    """GPT-OSS's clamped SwiGLU (clamped_swiglu_reference); with `up` omitted, `gate` is the packed gate_up of
    GPT-OSS's layout, gate and up interleaved (gate_up[..., ::2] and gate_up[..., 1::2])."""
    if up is None:
        gate, up = gate[..., ::2], gate[..., 1::2]
    return torch.ops.mytorch.clamped_swiglu(gate, up, alpha, limit)
