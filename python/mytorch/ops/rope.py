"""The rotary position embedding, fused (Note [Fused LLM ops] in kernels/include/mytorch/llm.h).

    q, k = mytorch.ops.rotary_embedding(q, k, cos, sin)                     # transformers' apply_rotary_pos_emb
    q, k = mytorch.ops.rotary_embedding(q, k, cos_table, sin_table, position_ids=pos)
    q, k = mytorch.ops.rotary_embedding(q, k, cos, sin, interleaved=True)    # GPT-J pairs (2i, 2i + 1)
    x = mytorch.ops.rotary_embedding_complex(x, freqs_cis)                   # DeepSeek-V2's complex form

Layouts: q and k of any layout whose last dim is the head (bhsd, bshd, sbhd: up to 4 dims) and cos/sin that
broadcast against them once unsqueezed at `unsqueeze_dim` (transformers' convention: cos [batch, seq, width] and
q [batch, heads, seq, head_dim] with unsqueeze_dim=1; None: cos/sin already broadcast). With position_ids, cos/sin
are tables [positions, width] and position_ids [batch, seq] picks their rows (an id out of range raises an
IndexError). cos/sin give one value per rotated element (width = rotary_dim, as transformers' cat(freqs, freqs))
or one per pair (width = rotary_dim / 2, pass rotary_dim); the elements past rotary_dim are copied (partial
rotary, as Phi and GPT-NeoX). One kernel pass each way; the backward is the inverse rotation, so nothing is kept
but cos/sin. inplace=True rotates q and k in their own memory (inference: no autograd).
"""

from __future__ import annotations

import torch

from ._opmath import opmath_dtype

__all__ = ["rotary_embedding", "rotary_embedding_complex"]


def _rotary_dim(cos: torch.Tensor, rotary_dim: int) -> int:
    return rotary_dim if rotary_dim > 0 else cos.shape[-1]


def _per_element(c: torch.Tensor, rot: int, interleaved: bool) -> torch.Tensor:
    if c.shape[-1] == rot:
        return c
    return c.repeat_interleave(2, dim=-1) if interleaved else torch.cat([c, c], dim=-1)


def _rotate(v: torch.Tensor, interleaved: bool, transpose: bool) -> torch.Tensor:
    """rotate_half (NeoX) / rotate_every_two (GPT-J), or its transpose."""
    if interleaved:
        a, b = v[..., 0::2], v[..., 1::2]
        pair = torch.stack([b, -a] if transpose else [-b, a], dim=-1)
        return pair.flatten(-2)
    h = v.shape[-1] // 2
    a, b = v[..., :h], v[..., h:]
    return torch.cat([b, -a] if transpose else [-b, a], dim=-1)


def _rope_reference(x, cos, sin, position_ids, interleaved, rotary_dim, inverse):
    """The aten composition (the CPU implementation), in float32 for half-precision x, rounded once."""
    rot = _rotary_dim(cos, rotary_dim)
    if position_ids is not None:
        cos, sin = cos[position_ids.long()], sin[position_ids.long()]
    op = opmath_dtype(x.dtype)
    c = _per_element(cos, rot, interleaved).to(op)
    s = _per_element(sin, rot, interleaved).to(op)
    xr = x[..., :rot].to(op)
    y = xr * c + (_rotate(xr * s, interleaved, True) if inverse else _rotate(xr, interleaved, False) * s)
    return torch.cat([y.to(x.dtype), x[..., rot:]], dim=-1)


@torch.library.register_fake("mytorch::rope")
def _rope_fake(x, cos, sin, position_ids, interleaved, rotary_dim, inverse):
    return torch.empty_like(x)


@torch.library.register_fake("mytorch::rope_")
def _rope_inplace_fake(x, cos, sin, position_ids, interleaved, rotary_dim):
    return x


@torch.library.impl("mytorch::rope", "cpu")
def _rope_cpu(x, cos, sin, position_ids, interleaved, rotary_dim, inverse):
    return _rope_reference(x, cos, sin, position_ids, interleaved, rotary_dim, inverse)


@torch.library.impl("mytorch::rope_", "cpu")
def _rope_inplace_cpu(x, cos, sin, position_ids, interleaved, rotary_dim):
    return x.copy_(_rope_reference(x, cos, sin, position_ids, interleaved, rotary_dim, False))


def _setup(ctx, inputs, output):
    _, cos, sin, position_ids, interleaved, rotary_dim, inverse = inputs
    ctx.args = (interleaved, rotary_dim, not inverse)
    ctx.save_for_backward(cos, sin, position_ids)


def _backward(ctx, grad):
    cos, sin, position_ids = ctx.saved_tensors
    interleaved, rotary_dim, inverse = ctx.args
    dx = torch.ops.mytorch.rope(grad.contiguous(), cos, sin, position_ids, interleaved, rotary_dim, inverse)
    return dx, None, None, None, None, None, None


torch.library.register_autograd("mytorch::rope", _backward, setup_context=_setup)


def _apply(x, cos, sin, pos, interleaved, rotary_dim, inplace):
    if x is None:
        return None
    if inplace:
        return torch.ops.mytorch.rope_(x, cos, sin, pos, interleaved, rotary_dim)
    return torch.ops.mytorch.rope(x, cos, sin, pos, interleaved, rotary_dim, False)


def rotary_embedding(
    q: torch.Tensor,
    k: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    interleaved: bool = False,
    rotary_dim: int | None = None,
    unsqueeze_dim: int | None = 1,
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(q, k) rotated by cos/sin, as transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)."""
    if torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad):
        raise NotImplementedError("rotary_embedding: gradients for cos/sin are not supported (they are buffers)")
    if inplace and torch.is_grad_enabled() and (q.requires_grad or (k is not None and k.requires_grad)):
        raise RuntimeError("rotary_embedding: inplace=True is for inference: q and k must not require grad")
    pos = position_ids
    if pos is not None:
        if unsqueeze_dim is not None:
            pos = pos.unsqueeze(unsqueeze_dim)
    elif unsqueeze_dim is not None:
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rot = int(rotary_dim or 0)
    return _apply(q, cos, sin, pos, interleaved, rot, inplace), _apply(k, cos, sin, pos, interleaved, rot, inplace)


def rotary_embedding_complex(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V2's apply_rotary_emb: x's pairs (2i, 2i + 1) as complex numbers times freqs_cis (complex,
    broadcasting against x viewed as complex, [seq, head_dim / 2] against [batch, seq, heads, head_dim / 2] as
    there), on the fused kernel: cos/sin are its real and imaginary parts, one per pair."""
    if not freqs_cis.is_complex():
        raise TypeError(f"rotary_embedding_complex: expected complex freqs_cis, but got {freqs_cis.dtype}")
    f = freqs_cis
    if f.dim() == 2 and x.dim() == 4:  # [seq, d/2] against x [batch, seq, heads, d]: as view_as_complex broadcasts
        f = f.unsqueeze(1)
    cos, sin = f.real.contiguous(), f.imag.contiguous()
    if cos.dtype != x.dtype and cos.dtype != torch.float32:
        cos, sin = cos.float(), sin.float()
    y, _ = rotary_embedding(x, None, cos, sin, interleaved=True, rotary_dim=x.shape[-1], unsqueeze_dim=None)
    return y
