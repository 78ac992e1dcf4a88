"""The final projection and the cross-entropy fused, never materialising the logits.

    loss = mytorch.ops.linear_cross_entropy(hidden, lm_head.weight, labels)          # F.cross_entropy(h @ W.T, y)
    loss, z = mytorch.ops.linear_cross_entropy(h, W, y, softcap=30.0, z_loss=1e-4, return_z_loss=True)

Note [Fused linear cross-entropy]
The logits of a language model's head are rows x vocabulary values (a 128k vocabulary makes them the largest
tensor of a step), and aten keeps them, their log-softmax and their gradient. Here the rows are cut into chunks
whose logits are about the size of the weight or of the hidden states, whichever is larger (Liger Kernel sizes
them by the hidden states alone; each chunk then rewrites the whole float32 weight gradient, which on the sim
runtime made the op 2x slower than the unfused one): for each chunk one GEMM gives its logits,
one kernel (torch.ops.mytorch.cross_entropy_rows_: cuda/llm.cu, sim/llm.cpp) turns them into the rows' losses
and, in place, dL/dlogits, and two GEMMs give that chunk's dL/dhidden and add its share of dL/dweight (and a
column sum dL/dbias). With a scalar loss (reduction "mean" or "sum") the gradients are made in the forward and
kept, so the backward only scales them by the incoming gradient: 3 GEMMs per chunk as the unfused op, and no
[rows, vocab] tensor outlives its chunk. With reduction "none" the backward repeats the chunks with the rows'
incoming gradients (4 GEMMs per chunk). The weight's gradient accumulates in float32 over the chunks. "mean"
divides by the number of rows whose target is not ignore_index, read on the device (no synchronisation). Options
as F.cross_entropy (ignore_index, label_smoothing, reduction), plus Gemma-2's final-logit softcap
(cap * tanh(logits / cap)) and PaLM's z-loss (z_loss * logsumexp^2 per row).
"""

from __future__ import annotations

import math

import torch

__all__ = ["linear_cross_entropy"]

_REDUCTIONS = ("mean", "sum", "none")


def chunk_rows(rows: int, vocab: int, hidden: int) -> int:
    """Rows per chunk: a power of two whose logits are about the size of the weight (vocab x hidden) or of the
    hidden states, whichever is larger. Each chunk adds its share to the whole weight gradient (a pass over
    vocab x hidden floats), so chunks much smaller than the weight make that pass the op's cost."""
    per = max(hidden, math.ceil(rows * hidden / max(1, vocab)), 1)
    return min(1 << (per - 1).bit_length(), 1 << (max(rows, 1) - 1).bit_length())


