"""The opmath reference: PyTorch's CUDA numerics for float16/bfloat16, emulated on the CPU.

Note [Opmath reference]
A float16/bfloat16 operator in PyTorch's CUDA kernels computes in float32 (its `opmath_type`) and rounds its result
to the tensor's dtype once; several of PyTorch's CPU kernels keep half-precision intermediates instead (pow's
exponent, log_softmax's sums, products of bfloat16s). A composite that ATen runs as a chain of half-precision
operators (an autograd formula such as dist's or vector_norm's backward, cross_entropy with probability targets,
linear_cross_entropy's chunks) therefore ends with different roundings on the two backends, and on a small output
(a 0-d loss, a 2-element gradient) the CPU's error is one draw of that luck. Note [Alignment tolerance] bounds
mytorch by twice PyTorch's own error, so the alignment counts both of PyTorch's numerics: on a GPU machine stock
torch.cuda itself, and on machines without one this emulation of it: every operator that returns no view runs on
float32 copies of its float16/bfloat16 operands (complex32 on complex64 ones) and its floating outputs are rounded
once to the dtype the operator returns for the original operands (found on the meta device); an in-place or out=
operator computes on the copies and writes its result back, rounded once, into the caller's tensors. Views, random
draws, conversions, metadata mutations (resize_, set_, ...) and operators without a meta kernel run unchanged.

It is a model of torch.cuda's numerics, not a copy: reductions sum in the CPU's order and transcendental functions
are the CPU's float32 ones, each within an ulp of float32, far below a half-precision rounding.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils._python_dispatch import TorchDispatchMode

_UP = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.complex32: torch.complex64}
OPMATH_DTYPES = frozenset(_UP)
_UNCHANGED = {
    torch.ops.aten._to_copy.default,
    torch.ops.aten.clone.default,
    torch.ops.aten.detach.default,
    torch.ops.aten.lift_fresh.default,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.zeros_like.default,
    torch.ops.aten.ones_like.default,
    torch.ops.aten.full_like.default,
}


def _passthrough(func) -> bool:
    """Operators that run unchanged: conversions and factories, views, random draws, and mutations of anything
    but values (resize_, set_, in-place views)."""
    schema = func._schema
    if func in _UNCHANGED or torch.Tag.nondeterministic_seeded in func.tags:
        return True
    if schema.is_mutable:
        return func.__name__.split(".")[0] in _METADATA_MUTATIONS
    return any(r.alias_info is not None for r in schema.returns)


_METADATA_MUTATIONS = {
    "resize_",
    "resize_as_",
    "set_",
    "as_strided_",
    "squeeze_",
    "unsqueeze_",
    "transpose_",
    "t_",
    "swapdims_",
    "swapaxes_",
    "detach_",
    "requires_grad_",
    "copy_",
    "fill_",
    "zero_",
    "_resize_output_",
}


def _written(func, args, kwargs):
    """The arguments an in-place or out= operator writes, and which of them each return aliases."""
    schema = func._schema
    values, sets = [], []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            v = args[i] if i < len(args) else kwargs.get(a.name)
            if isinstance(v, torch.Tensor):
                values.append(v)
                sets.append(a.alias_info.before_set)
    returns = []
    for r in schema.returns:
        if r.alias_info is None or r.alias_info.before_set not in sets:
            return values, None
        returns.append(values[sets.index(r.alias_info.before_set)])
    return values, returns


def _meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


def _upcast(x):
    """A float16/bfloat16 (complex32) operand, or a dtype argument naming one (`_log_softmax_backward_data`'s
    input_dtype, a reduction's dtype=), at its opmath type."""
    if isinstance(x, torch.Tensor) and x.dtype in _UP:
        return x.to(_UP[x.dtype])
    if isinstance(x, torch.dtype) and x in _UP:
        return _UP[x]
    return x


class OpmathMode(TorchDispatchMode):
    """Runs CPU operators as torch.cuda computes float16/bfloat16: in float32, rounded once per operator."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = tree_flatten((args, kwargs))[0]
        low = any(isinstance(t, torch.Tensor) and t.dtype in _UP for t in leaves)
        if not low or _passthrough(func) or any(isinstance(t, torch.Tensor) and t.is_meta for t in leaves):
            return func(*args, **kwargs)
        if func._schema.is_mutable:  # in place or out=: computed on float32 copies, written back rounded once
            targets, returns = _written(func, args, kwargs)
            if returns is None or any(not isinstance(t, torch.Tensor) for t in targets):
                return func(*args, **kwargs)
            up_args, up_kwargs = tree_map(_upcast, (args, kwargs))
            up_targets, _ = _written(func, up_args, up_kwargs)
            func(*up_args, **up_kwargs)
            for t, u in zip(targets, up_targets):
                if t is not u:
                    if t.shape != u.shape:
                        t.resize_(u.shape)
                    t.copy_(u)
            return returns[0] if len(returns) == 1 else tuple(returns)
        try:
            want = func(*tree_map(_meta, args), **tree_map(_meta, kwargs))
        except Exception:  # no meta kernel (data-dependent shapes): the operator as it is
            return func(*args, **kwargs)
        up_args, up_kwargs = tree_map(_upcast, (args, kwargs))
        out = func(*up_args, **up_kwargs)
        want_leaves, _ = tree_flatten(want)
        out_leaves, spec = tree_flatten(out)
        if len(want_leaves) != len(out_leaves):
            return func(*args, **kwargs)
        rounded = [
            o.to(w.dtype) if isinstance(o, torch.Tensor) and isinstance(w, torch.Tensor) and o.dtype != w.dtype else o
            for o, w in zip(out_leaves, want_leaves)
        ]
        return tree_unflatten(rounded, spec)
