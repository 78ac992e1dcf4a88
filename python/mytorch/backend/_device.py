"""Devices, lazy initialisation and the fork rule."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import torch

from .. import _C

_BACKEND = "mytorch"
_init_lock = threading.Lock()


def _is_in_bad_fork() -> bool:
    return _C._in_bad_fork()


def _lazy_init() -> None:
    """Initialise the runtime once; raise clearly in a child forked after the parent initialised it."""
    if _C._is_initialized() and not _C._in_bad_fork():
        return
    with _init_lock:
        if _C._in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize mytorch in forked subprocess: the parent process had already initialised "
                "the device. To use mytorch with multiprocessing, you must use the 'spawn' start method"
            )
        _C._init()


def init() -> None:
    _lazy_init()


def is_initialized() -> bool:
    return _C._is_initialized() and not _C._in_bad_fork()


def runtime() -> str:
    """The live runtime: 'cuda' (a real GPU) or 'sim' (the simulated device on the CPU)."""
    _lazy_init()
    return _C._runtime()


def sim_threads() -> int:
    """Threads the sim runtime's kernels split their loops over: torch.get_num_threads(), capped by the
    MYTORCH_SIM_THREADS environment variable (read at import). Note [Sim parallelism] in parallel.h."""
    return _C._sim_threads()


def is_available() -> bool:
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def _get_device_index(dev: Any, optional: bool = True) -> int:
    if dev is None:
        if not optional:
            raise ValueError("a mytorch device is required, but got None")
        return current_device()
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != _BACKEND:
            raise ValueError(f"expected a mytorch device, but got {dev}")
        return current_device() if dev.index is None else dev.index
    if isinstance(dev, int):
        return current_device() if dev < 0 else dev
    raise TypeError(f"expected a mytorch device (torch.device, str or int), but got {type(dev).__name__}")


def _checked_index(dev: Any) -> int:
    idx = _get_device_index(dev)
    n = device_count()
    if not 0 <= idx < n:
        raise ValueError(f"mytorch device index must be in [0, {n}), but got {idx}")
    return idx


def current_device() -> int:
    _lazy_init()
    return _C._get_device()


def set_device(dev: Any) -> None:
    idx = _get_device_index(dev)
    _lazy_init()
    _C._set_device(idx)


class device:
    """Context manager that changes the current mytorch device (like torch.cuda.device)."""

    def __init__(self, dev: Any):
        self.idx = -1 if dev is None else _get_device_index(dev)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of a tensor current (CPU tensors leave it unchanged)."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == _BACKEND else None)


def synchronize(dev: Any = None) -> None:
    """Wait for all work queued on every stream of the device."""
    _lazy_init()
    _C._synchronize(_checked_index(dev))


def set_launch_blocking(enabled: bool) -> None:
    """Raise the errors kernels find in their data (an index out of bounds, a target out of range) at the op that
    launched them, synchronising its stream, instead of at the next synchronisation point (Note [Device-side errors]
    in csrc/core/DeviceErrors.h). MYTORCH_LAUNCH_BLOCKING=1 or CUDA_LAUNCH_BLOCKING=1 turns it on at import. The sim
    runtime always raises at the op."""
    _C._set_launch_blocking(bool(enabled))


def launch_blocking() -> bool:
    """Whether set_launch_blocking is on."""
    return bool(_C._launch_blocking())


_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """torch.cuda.set_sync_debug_mode: "default" (0) does nothing, "warn" (1) warns and "error" (2) raises at every
    op that makes the host wait for the device (item(), a blocking copy to or from pageable host memory, nonzero's
    size, a stream's synchronize). torch.mytorch.synchronize() itself is not flagged, as in torch.cuda."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_MODES:
            raise ValueError(f"invalid value of debug_mode: expected one of {sorted(_SYNC_MODES)}, got {debug_mode!r}")
        debug_mode = _SYNC_MODES[debug_mode]
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    """The current set_sync_debug_mode level (0, 1 or 2)."""
    return int(_C._get_sync_debug_mode())


class _MytorchDeviceProperties(NamedTuple):
    name: str
    total_memory: int
    major: int
    minor: int
    multi_processor_count: int
    warp_size: int
    L2_cache_size: int

    def __repr__(self) -> str:
        return (
            f"_MytorchDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def get_device_properties(dev: Any = None) -> _MytorchDeviceProperties:
    _lazy_init()
    return _MytorchDeviceProperties(**_C._device_properties(_checked_index(dev)))


def get_device_name(dev: Any = None) -> str:
    return get_device_properties(dev).name


def get_device_capability(dev: Any = None) -> tuple[int, int]:
    p = get_device_properties(dev)
    return p.major, p.minor
