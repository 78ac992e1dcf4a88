"""mytorch: an out-of-tree PyTorch device.

``import mytorch`` registers the ``mytorch`` device with stock PyTorch through the PrivateUse1 key, so
``tensor.to("mytorch")``, ``model.to("mytorch")``, autograd, ``torch.nn`` and ``torch.optim`` run on it. The
device API lives at ``torch.mytorch`` (also ``mytorch.backend``), named like ``torch.cuda``'s.
"""
import os

import torch

from . import _C  # noqa: F401  (loads the native extension: allocator, guard, hooks, op tables)

_BACKEND = "mytorch"


def _register():
    if torch._C._get_privateuse1_backend_name() != _BACKEND:
        torch.utils.rename_privateuse1_backend(_BACKEND)
    from . import backend

    if not hasattr(torch, _BACKEND):
        torch._register_device_module(_BACKEND, backend)
    if not hasattr(torch.Tensor, "is_mytorch"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    _C._set_fallback_mode(os.environ.get("MYTORCH_FALLBACK", "warn") or "warn")


_register()

from . import backend  # noqa: E402
from .audit import audit  # noqa: E402
from . import ops  # noqa: E402,F401  (mytorch.ops: fused custom ops)
from . import distributed  # noqa: E402  (the "mytorch" c10d backend)

distributed._register()

__all__ = ["audit", "backend"]
__version__ = "0.1.0"