def _acc(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _ce_rows_reference(logits, target, divisor, row_scale, ignore_index, label_smoothing, softcap, z_loss, grad_scale):
    """The kernel's math as aten ops (the CPU implementation): (loss, lse, dlogits)."""
    acc = _acc(logits)
    x = logits.to(acc)
    c = softcap * torch.tanh(x / softcap) if softcap > 0 else x
    lse = torch.logsumexp(c, dim=-1)
    ignored = target == ignore_index
    t = torch.where(ignored, torch.zeros_like(target), target)
    bad = (t < 0) | (t >= c.shape[-1])
    if bool(bad.any()):
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    ct = c.gather(-1, t.unsqueeze(-1)).squeeze(-1)
    eps = label_smoothing
    loss = (1 - eps) * (lse - ct) + eps * (lse - c.mean(-1)) + z_loss * lse * lse
    loss = torch.where(ignored, torch.zeros_like(loss), loss)
    p = torch.exp(c - lse.unsqueeze(-1))
    g = p * (1 + 2 * z_loss * lse.unsqueeze(-1)) - eps / c.shape[-1]
    g = g - (1 - eps) * torch.nn.functional.one_hot(t, c.shape[-1]).to(acc)
    if softcap > 0:
        g = g * (1 - (c / softcap) ** 2)
    scale = torch.full_like(lse, grad_scale)
    if divisor is not None:
        scale = scale / divisor.to(acc)
    if row_scale is not None:
        scale = scale * row_scale.to(acc)
    g = torch.where(ignored.unsqueeze(-1), torch.zeros_like(g), g * scale.unsqueeze(-1))
    return loss.float(), lse.float(), g


@torch.library.register_fake("mytorch::cross_entropy_rows_")
def _ce_rows_fake(logits, target, divisor, row_scale, ignore_index, label_smoothing, softcap, z_loss, grad_scale, grad):
    rows = logits.shape[0]
    return logits.new_empty(rows, dtype=torch.float32), logits.new_empty(rows, dtype=torch.float32)


@torch.library.impl("mytorch::cross_entropy_rows_", "cpu")
def _ce_rows_cpu(logits, target, divisor, row_scale, ignore_index, label_smoothing, softcap, z_loss, grad_scale, grad):
    loss, lse, g = _ce_rows_reference(
        logits, target, divisor, row_scale, ignore_index, label_smoothing, softcap, z_loss, grad_scale
    )
    if grad:
        logits.copy_(g)
    return loss, lse


def _chunks(h, w, target, bias, opts, divisor, row_scale, grad, want_dh, want_dw):
    """The chunk loop of Note [Fused linear cross-entropy]: (loss rows, lse rows, dh, dw, db)."""
    ignore_index, label_smoothing, softcap, z_loss = opts
    rows, hidden = h.shape
    vocab = w.shape[0]
    loss = h.new_empty(rows, dtype=torch.float32)
    lse = h.new_empty(rows, dtype=torch.float32)
    dh = torch.empty_like(h) if grad and want_dh else None
    dw = torch.zeros(w.shape, dtype=_acc(w), device=w.device) if grad and want_dw else None
    db = torch.zeros(vocab, dtype=_acc(w), device=w.device) if grad and bias is not None and want_dw else None
    step = chunk_rows(rows, vocab, hidden)
    for s in range(0, rows, step):
        e = min(rows, s + step)
        hc = h[s:e]
        logits = torch.addmm(bias, hc, w.t()) if bias is not None else torch.mm(hc, w.t())
        rs = row_scale[s:e] if row_scale is not None else None
        lc, sc = torch.ops.mytorch.cross_entropy_rows_(
            logits, target[s:e], divisor, rs, ignore_index, label_smoothing, softcap, z_loss, 1.0, grad
        )
        loss[s:e] = lc
        lse[s:e] = sc
        if not grad:
            continue
        if dh is not None:
            torch.mm(logits, w, out=dh[s:e])
        if dw is not None:
            if logits.dtype == dw.dtype:
                dw.addmm_(logits.t(), hc)
            else:
                dw.addmm_(logits.t().to(dw.dtype), hc.to(dw.dtype))
        if db is not None:
            db += logits.sum(0, dtype=db.dtype)
    return loss, lse, dh, dw, db


def _flat(hidden, target):
    return hidden.reshape(-1, hidden.shape[-1]), target.reshape(-1)


@torch.library.custom_op("mytorch::linear_cross_entropy", mutates_args=())
def _linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None,
    ignore_index: int,
    label_smoothing: float,
    reduction: str,
    softcap: float,
    z_loss: float,
    grads: list[bool],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, z-loss term, dh, dw, db); the gradients (for a unit incoming gradient) when grads asks, else empty."""
    h, t = _flat(hidden, target)
    t = t.long()
    want_dh, want_dw = grads
    grad = reduction != "none" and (want_dh or want_dw)
    divisor = (t != ignore_index).sum().float().reshape(1) if reduction == "mean" else None
    opts = (ignore_index, label_smoothing, softcap, z_loss)
    loss_rows, lse, dh, dw, db = _chunks(h, weight, t, bias, opts, divisor, None, grad, want_dh, want_dw)
    z_rows = torch.where(t != ignore_index, z_loss * lse * lse, torch.zeros_like(lse))
    if reduction == "mean":
        loss, z = loss_rows.sum() / divisor[0], z_rows.sum() / divisor[0]
    elif reduction == "sum":
        loss, z = loss_rows.sum(), z_rows.sum()
    else:
        loss, z = loss_rows.reshape(target.shape), z_rows.reshape(target.shape)
    dh = dh.reshape(hidden.shape) if dh is not None else hidden.new_empty(0)  # (outputs may not alias each other)
    return (
        loss.to(_acc(hidden)),
        z.to(_acc(hidden)),
        dh,
        dw if dw is not None else hidden.new_empty(0),
        db if db is not None else hidden.new_empty(0),
    )


@_linear_cross_entropy.register_fake
def _linear_cross_entropy_fake(
    hidden, weight, target, bias, ignore_index, label_smoothing, reduction, softcap, z_loss, grads
):
    shape = () if reduction != "none" else target.shape
    grad = reduction != "none"
    dh = hidden.new_empty(hidden.shape) if grad and grads[0] else hidden.new_empty(0)
    dw = weight.new_empty(weight.shape, dtype=_acc(weight)) if grad and grads[1] else hidden.new_empty(0)
    db = weight.new_empty(weight.shape[0], dtype=_acc(weight)) if grad and grads[1] and bias is not None else None
    db = db if db is not None else hidden.new_empty(0)
    return hidden.new_empty(shape, dtype=_acc(hidden)), hidden.new_empty(shape, dtype=_acc(hidden)), dh, dw, db


@torch.library.custom_op("mytorch::linear_cross_entropy_backward", mutates_args=())
def _linear_cross_entropy_backward(
    grad_rows: torch.Tensor,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None,
    ignore_index: int,
    label_smoothing: float,
    softcap: float,
    z_loss: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """reduction "none": the chunks again with the rows' incoming gradients; (dh, dw, db)."""
    h, t = _flat(hidden, target)
    opts = (ignore_index, label_smoothing, softcap, z_loss)
    rs = grad_rows.reshape(-1).float().contiguous()
    _, _, dh, dw, db = _chunks(h, weight, t.long(), bias, opts, None, rs, True, True, True)
    return dh.reshape(hidden.shape), dw, db if db is not None else hidden.new_empty(0)


