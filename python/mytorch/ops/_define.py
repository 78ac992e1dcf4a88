"""One definition per fused op (Note [A fused op, defined once]).

Note [A fused op, defined once]
A mytorch op has one schema, in the one `TORCH_LIBRARY(mytorch, m)` block (csrc/ops/Library.cpp), as aten's ops have
theirs in native_functions.yaml. Everything Python adds to it comes from one definition here:

    @fused_op("clamped_swiglu", setup=_setup, backward=_backward)
    def clamped_swiglu_reference(gate, up, alpha, limit):
        ...                                   # the aten composition, in opmath, rounded once

- the reference is the op's CPU implementation and the reference its tests compare with; its parameters must be
  the schema's, by name and order (checked here, at import: a schema and a reference that drift apart fail
  `import mytorch`, not a test much later), and it is always called with all of them (the schema's defaults
  filled in);
- the fake kernel (torch.compile's shapes) is the reference run on the fake inputs, its results given as contiguous
  empties (the device kernels write contiguous results); an op whose reference cannot run on fake tensors (a
  data-dependent shape) passes `fake=`;
- `setup` / `backward` are torch.library.register_autograd's (omitted: the op has no autograd, as its backward ops);
- the object returned calls `torch.ops.mytorch.<name>` and carries the reference's docstring: the public function
  when the schema's own arguments and defaults are what a user calls (else a short wrapper calls it).

The device kernel is registered in C++: a pointwise row whose glue is `Op` (kernels/include/mytorch/tables/
pointwise.def) is registered from the row (csrc/ops/PointwiseOps.cpp), any other op by its glue in csrc/ops/.
docs/contributing.md, "Adding a fused op", has the recipe.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import torch
from torch.utils._pytree import tree_map

__all__ = ["fused_op", "saved_inputs"]


def _schema(name: str) -> torch.FunctionSchema:
    try:
        return getattr(torch.ops.mytorch, name).default._schema
    except (AttributeError, RuntimeError) as e:
        raise RuntimeError(f"mytorch.ops: mytorch::{name} has no schema (csrc/ops/Library.cpp defines them)") from e


def _check_reference(name: str, reference: Callable) -> None:
    want = [a.name for a in _schema(name).arguments]
    got = list(inspect.signature(reference).parameters)
    if got != want:
        raise TypeError(
            f"mytorch.ops: the reference of mytorch::{name} takes ({', '.join(got)}), but its schema "
            f"(csrc/ops/Library.cpp) has ({', '.join(want)})"
        )


def _signature(name: str) -> inspect.Signature:
    """The schema as a Python signature, defaults included."""
    params = []
    for a in _schema(name).arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = a.default_value if a.has_default_value() else inspect.Parameter.empty
        params.append(inspect.Parameter(a.name, kind, default=default))
    return inspect.Signature(params)


def _complete(name: str, fn: Callable) -> Callable:
    """fn called with every argument of the schema, its defaults filled in: a Python kernel receives the arguments
    as the caller wrote them (torch.ops.mytorch.op(x, y) leaves out the defaulted ones)."""
    sig = _signature(name)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return fn(*bound.args, **bound.kwargs)

    return call


def _fake_from(reference: Callable) -> Callable:
    def fake(*args, **kwargs):
        out = reference(*args, **kwargs)
        return tree_map(lambda t: t.new_empty(t.shape) if isinstance(t, torch.Tensor) else t, out)

    return fake


def _save_inputs(name: str) -> Callable:
    """The default autograd set-up: every input kept (tensors saved, the rest on ctx), for saved_inputs(ctx)."""
    sig = _signature(name)

    def setup(ctx, inputs, output) -> None:
        bound = sig.bind(*inputs)
        bound.apply_defaults()
        values = tuple(bound.arguments.values())
        ctx.save_for_backward(*(x if isinstance(x, torch.Tensor) else None for x in values))
        ctx.scalars = tuple(None if isinstance(x, torch.Tensor) else x for x in values)

    return setup


def saved_inputs(ctx) -> tuple:
    """The op's inputs in schema order, as the default set-up kept them."""
    return tuple(t if s is None else s for t, s in zip(ctx.saved_tensors, ctx.scalars))


class FusedOp:
    """torch.ops.mytorch.<name>, callable, with the reference's docstring; `.reference` is the CPU implementation."""

    def __init__(self, name: str, reference: Callable):
        self.name = name
        self.reference = reference
        self.__doc__ = reference.__doc__
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return getattr(torch.ops.mytorch, self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<mytorch op {_schema(self.name)}>"


def fused_op(
    name: str,
    *,
    setup: Callable | None = None,
    backward: Callable | None = None,
    fake: Callable | None = None,
) -> Callable[[Callable], FusedOp]:
    """Registers the reference of mytorch::<name> as its CPU implementation and (unless `fake` is given) its fake
    kernel, and `backward` (with `setup`, default: every input kept) as its autograd formula."""

    def define(reference: Callable) -> FusedOp:
        _check_reference(name, reference)
        qualname = f"mytorch::{name}"
        torch.library.impl(qualname, "cpu")(_complete(name, reference))
        torch.library.register_fake(qualname)(_complete(name, fake or _fake_from(reference)))
        if backward is not None:
            torch.library.register_autograd(qualname, backward, setup_context=setup or _save_inputs(name))
        return FusedOp(name, reference)

    return define
