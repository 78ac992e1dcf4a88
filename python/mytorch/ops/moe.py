"""Mixture-of-experts routing, fused (Note [Fused MoE routing] in kernels/include/mytorch/moe.h).

    w, ids = mytorch.ops.moe_topk(router_logits, k)             # Mixtral / Qwen-MoE: softmax, top-k, renormalised
    w, ids = mytorch.ops.moe_topk(logits, 8, score="sigmoid", expert_bias=b, n_group=8, topk_group=4,
                                  scaling=2.5)                  # DeepSeek-V3's router
    rows, offsets, pos = mytorch.ops.moe_permute(tokens, ids, num_experts)  # rows grouped by expert
    out = mytorch.ops.moe_unpermute(expert_rows, pos, w)      # out[t] = sum_s w[t, s] expert_rows[pos[t, s]]

moe_topk is one kernel per token row (scores in float32, the expert bias for the selection only, grouped
selection, renormalisation and scaling) with a backward for the router's logits; moe_permute sorts the (token, slot)
pairs by expert (stable: within an expert, in token order), gathers the rows and gives the offsets torch._grouped_mm
takes (int32 cumulative counts) and pos, each pair's row in the permuted order; moe_unpermute is the weighted
combine back (float32 sums in slot order, deterministic) with gradients for the rows and the weights. With them,
`experts_forward` is a transformers experts implementation ("mytorch": registered in transformers' ExpertsInterface
as soon as transformers' MoE integration is imported, so `from_pretrained(..., experts_implementation="mytorch")`
works without patching model code).
"""

from __future__ import annotations

import importlib.util

import torch

from .._after_import import after_import
from ._opmath import opmath

__all__ = ["moe_topk", "moe_permute", "moe_unpermute", "experts_forward"]


