"""Capacity-mode dispatch and combine as custom operators (torch.library), with fake kernels, so that
torch.compile traces them into its graph (shapes are static in capacity mode: fixed rows a pair of ranks) and
AOT autograd finds their backwards. A Buffer is named by an integer id (its registry here); the layout travels
as the tuple of tensors `layout` (EPLayout's fields), from which the operators rebuild the handle.

    recv_x, recv_idx, recv_w, layout = ep.dispatch_capacity(buf, x, topk_idx, topk_weights, num_experts,
                                                            expert_alignment=4, capacity=None)
    out = ep.combine_capacity(buf, y, recv_w, layout)
"""

from __future__ import annotations

import itertools
import weakref

import torch

_BUFFERS = weakref.WeakValueDictionary()
_ids = itertools.count(1)

# the handle's tensors, in the order the operators pass them
_FIELDS = (
    "dest",
    "send_pos",
    "send_counts",
    "recv_counts",
    "slot_rows",
    "row_gather",
    "offsets",
    "num_recv_tokens_per_expert",
    "num_dropped",
)


def register(buf) -> int:
    i = next(_ids)
    _BUFFERS[i] = buf
    return i


def _sizes(buf_id: int, tokens: int, num_experts: int, alignment: int, capacity: int):
    buf = _BUFFERS[buf_id]
    W, K = buf.world, buf.num_topk
    L = num_experts // W
    cap = capacity or buf.max_tokens
    N = W * cap
    R = N * min(K, L) + L * (alignment - 1)
    return buf, W, K, L, cap, N, R


def _handle(buf_id, num_experts, alignment, capacity, tokens, layout):
    from .ep import EPHandle

    buf, W, K, L, cap, N, R = _sizes(buf_id, tokens, num_experts, alignment, capacity)
    fields = dict(zip(_FIELDS, layout))
    h = EPHandle(
        mode="capacity",
        num_experts=num_experts,
        num_local=L,
        alignment=alignment,
        tokens=tokens,
        recv_rows=N,
        capacity=cap,
        **fields,
    )
    h._rows = R
    return buf, h


@torch.library.custom_op("mytorch_ep::dispatch_capacity", mutates_args=())
def _dispatch(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    buf_id: int,
    num_experts: int,
    alignment: int,
    capacity: int,
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]:
    buf = _BUFFERS[buf_id]
    code, detail = buf._check(x, topk_idx, topk_weights, num_experts)
    h = buf._layout(topk_idx, num_experts, "capacity", alignment, capacity, code, detail)
    recv_x, weight = buf._dispatch_forward(h, x, topk_idx, topk_weights)
    return (recv_x, h._expert, weight) + tuple(getattr(h, f).clone() for f in _FIELDS)


@_dispatch.register_fake
def _dispatch_fake(x, topk_idx, topk_weights, buf_id, num_experts, alignment, capacity):
    T = x.shape[0]
    buf, W, K, L, cap, N, R = _sizes(buf_id, T, num_experts, alignment, capacity)
    i64 = dict(dtype=torch.int64)
    return (
        x.new_empty(R, x.shape[1]),
        x.new_empty(R, **i64),
        x.new_empty(R, dtype=torch.float32),
        x.new_empty(T, K, **i64),
        x.new_empty(T, W, **i64),
        x.new_empty(W, **i64),
        x.new_empty(W, **i64),
        x.new_empty(N, K, **i64),
        x.new_empty(R, **i64),
        x.new_empty(L, dtype=torch.int32),
        x.new_empty(L, **i64),
        x.new_empty(W, **i64),
    )


