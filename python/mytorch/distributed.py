"""torch.distributed for the mytorch device: the ``mytorch`` c10d backend (csrc/distributed).

``import mytorch`` registers it, so ``dist.init_process_group("mytorch")`` (or
``"cpu:gloo,mytorch:mytorch"``, or no backend at all for mytorch tensors) routes collectives on mytorch
tensors to ``ProcessGroupMytorch``: NCCL on the cuda runtime, Gloo over views of the same memory on sim.
See docs/distributed.md.
"""

from __future__ import annotations

import torch

BACKEND_NAME = "mytorch"
_registered = False


def _create_backend(opts, pg_options=None):
    """The creator torch.distributed calls (extended API): one ProcessGroupMytorch per process group."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo

    from . import _C

    store = opts.store
    rank, size, timeout = opts.group_rank, opts.group_size, opts.timeout
    # The Gloo backend over the same ranks: the sim data path, and on both runtimes the channel of the
    # cross-rank agreement checks. Its own key space keeps its rendezvous apart from ours.
    host = ProcessGroupGloo(PrefixStore("mytorch_host/", store), rank, size, timeout)
    if hasattr(host, "_set_sequence_number_for_group"):
        host._set_sequence_number_for_group()
    name = opts.group_id or "default_pg"
    del dist
    return _C._distributed.ProcessGroupMytorch(store, rank, size, timeout, host, name)


def is_available() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_gloo_available()


def _register() -> None:
    global _registered
    if _registered or not is_available():
        return
    import torch.distributed as dist

    from . import _C

    _C._init_distributed()
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=[BACKEND_NAME])
    _registered = True


def nccl_version() -> int:
    """NCCL's version code when the cuda runtime can load it, else 0."""
    from . import _C

    return _C._distributed.nccl_version() if hasattr(_C, "_distributed") else 0


__all__ = ["BACKEND_NAME", "is_available", "nccl_version"]

del torch
