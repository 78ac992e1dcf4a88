"""torch.distributed for the mytorch device: the ``mytorch`` c10d backend (csrc/distributed).

``import mytorch`` registers it, so ``dist.init_process_group("mytorch")`` (or
``"cpu:gloo,mytorch:mytorch"``, or no backend at all for mytorch tensors) routes collectives on mytorch
tensors to ``ProcessGroupMytorch``: NCCL on the cuda runtime, the emulated NCCL on the emulated build, Gloo over
views of the same memory on sim.
See docs/distributed.md.
"""

from __future__ import annotations

import torch

BACKEND_NAME = "mytorch"
_registered = False


def _split_source():
    """The default group's mytorch backend when subgroups split from it (Note [Subgroups by ncclCommSplit]):
    torch.distributed makes the ranks outside a new group call its ``perform_nocolor_split`` exactly then."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if not dist.is_initialized():
        return None
    default = c10d._get_default_group()
    if not default.bound_device_id:
        return None
    source = c10d._get_split_source(default)
    from .. import _C

    return source if isinstance(source, _C._distributed.ProcessGroupMytorch) else None


def _create_backend(opts, pg_options=None):
    """The creator torch.distributed calls (extended API): one ProcessGroupMytorch per process group."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo

    from .. import _C

    store = opts.store
    rank, size, timeout = opts.group_rank, opts.group_size, opts.timeout
    source = _split_source() if opts.global_ranks_in_group else None
    if source is not None:
        # The members' half of the split the other ranks make through perform_nocolor_split.
        ranks = sorted(opts.global_ranks_in_group)
        return source._split_members(store, ranks, timeout, opts.group_id or "split")
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

    from .. import _C

    _C._init_distributed()
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=[BACKEND_NAME])
    _registered = True


def data_path(group=None, nbytes: int | None = None) -> str:
    """The path a collective of ``nbytes`` bytes on ``group`` (default: the default group) takes on this
    runtime: ``"nccl"`` on a GPU and on the emulated build (the emulated NCCL); on sim ``"symmetric-memory"``
    when every rank of the group runs on this host (all_reduce, all_gather_into_tensor, reduce_scatter_tensor
    and all_to_all_single of every size through a shared workspace; MYTORCH_DIST_SYMM_MEM=0 turns it off), else
    ``"gloo"`` (Gloo over views of device memory). Every size takes the same path; ``nbytes`` is checked."""
    import torch
    import torch.distributed as dist

    if nbytes is not None and (not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0):
        raise ValueError(f"mytorch.distributed.data_path: expected nbytes as a non-negative int, but got {nbytes!r}")
    if group is None:
        if not dist.is_initialized():
            raise RuntimeError("mytorch.distributed.data_path: the default process group is not initialized")
        group = dist.distributed_c10d._get_default_group()
    try:
        backend = group._get_backend(torch.device("mytorch"))
    except RuntimeError as e:
        raise ValueError(f"mytorch.distributed.data_path: the group has no mytorch backend ({e})") from None
    if backend.uses_nccl:
        return "nccl"
    return "symmetric-memory" if backend.uses_symmetric_memory else "gloo"


def nccl_version() -> int:
    """NCCL's version code when the cuda runtime can load it, else 0."""
    from .. import _C

    return _C._distributed.nccl_version() if hasattr(_C, "_distributed") else 0


__all__ = ["BACKEND_NAME", "data_path", "is_available", "nccl_version"]

del torch