@_linear_cross_entropy_backward.register_fake
def _lce_backward_fake(grad_rows, hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss):
    db = weight.new_empty(weight.shape[0], dtype=_acc(weight)) if bias is not None else hidden.new_empty(0)
    return hidden.new_empty(hidden.shape), weight.new_empty(weight.shape, dtype=_acc(weight)), db


def _setup(ctx, inputs, output):
    hidden, weight, target, bias, ignore_index, label_smoothing, reduction, softcap, z_loss, grads = inputs
    _, _, dh, dw, db = output
    ctx.reduction = reduction
    ctx.opts = (ignore_index, label_smoothing, softcap, z_loss)
    ctx.has_bias = bias is not None
    ctx.dtypes = (hidden.dtype, weight.dtype, bias.dtype if bias is not None else None)
    if reduction == "none":
        ctx.save_for_backward(hidden, weight, target, bias)
    else:
        ctx.save_for_backward(dh, dw, db)


def _backward(ctx, grad_loss, _grad_z, _gdh, _gdw, _gdb):
    hd, wd, bd = ctx.dtypes
    if ctx.reduction == "none":
        hidden, weight, target, bias = ctx.saved_tensors
        dh, dw, db = torch.ops.mytorch.linear_cross_entropy_backward(grad_loss, hidden, weight, target, bias, *ctx.opts)
        scale = None
    else:
        dh, dw, db = ctx.saved_tensors
        scale = grad_loss.float()
    out = []
    for g, dt, needed in ((dh, hd, ctx.needs_input_grad[0]), (dw, wd, ctx.needs_input_grad[1])):
        out.append(None if not needed or g.numel() == 0 else (g * scale if scale is not None else g).to(dt))
    gb = None
    if ctx.has_bias and ctx.needs_input_grad[3] and db.numel():
        gb = (db * scale if scale is not None else db).to(bd)
    return out[0], out[1], None, gb, None, None, None, None, None, None


