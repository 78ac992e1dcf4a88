"""torch.multiprocessing with mytorch tensors: a tensor put on a multiprocessing queue (or passed to a spawned
process) reaches the other process as a view of the same device memory, as CUDA tensors do through CUDA IPC
(Note [Sharing mytorch tensors between processes] in csrc/python/Ipc.cpp).

torch.multiprocessing registers one reducer per tensor class with multiprocessing's ForkingPickler; mytorch
wraps the reducers of every class that torch registered, so that a mytorch tensor takes mytorch's path and
every other tensor takes torch's own, unchanged. The same holds for storages: a mytorch storage pickled on
its own is refused with torch's message for CUDA storages, instead of failing inside the CPU sharing code.
"""

from __future__ import annotations

import torch
from torch.multiprocessing import reductions as _reductions
from multiprocessing.reduction import ForkingPickler

from .. import _C

_DEVICE = "mytorch"


def _rebuild_mytorch_tensor(
    cls, size, stride, storage_offset, dtype, device, handle, offset, nbytes, pid, fd, inode, slot, requires_grad
):
    raw = _C._ipc_open(handle, device, offset, nbytes, pid, fd, inode, slot)
    t = torch.empty((0,), dtype=dtype, device=torch.device(_DEVICE, device))
    t.set_(raw.untyped_storage(), storage_offset, size, stride)
    if cls is torch.nn.Parameter:
        # as torch's rebuild_cuda_tensor: a Parameter is rebuilt as one, with its requires_grad
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _rebuild_empty(cls, size, stride, dtype, device, requires_grad):
    t = torch.empty_strided(size, stride, dtype=dtype, device=torch.device(_DEVICE, device))
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _reduce_mytorch_tensor(tensor: torch.Tensor):
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(  # torch's own check, which its reducer makes first
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
            "crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue)."
        )
    cls = torch.nn.Parameter if isinstance(tensor, torch.nn.Parameter) else type(tensor)
    device = tensor.device.index
    if tensor.untyped_storage().nbytes() == 0:
        return (_rebuild_empty, (cls, tensor.size(), tensor.stride(), tensor.dtype, device, tensor.requires_grad))
    handle, offset, pid, fd, inode, slot = _C._ipc_share(tensor)
    return (
        _rebuild_mytorch_tensor,
        (
            cls,
            tensor.size(),
            tensor.stride(),
            tensor.storage_offset(),
            tensor.dtype,
            device,
            handle,
            offset,
            tensor.untyped_storage().nbytes(),
            pid,
            fd,
            inode,
            slot,
            tensor.requires_grad,
        ),
    )


def _wrap(torch_reducer, mytorch_reducer):
    def reduce(obj):
        if obj.device.type == _DEVICE:
            return mytorch_reducer(obj)
        return torch_reducer(obj)

    reduce.__wrapped__ = torch_reducer
    return reduce


def _refuse_storage(storage):
    raise RuntimeError("Cannot pickle mytorch storage; try pickling a mytorch tensor instead")


def register() -> None:
    """Routes mytorch tensors and storages in torch.multiprocessing's reducers (idempotent)."""
    reducers = ForkingPickler._extra_reducers
    for cls, fn in list(reducers.items()):
        if getattr(fn, "__wrapped__", None) is not None:
            continue
        if fn is _reductions.reduce_tensor:
            ForkingPickler.register(cls, _wrap(fn, _reduce_mytorch_tensor))
        elif fn is _reductions.reduce_storage:
            ForkingPickler.register(cls, _wrap(fn, _refuse_storage))


def ipc_collect() -> int:
    """Releases the device memory of tensors sent to other processes that every receiver has freed, as
    torch.cuda.ipc_collect(); returns how many sent tensors are still held by a receiver."""
    return _C._ipc_collect()
