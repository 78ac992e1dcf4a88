"""torch.distributed._symmetric_memory on mytorch tensors (issue 51; docs/distributed.md, "Symmetric memory").

The C++ half (csrc/distributed/SymmetricMemory.cpp, SymmMemOps.cpp) registers mytorch's SymmetricMemoryAllocator
and the `symm_mem` operators for PrivateUse1, which is all that `empty`, `rendezvous` and the operators need.
torch 2.13's Python half names CUDA in two ways this module adapts, when torch.distributed._symmetric_memory is
imported (mytorch/_after_import.py), never by importing mytorch:

- `get_symm_mem_workspace` allocates its workspace on `cuda:<current device>`: replaced by the same function on
  the current mytorch device;
- the compositions (fused_all_gather_matmul, fused_matmul_reduce_scatter, the low-contention collectives and the
  helpers they call) take streams and events from `torch.cuda`: each function whose code names `torch.cuda` is
  rebound, in place in the module, to globals where `torch.cuda` answers with torch.mytorch's streams and events,
  and the Python-implemented operators are registered for PrivateUse1 with those functions.

Applied only where torch.cuda is not available (torch's CPU wheel, which mytorch builds against): a process with
CUDA tensors keeps torch's functions as they are. Written against torch 2.13: another version is left alone with
a warning, and test_symm_mem's tests fail on it (the loud failure a version bump needs).
"""

from __future__ import annotations

import types
import warnings

import torch

TESTED = "2.13."

# The Python-implemented symm_mem operators torch registers for CUDA, by the module function implementing them.
_OPERATORS = {
    "fused_all_gather_matmul": "_fused_all_gather_matmul",
    "fused_matmul_reduce_scatter": "_fused_matmul_reduce_scatter",
    "_low_contention_all_gather": "_low_contention_all_gather",
    "_low_contention_reduce_scatter": "_low_contention_reduce_scatter",
    "get_remote_tensors": "_get_remote_tensors_default",
}
# Functions left alone although they name torch.cuda: their CUDA branch is for CUDA devices only.
_KEEP = {"empty", "get_mem_pool", "_should_use_multimem_all_gather_matmul"}

_library = None
_applied = False


class _Streams:
    """What the adapted functions find as `torch.cuda`: torch.mytorch's streams and events."""

    def __getattr__(self, name):
        return getattr(torch.mytorch, name)

    @staticmethod
    def is_current_stream_capturing() -> bool:
        return False

    @staticmethod
    def _sleep(cycles: int) -> None:
        """torch.cuda._sleep spins the GPU to order two streams' work in tests of overlap; nothing to wait for here."""


class _TorchView(types.ModuleType):
    """`torch` as the adapted functions see it: torch itself, but `cuda` is _Streams."""

    def __init__(self):
        super().__init__("torch")
        self.cuda = _Streams()

    def __getattr__(self, name):
        return getattr(torch, name)


def _names_cuda(code: types.CodeType) -> bool:
    if "cuda" in code.co_names:
        return True
    return any(isinstance(c, types.CodeType) and _names_cuda(c) for c in code.co_consts)


def _stores_globals(code: types.CodeType) -> bool:
    import dis

    return any(i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for i in dis.get_instructions(code))


class _Globals(dict):
    """The module's globals, live (reads go to the module, so state the module changes stays shared), with `torch`
    replaced."""

    def __init__(self, module_dict: dict, torch_view):
        super().__init__()
        for key in ("__builtins__", "__name__"):  # read by the interpreter itself, not through __getitem__
            if key in module_dict:
                dict.__setitem__(self, key, module_dict[key])
        self._module = module_dict
        self._torch = torch_view

    def __getitem__(self, key):
        if key == "torch":
            return self._torch
        return self._module[key]

    def __contains__(self, key):
        return key == "torch" or key in self._module


def _rebind(fn, globals_):
    clone = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__dict__.update(fn.__dict__)
    clone.__doc__ = fn.__doc__
    clone.__qualname__ = fn.__qualname__
    clone.__module__ = fn.__module__
    clone.__wrapped_for_mytorch__ = fn
    return clone


def _workspace(module):
    tensors = module._group_name_to_workspace_tensor
    SymmetricMemory = module._SymmetricMemory

    def get_symm_mem_workspace(group_name, min_size):
        tensor = tensors.get(group_name)
        size = tensor.numel() * tensor.element_size() if tensor is not None else 0
        if tensor is None or size < min_size:
            tensor = SymmetricMemory.empty_strided_p2p(
                (max(size, min_size),),
                [1],
                torch.uint8,
                torch.device("mytorch", torch.mytorch.current_device()),
                group_name,
            )
            tensors[group_name] = tensor
        return SymmetricMemory.rendezvous(tensor)

    get_symm_mem_workspace.__doc__ = module.get_symm_mem_workspace.__doc__
    get_symm_mem_workspace._mytorch = True
    return get_symm_mem_workspace


def adapt(module) -> bool:
    """Adapts torch.distributed._symmetric_memory for mytorch tensors; True when applied (idempotent)."""
    global _library, _applied
    if _applied:
        return True
    if not torch.__version__.startswith(TESTED):
        warnings.warn(
            f"mytorch: the symmetric-memory adaptation is written for torch {TESTED}x, not {torch.__version__}; "
            "symm_mem's Python compositions (fused_all_gather_matmul, ...) will not run on mytorch tensors",
            stacklevel=2,
        )
        return False
    if torch.cuda.is_available():
        return False
    view = _TorchView()
    globals_ = _Globals(module.__dict__, view)
    refused = []
    for name, value in list(vars(module).items()):
        if name in _KEEP or getattr(value, "__module__", None) != module.__name__:
            continue
        if isinstance(value, types.FunctionType) and _names_cuda(value.__code__):
            if _stores_globals(value.__code__):
                refused.append(name)
                continue
            setattr(module, name, _rebind(value, globals_))
        elif isinstance(value, type):
            for attr, member in list(vars(value).items()):
                if isinstance(member, types.FunctionType) and _names_cuda(member.__code__):
                    setattr(value, attr, _rebind(member, globals_))
    if refused:
        warnings.warn(
            f"mytorch: cannot adapt {refused} of torch.distributed._symmetric_memory (they rebind globals)",
            stacklevel=2,
        )
    module.get_symm_mem_workspace = _workspace(module)
    _library = torch.library.Library("symm_mem", "IMPL")
    for op, fn in _OPERATORS.items():
        _library.impl(op, getattr(module, fn), "PrivateUse1")
    _applied = True
    return True
