"""Memory statistics and cache control of the mytorch caching allocators (keys as torch.cuda's)."""
from __future__ import annotations

import collections
from typing import Any

from .. import _C
from ._device import _checked_index, _lazy_init, is_initialized


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    if not is_initialized():
        return {}
    return _C._memory_stats(_checked_index(device))


def memory_stats(device: Any = None) -> collections.OrderedDict:
    """Flat statistics: 'allocated_bytes.all.current', 'reserved_bytes.large_pool.peak', 'num_ooms', ..."""
    flat = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            flat.append((prefix, value))

    walk("", memory_stats_as_nested_dict(device))
    flat.sort()
    return collections.OrderedDict(flat)


def memory_allocated(device: Any = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: Any = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Any = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: Any = None) -> None:
    _lazy_init()
    _C._reset_peak_memory_stats(_checked_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _lazy_init()
    _C._reset_accumulated_memory_stats(_checked_index(device))


def empty_cache() -> None:
    """Return every cached segment that holds no tensor to the runtime."""
    if is_initialized():
        _C._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device, as the runtime reports them."""
    _lazy_init()
    return tuple(_C._mem_get_info(_checked_index(device)))


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Cap what the allocator reserves on the device to `fraction` of its capacity."""
    if not isinstance(fraction, (int, float)):
        raise TypeError(f"fraction must be a float, but got {type(fraction).__name__}")
    _lazy_init()
    _C._set_memory_fraction(float(fraction), _checked_index(device))


def host_memory_stats() -> collections.OrderedDict:
    """Statistics of the pinned host allocator."""
    flat = []
    for k, v in _C._host_memory_stats().items():
        if isinstance(v, dict):
            flat += [(f"{k}.{kk}", vv) for kk, vv in v.items()]
        else:
            flat.append((k, v))
    flat.sort()
    return collections.OrderedDict(flat)


def empty_host_cache() -> None:
    _C._host_empty_cache()
