"""torch.nn.attention.flex_attention on mytorch tensors (issue 54; docs/torchtitan.md).

torch 2.13's flex_attention checks its inputs' device against a fixed set (`_validate_device`: cuda, cpu, xpu, hpu,
mps) before anything else, so a mytorch tensor is refused although the eager implementation (the higher-order op's
dense path, score and mask modifications applied by vmap) runs on any device's operators. The adaptation wraps that
one function when torch.nn.attention.flex_attention is imported (mytorch/_after_import.py), never by importing
mytorch: a mytorch query passes, forward and backward (as CUDA's); every other device gets torch's check unchanged.
Written against torch 2.13: another version is left alone with a warning, and test_flex_attention fails on it (the
loud failure a version bump needs, as the other adaptations').

Note [Compiled flex attention on the sim's C++ path]
Inductor lowers the flex_attention higher-order ops to Triton templates on every device but the CPU and MPS, and its
CPU template (the C++ path's only one) is inference-only (no logsumexp, no backward). So on the sim's default C++
path a torch.compile-d flex_attention failed at lowering ("0 active drivers"), which is what TorchTitan's flex
attention does (it compiles flex_attention with max-autotune). `adapt_compile` wraps torch._inductor.compile_fx's
entry: a graph that holds a flex_attention or flex_attention_backward op on mytorch tensors, when Inductor's path
for mytorch is C++, is not handed to Inductor but returned to Dynamo to run as captured, which is exactly what eager
flex_attention does (torch 2.13 runs it through torch.compile(backend="eager")): torch's dense flex math on mytorch's
kernels, forward and backward, and the flex op's autograd. Every other graph, and every graph on the Triton path
(where the templates compile), is Inductor's as before. The cost: the whole captured graph runs eagerly, so a model
compiled around flex attention is not fused on the C++ path (TorchTitan compiles flex_attention alone).
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


_FLEX_OPS = ("flex_attention", "flex_attention_backward")


def _holds_flex_on_mytorch(gm, example_inputs) -> bool:
    if not any(isinstance(t, torch.Tensor) and t.device.type == "mytorch" for t in example_inputs):
        return False
    for module in gm.modules() if hasattr(gm, "modules") else ():
        graph = getattr(module, "graph", None)
        for node in graph.nodes if graph is not None else ():
            if node.op == "call_function" and getattr(node.target, "__name__", None) in _FLEX_OPS:
                return True
    return False


def adapt_compile(module) -> bool:
    """Note [Compiled flex attention on the sim's C++ path]: wraps module.compile_fx (torch._inductor.compile_fx);
    True when applied (idempotent; torch 2.13 only, as adapt)."""
    if not torch.__version__.startswith(TESTED):
        return False
    original = module.compile_fx
    if getattr(original, "_mytorch", False):
        return True

    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if _holds_flex_on_mytorch(model_, example_inputs_):
            from mytorch.backend import inductor

            if inductor.path()[0] == "cpp":
                return model_
        return original(model_, example_inputs_, *args, **kwargs)

    compile_fx._mytorch = True
    compile_fx.__wrapped__ = original
    module.compile_fx = compile_fx
    return True