@torch.library.custom_op("mytorch_ep::dispatch_capacity_backward", mutates_args=())
def _dispatch_backward(
    grad_x: torch.Tensor,
    grad_w: torch.Tensor,
    layout: list[torch.Tensor],
    buf_id: int,
    num_experts: int,
    alignment: int,
    capacity: int,
    tokens: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    buf, h = _handle(buf_id, num_experts, alignment, capacity, tokens, layout)
    return buf._dispatch_backward(h, grad_x, grad_w, grad_x.dtype)


@_dispatch_backward.register_fake
def _dispatch_backward_fake(grad_x, grad_w, layout, buf_id, num_experts, alignment, capacity, tokens):
    buf = _BUFFERS[buf_id]
    return grad_x.new_empty(tokens, grad_x.shape[1]), grad_x.new_empty(tokens, buf.num_topk, dtype=torch.float32)


def _dispatch_setup(ctx, inputs, output):
    x, _, topk_weights, buf_id, num_experts, alignment, capacity = inputs
    ctx.args = (buf_id, num_experts, alignment, capacity, x.shape[0])
    ctx.w_dtype = topk_weights.dtype
    ctx.save_for_backward(*output[3:])


def _dispatch_bwd(ctx, g_x, _g_idx, g_w, *_g_layout):
    layout = list(ctx.saved_tensors)
    gx, gw = torch.ops.mytorch_ep.dispatch_capacity_backward(g_x.contiguous(), g_w.contiguous(), layout, *ctx.args)
    return gx, None, gw.to(ctx.w_dtype), None, None, None, None


_dispatch.register_autograd(_dispatch_bwd, setup_context=_dispatch_setup)


@torch.library.custom_op("mytorch_ep::combine_capacity", mutates_args=())
def _combine(
    y: torch.Tensor,
    weights: torch.Tensor,
    layout: list[torch.Tensor],
    buf_id: int,
    num_experts: int,
    alignment: int,
    capacity: int,
    tokens: int,
) -> torch.Tensor:
    buf, h = _handle(buf_id, num_experts, alignment, capacity, tokens, layout)
    return buf._combine_forward(h, y, weights)


@_combine.register_fake
def _combine_fake(y, weights, layout, buf_id, num_experts, alignment, capacity, tokens):
    return y.new_empty(tokens, y.shape[1])


@torch.library.custom_op("mytorch_ep::combine_capacity_backward", mutates_args=())
def _combine_backward(
    grad: torch.Tensor,
    y: torch.Tensor,
    weights: torch.Tensor,
    layout: list[torch.Tensor],
    buf_id: int,
    num_experts: int,
    alignment: int,
    capacity: int,
    tokens: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    buf, h = _handle(buf_id, num_experts, alignment, capacity, tokens, layout)
    g_rows = buf._combine_backward_rows(h, grad)
    gy = (g_rows.float() * weights.float().unsqueeze(1)).to(y.dtype)
    gw = (g_rows.float() * y.float()).sum(1)
    return gy, gw


@_combine_backward.register_fake
def _combine_backward_fake(grad, y, weights, layout, buf_id, num_experts, alignment, capacity, tokens):
    return torch.empty_like(y), weights.new_empty(weights.shape, dtype=torch.float32)


def _combine_setup(ctx, inputs, output):
    y, weights, layout, *args = inputs
    ctx.args = tuple(args)
    ctx.w_dtype = weights.dtype
    ctx.n_layout = len(layout)
    ctx.save_for_backward(y, weights, *layout)


def _combine_bwd(ctx, grad):
    y, weights, *layout = ctx.saved_tensors
    gy, gw = torch.ops.mytorch_ep.combine_capacity_backward(grad.contiguous(), y, weights, layout, *ctx.args)
    return gy, gw.to(ctx.w_dtype), [None] * ctx.n_layout, None, None, None, None, None


_combine.register_autograd(_combine_bwd, setup_context=_combine_setup)


def dispatch_capacity(
    buf, x, topk_idx, topk_weights, num_experts: int, expert_alignment: int = 1, capacity: int | None = None
):
    """Capacity-mode dispatch as one operator (torch.compile keeps it in the graph): (recv_x, recv_topk_idx,
    recv_topk_weights, layout); combine_capacity takes the layout back. Differentiable in x and topk_weights."""
    out = torch.ops.mytorch_ep.dispatch_capacity(
        x, topk_idx, topk_weights, buf._id, int(num_experts), int(expert_alignment), int(capacity or 0)
    )
    layout = (list(out[3:]), int(num_experts), int(expert_alignment), int(capacity or 0), x.shape[0])
    return out[0], out[1], out[2], layout


def combine_capacity(buf, y, weights, layout):
    """Capacity-mode combine as one operator: out [T, H] = sum_k w * y[row of (t, k)] (weights: recv_topk_weights
    or others of the same shape). Differentiable in y and weights."""
    tensors, num_experts, alignment, capacity, tokens = layout
    return torch.ops.mytorch_ep.combine_capacity(y, weights, tensors, buf._id, num_experts, alignment, capacity, tokens)