_linear_cross_entropy.register_autograd(_backward, setup_context=_setup)


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None = None,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    softcap: float | None = None,
    z_loss: float = 0.0,
    return_z_loss: bool = False,
):
    """F.cross_entropy(hidden @ weight.T + bias, target) without the logits (Note [Fused linear cross-entropy]).
    hidden [..., H], weight [V, H], target [...] (class indices); returns the loss (with z_loss * lse^2 added per
    row when z_loss > 0) in float32 (float64 for float64 inputs), as transformers' loss over logits.float(), and
    with return_z_loss the z-loss term alone as well."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"linear_cross_entropy: expected reduction in {_REDUCTIONS}, but got {reduction!r}")
    if hidden.dim() < 1 or weight.dim() != 2 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear_cross_entropy: expected hidden [..., H] and weight [V, H], but got {tuple(hidden.shape)} and "
            f"{tuple(weight.shape)}"
        )
    if tuple(target.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(
            f"linear_cross_entropy: expected target of shape {tuple(hidden.shape[:-1])}, but got {tuple(target.shape)}"
        )
    if target.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"linear_cross_entropy: expected integer class targets, but got {target.dtype}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"linear_cross_entropy: expected bias [{weight.shape[0]}], but got {tuple(bias.shape)}")
    if hidden.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
        raise TypeError(
            f"linear_cross_entropy: expected hidden, weight and bias of one dtype, but got {hidden.dtype} and "
            f"{weight.dtype}"
        )
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"linear_cross_entropy: expected label_smoothing in [0, 1], but got {label_smoothing}")
    need = torch.is_grad_enabled()
    grads = [
        need and hidden.requires_grad,
        need and (weight.requires_grad or (bias is not None and bias.requires_grad)),
    ]
    loss, z, *_ = torch.ops.mytorch.linear_cross_entropy(
        hidden,
        weight,
        target,
        bias,
        ignore_index,
        float(label_smoothing),
        reduction,
        float(softcap or 0.0),
        float(z_loss),
        grads,
    )
    return (loss, z) if return_z_loss else loss


def _adopt_cpu_chunking_defaults(m) -> None:
    """PyTorch's chunked F.linear_cross_entropy (options=LinearCrossEntropyOptions()) picks its accumulation per
    device type (torch/nn/modules/linear_cross_entropy_options.py: _AUTO_DEFAULTS, _resolve_auto_acc_dtype):
    float32 on the CPU and on CUDA, the input's own dtype on any device it does not list. mytorch runs the non-CUDA
    code path (explicit casts around same-dtype GEMMs, as the CPU does), so it takes the CPU's picks; without them
    a float16 or bfloat16 loss and its gradients were accumulated in half precision on mytorch, up to ten times
    the CPU's error (the alignment's linear_cross_entropy.chunked cases). If a later PyTorch renames these
    tables, nothing is changed."""
    table, options = getattr(m, "_AUTO_DEFAULTS", None), getattr(m, "LinearCrossEntropyOptions", None)
    resolve = getattr(options, "_resolve_auto_acc_dtype", None)
    if not isinstance(table, dict) or resolve is None:
        return
    halves = (torch.float16, torch.bfloat16)
    for dtype in halves:
        if ("cpu", dtype) in table:
            table.setdefault(("mytorch", dtype), table[("cpu", dtype)])

    def resolve_auto_acc_dtype(dtype, device):
        if device is not None and device.type == "mytorch" and dtype in halves:
            return torch.float32
        return resolve(dtype, device)

    options._resolve_auto_acc_dtype = staticmethod(resolve_auto_acc_dtype)


from .._after_import import after_import  # noqa: E402

after_import("torch.nn.modules.linear_cross_entropy_options", _adopt_cpu_chunking_defaults)
