"""mytorch: an out-of-tree PyTorch device.

``import mytorch`` registers the ``mytorch`` device with stock PyTorch through the PrivateUse1 key, so
``tensor.to("mytorch")``, ``model.to("mytorch")``, autograd, ``torch.nn`` and ``torch.optim`` run on it. The
device API lives at ``torch.mytorch`` (also ``mytorch.backend``), named like ``torch.cuda``'s.
"""

import atexit
import importlib.util
import os
import sys

import torch


def _load_extension_from(path: str) -> None:
    """MYTORCH_EXTENSION=/path/to/_C.so loads another build of the extension (the emulated CUDA build that
    scripts/emu.sh makes) in place of the installed one."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{__name__}._C", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"MYTORCH_EXTENSION={path!r} is not a loadable extension module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


if os.environ.get("MYTORCH_EXTENSION"):
    _load_extension_from(os.environ["MYTORCH_EXTENSION"])

try:
    from . import _C  # noqa: F401  (loads the native extension: allocator, guard, hooks, op tables)
except ImportError as _exc:
    # The usual causes: a fresh clone not built yet, or a torch / Python changed since the build (the extension
    # is compiled against one torch). docs/troubleshooting.md has the others.
    _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    raise ImportError(
        f"mytorch's native extension could not be loaded ({_exc}). It must be built for this Python "
        f"({sys.executable}) and this torch ({torch.__version__}): run `bash scripts/setup.sh` in {_root} "
        f"(PYTHON=/path/to/python for another interpreter). See docs/troubleshooting.md."
    ) from _exc

_BACKEND = "mytorch"


def _register():
    if torch._C._get_privateuse1_backend_name() != _BACKEND:
        torch.utils.rename_privateuse1_backend(_BACKEND)
    # torch.accelerator.Graph's implementation, under the renamed device's name (absent before torch 2.12: the lent
    # GPU machines' torch 2.11 builds the cuda flavour without graphs, docs/gpu.md)
    _C._register_graph_impl()
    from . import backend

    if not hasattr(torch, _BACKEND):
        torch._register_device_module(_BACKEND, backend)
    if not hasattr(torch.Tensor, "is_mytorch"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    _C._set_fallback_mode(os.environ.get("MYTORCH_FALLBACK", "warn") or "warn")


_register()

# Note [Backward on the calling thread]
# torch's autograd engine hands the backward of a non-CPU device to that device's worker thread and wakes the
# caller when it is done: two thread wake-ups per backward, which a GPU hides behind its queued kernels. The sim
# runtime runs its kernels at submission on the CPU, as torch's CPU backend does, and the CPU's backward runs on
# the calling thread: handed off, a 4x6x6 multiply's backward took 73 us a step against the CPU's 15 (about half
# of it in the kernel's wake-up and context-switch paths), and 18 us on the calling thread. So where no GPU
# runtime is built in, the importing thread runs its backwards itself (torch.autograd.set_multithreading_enabled,
# thread-local: other threads keep the device threads unless they call it too; calling it with True restores
# them). Streams are unchanged: the engine guards each node onto its forward's stream on whatever thread runs it.
if not _C._built_with_cuda():
    torch.autograd.set_multithreading_enabled(False)

from . import backend  # noqa: E402
from . import _after_import  # noqa: E402
from .backend import inductor as _inductor  # noqa: E402  (imports neither Inductor nor Dynamo)
from .audit import audit  # noqa: E402
from . import ops  # noqa: E402,F401  (mytorch.ops: fused custom ops)
from ._optimize import optimize  # noqa: E402,F401  (mytorch.optimize: the fused ops put into a model)
from . import distributed  # noqa: E402  (the "mytorch" c10d backend)

distributed._register()
# Dynamo's device interface answers for mytorch as soon as Dynamo is imported, before any compile
_after_import.after_import("torch._dynamo.device_interface", _inductor.register_interface)
# torch.distributed._symmetric_memory's compositions run on mytorch tensors (_symm_mem.py)
from . import _symm_mem  # noqa: E402

_after_import.after_import("torch.distributed._symmetric_memory", _symm_mem.adapt)
# flex_attention accepts mytorch tensors (_flex.py)
from . import _flex  # noqa: E402

_after_import.after_import("torch.nn.attention.flex_attention", _flex.adapt)
_after_import.after_import("torch._inductor.compile_fx", _flex.adapt_compile)
# accelerate (Trainer) picks mytorch when no other accelerator is there (_accelerate.py)
if importlib.util.find_spec("accelerate") is not None:
    from . import _accelerate  # noqa: E402

    _after_import.after_import("accelerate.state", _accelerate.adapt)
    _after_import.after_import("transformers.training_args", _accelerate.adapt_training_args)

__all__ = ["audit", "backend"]
__version__ = "0.1.0"


def _drain_autograd_threads() -> None:
    """Note [Autograd threads at exit] in csrc/python/Module.cpp: without it a script ending right after a
    backward on mytorch may abort at interpreter exit. The process groups' watchdogs likewise."""
    try:
        # Note [Process-group watchdogs at exit] (csrc/distributed/ProcessGroupMytorchNccl.cpp): first, so that
        # no watchdog frees a Python-owned tensor once the interpreter finalizes.
        if hasattr(_C, "_distributed"):
            _C._distributed._quiesce_watchdogs_for_exit()
        _C._drain_autograd_threads()
    except Exception:  # noqa: BLE001 - never let an exit handler turn a clean exit into an error
        pass


atexit.register(_drain_autograd_threads)
