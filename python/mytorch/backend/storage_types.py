"""The legacy typed-storage classes of the device (torch.mytorch.FloatStorage, ...), as torch.cuda has them:
`Tensor.storage_type()` answers them (torch's TypedStorage looks them up on the device module by name)."""

from __future__ import annotations

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _dtype_to_storage_type_map


class _MytorchLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        raise RuntimeError("from_buffer: not available for mytorch storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: not available for mytorch storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: not available for mytorch storage")


def _storage_class(name: str, dtype: torch.dtype) -> type:
    # __module__ "torch.mytorch": torch derives a legacy storage's device from its class's module name
    return type(
        name,
        (_MytorchLegacyStorage,),
        {
            "__module__": "torch.mytorch",
            "__qualname__": name,
            "_dtype": classproperty(lambda cls: dtype),
            "dtype": classproperty(lambda cls: dtype),
        },
    )


_QUANTIZED = (torch.qint8, torch.qint32, torch.quint8, torch.quint4x2, torch.quint2x4)  # out of scope (no kernels)
STORAGE_CLASSES = {
    name: _storage_class(name, dtype) for dtype, name in _dtype_to_storage_type_map().items() if dtype not in _QUANTIZED
}