# ---- moe_topk ------------------------------------------------------------------------------------------------------
def _topk_reference(logits, k, score, renormalize, bias, n_group, topk_group, group_top, scaling, need_grad=False):
    """The router as aten ops (the CPU implementation): (weights, ids); ties go to the lower expert id."""
    x = logits.float()
    s = torch.softmax(x, -1) if score == "softmax" else torch.sigmoid(x)
    c = s.detach() + (bias.float() if bias is not None else 0.0)
    tokens, experts = c.shape
    if n_group > 1:
        g = c.view(tokens, n_group, experts // n_group)
        gs = g.max(-1).values if group_top == 1 else g.topk(2, -1).values.sum(-1)
        keep = torch.sort(gs, dim=-1, descending=True, stable=True).indices[:, :topk_group]
        mask = torch.zeros_like(gs, dtype=torch.bool).scatter(1, keep, True)
        c = c.masked_fill(~mask.repeat_interleave(experts // n_group, -1), float("-inf"))
    ids = torch.sort(c, dim=-1, descending=True, stable=True).indices[:, :k]
    w = s.gather(-1, ids)
    if renormalize:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return w * scaling, ids


@torch.library.register_fake("mytorch::moe_topk")
def _moe_topk_fake(logits, k, score, renormalize, expert_bias, n_group, topk_group, group_top, scaling):
    t = logits.shape[0]
    return logits.new_empty((t, k), dtype=torch.float32), logits.new_empty((t, k), dtype=torch.int64)


@torch.library.register_fake("mytorch::moe_topk_backward")
def _moe_topk_backward_fake(grad_weights, logits, ids, k, score, renormalize, scaling):
    return torch.empty_like(logits, memory_format=torch.contiguous_format)


@torch.library.impl("mytorch::moe_topk", "cpu")
def _moe_topk_cpu(logits, k, score, renormalize, expert_bias, n_group, topk_group, group_top, scaling):
    w, ids = _topk_reference(logits, k, score, renormalize, expert_bias, n_group, topk_group, group_top, scaling)
    return w.contiguous(), ids.contiguous()


@torch.library.impl("mytorch::moe_topk_backward", "cpu")
def _moe_topk_backward_cpu(grad_weights, logits, ids, k, score, renormalize, scaling):
    with torch.enable_grad():
        x = logits.detach().float().requires_grad_()
        s = torch.softmax(x, -1) if score == "softmax" else torch.sigmoid(x)
        w = s.gather(-1, ids)
        if renormalize:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        (dx,) = torch.autograd.grad(w * scaling, x, grad_weights.float())
    return dx.to(logits.dtype)


def _topk_setup(ctx, inputs, output):
    logits, k, score, renormalize, _, _, _, _, scaling = inputs
    ctx.args = (k, score, renormalize, scaling)
    ctx.save_for_backward(logits, output[1])


def _topk_backward(ctx, grad_weights, _grad_ids):
    logits, ids = ctx.saved_tensors
    dx = torch.ops.mytorch.moe_topk_backward(grad_weights.contiguous(), logits, ids, *ctx.args)
    return dx, None, None, None, None, None, None, None, None


torch.library.register_autograd("mytorch::moe_topk", _topk_backward, setup_context=_topk_setup)


def moe_topk(
    logits: torch.Tensor,
    k: int,
    score: str = "softmax",
    renormalize: bool = True,
    expert_bias: torch.Tensor | None = None,
    n_group: int | None = None,
    topk_group: int | None = None,
    scaling: float = 1.0,
    group_score: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [tokens, k] float32, ids [tokens, k] int64) for router logits [..., experts] (Note [Fused MoE
    routing]). group_score: "max" (DeepSeek-V2) or "top2" (the sum of a group's two best, DeepSeek-V3; the default
    for sigmoid scores)."""
    if score not in ("softmax", "sigmoid"):
        raise ValueError(f"moe_topk: expected score 'softmax' or 'sigmoid', but got {score!r}")
    if group_score not in (None, "max", "top2"):
        raise ValueError(f"moe_topk: expected group_score 'max' or 'top2', but got {group_score!r}")
    group_top = {"max": 1, "top2": 2, None: 2 if score == "sigmoid" else 1}[group_score]
    x = logits.reshape(-1, logits.shape[-1])
    w, ids = torch.ops.mytorch.moe_topk(
        x,
        int(k),
        score,
        bool(renormalize),
        expert_bias,
        int(n_group or 1),
        int(topk_group or n_group or 1),
        group_top,
        float(scaling),
    )
    shape = (*logits.shape[:-1], int(k))
    return w.view(shape), ids.view(shape)


# ---- moe_permute / moe_unpermute -----------------------------------------------------------------------------------
@torch.library.custom_op("mytorch::moe_permute", mutates_args=())
def _moe_permute(
    tokens: torch.Tensor, expert_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows [T * k, H] grouped by expert, offsets [E] int32, pos [T, k]): a stable sort of the pairs by expert.
    Ids outside [0, num_experts) sort past the last offset (transformers' expert-parallel sentinels)."""
    t, k = expert_ids.shape
    flat = expert_ids.reshape(-1).long()
    order = torch.sort(flat, stable=True).indices
    rows = tokens.index_select(0, torch.div(order, k, rounding_mode="floor"))
    inside = (flat >= 0) & (flat < num_experts)
    counts = torch.zeros(num_experts, dtype=torch.long, device=flat.device)
    counts.index_add_(0, flat.clamp(0, num_experts - 1), inside.long())
    offsets = torch.cumsum(counts, 0, dtype=torch.int32)
    pos = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
    return rows, offsets, pos.view(t, k)


@_moe_permute.register_fake
def _moe_permute_fake(tokens, expert_ids, num_experts):
    t, k = expert_ids.shape
    return (
        tokens.new_empty((t * k, tokens.shape[-1])),
        tokens.new_empty(num_experts, dtype=torch.int32),
        expert_ids.new_empty((t, k), dtype=torch.int64),
    )


def _permute_setup(ctx, inputs, output):
    ctx.save_for_backward(output[2])


def _permute_backward(ctx, grad_rows, _grad_offsets, _grad_pos):
    (pos,) = ctx.saved_tensors
    return torch.ops.mytorch.moe_combine(grad_rows.contiguous(), pos, None), None, None


_moe_permute.register_autograd(_permute_backward, setup_context=_permute_setup)


@torch.library.register_fake("mytorch::moe_combine")
def _moe_combine_fake(rows, pos, weights):
    return rows.new_empty((pos.shape[0], rows.shape[-1]))


@torch.library.register_fake("mytorch::moe_combine_backward")
def _moe_combine_backward_fake(grad, rows, pos, weights, rows_grad, weights_grad):
    drows = rows.new_empty(rows.shape if rows_grad else (0,))
    want_dw = weights_grad and weights is not None
    return drows, rows.new_empty(tuple(pos.shape) if want_dw else (0, 0), dtype=torch.float32)


@torch.library.impl("mytorch::moe_combine", "cpu")
def _moe_combine_cpu(rows, pos, weights):
    keep = (pos != -1).unsqueeze(-1)  # -1: a masked slot
    picked = opmath(rows)[pos.clamp(min=0)] * keep  # [T, k, H]
    if weights is not None:
        picked = picked * weights.to(picked.dtype).unsqueeze(-1)
    return picked.sum(1).to(rows.dtype)


@torch.library.impl("mytorch::moe_combine_backward", "cpu")
def _moe_combine_backward_cpu(grad, rows, pos, weights, rows_grad, weights_grad):
    g = opmath(grad)
    keep = pos != -1  # -1: a masked slot
    drows = rows.new_empty(0)
    if rows_grad:
        w = weights.to(g.dtype).unsqueeze(-1) if weights is not None else torch.ones((), dtype=g.dtype)
        drows = torch.zeros_like(rows)
        upd = (w * g.unsqueeze(1)).expand(*pos.shape, rows.shape[-1])
        drows[pos[keep]] = upd[keep].to(rows.dtype)
    dw = rows.new_empty((0, 0), dtype=torch.float32)
    if weights_grad and weights is not None:
        dw = ((g.unsqueeze(1) * opmath(rows)[pos.clamp(min=0)]).sum(-1) * keep).float()
    return drows, dw


def _combine_setup(ctx, inputs, output):
    rows, pos, weights = inputs
    ctx.weights_dtype = weights.dtype if weights is not None else None
    ctx.save_for_backward(rows, pos, weights)


def _combine_backward(ctx, grad):
    rows, pos, weights = ctx.saved_tensors
    want_rows, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[2] and weights is not None
    drows, dw = torch.ops.mytorch.moe_combine_backward(grad.contiguous(), rows, pos, weights, want_rows, want_w)
    return (drows if want_rows else None), None, (dw.to(ctx.weights_dtype) if want_w else None)


torch.library.register_autograd("mytorch::moe_combine", _combine_backward, setup_context=_combine_setup)


def moe_permute(
    tokens: torch.Tensor, expert_ids: torch.Tensor, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """tokens [T, H], expert_ids [T, k] -> (rows [T * k, H] grouped by expert, offsets [E] int32 for
    torch._grouped_mm, pos [T, k] int64: each (token, slot)'s row)."""
    if tokens.dim() != 2 or expert_ids.dim() != 2 or expert_ids.shape[0] != tokens.shape[0]:
        raise ValueError(
            f"moe_permute: expected tokens [T, H] and expert_ids [T, k], but got {tuple(tokens.shape)} and "
            f"{tuple(expert_ids.shape)}"
        )
    if expert_ids.dtype not in (torch.int64, torch.int32) or num_experts < 1:
        raise ValueError(f"moe_permute: expected integer expert ids and num_experts >= 1, got {expert_ids.dtype}")
    return torch.ops.mytorch.moe_permute(tokens, expert_ids, int(num_experts))


def moe_unpermute(rows: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """out[t] = sum_s weights[t, s] * rows[pos[t, s]] (float32 sums, rounded once to rows' dtype); a slot whose
    pos is -1 is masked (adds nothing, zero weight gradient)."""
    return torch.ops.mytorch.moe_combine(rows, pos, weights)


# ---- transformers' experts interface -------------------------------------------------------------------------------
def experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """A transformers experts implementation on the fused ops: moe_permute, the grouped GEMMs (torch._grouped_mm:
    the device's grouped GEMM kernels), SwiGLU on the packed gate_up rows where the module uses the default gate,
    and moe_unpermute. Same signature and result as transformers' grouped_mm_experts_forward."""
    num_experts = self.num_experts
    rows, offsets, pos = moe_permute(hidden_states, top_k_index, num_experts)
    expert_of_row = None
    if self.has_bias:
        steps = torch.arange(rows.shape[0], device=rows.device, dtype=torch.int32)
        expert_of_row = (steps.unsqueeze(1) >= offsets.unsqueeze(0)).sum(1).clamp(max=num_experts - 1)
    out = expert_rows(self, rows, offsets, expert_of_row)
    return moe_unpermute(out, pos, top_k_weights.to(out.dtype)).to(hidden_states.dtype)


def expert_rows(self, rows, offsets, expert_of_row=None):
    """A transformers experts module's math on rows grouped by expert (offsets: torch._grouped_mm's group ends):
    the up (gate_up) grouped GEMM, the gate or activation, the down grouped GEMM, biases (expert_of_row: each row's
    expert, needed with biases) and the post-expert norm. Shared by the single-device and the expert-parallel
    implementations."""
    from transformers.integrations import moe as hf_moe

    weights = self.gate_up_proj if self.has_gate else self.up_proj
    bias = None
    if self.has_bias:
        bias = (self.gate_up_proj_bias if self.has_gate else self.up_proj_bias)[expert_of_row]
    out = hf_moe._grouped_linear(rows, weights, offsets, bias=bias, is_transposed=self.is_transposed)
    if self.has_gate:
        default_gate = type(self)._apply_gate is hf_moe._default_apply_gate
        act = getattr(self, "act_fn", None)
        if default_gate and self.is_concatenated and isinstance(act, torch.nn.SiLU):
            from .glu import swiglu

            out = swiglu(out)
        else:
            out = self._apply_gate(out)
    else:
        out = self.act_fn(out)
    bias = self.down_proj_bias[expert_of_row] if self.has_bias else None
    out = hf_moe._grouped_linear(out, self.down_proj, offsets, bias=bias, is_transposed=self.is_transposed)
    if getattr(self, "has_post_expert_norm", False):
        out = self.post_expert_norm(out)
    return out


def register_experts() -> bool:
    """Registers experts_forward as "mytorch" in transformers' ExpertsInterface; False where it has none."""
    try:
        from transformers.integrations.moe import ExpertsInterface
    except ImportError:
        return False
    ExpertsInterface.register("mytorch", experts_forward)
    return True


# once transformers' MoE integration has been imported, by whoever imports it: importing mytorch does not import
# transformers (seconds), and importing transformers later still finds "mytorch"
if importlib.util.find_spec("transformers") is not None:
    after_import("transformers.integrations.moe", lambda m: m.ExpertsInterface.register("mytorch", experts_forward))
