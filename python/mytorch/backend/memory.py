"""Memory statistics and cache control of the mytorch caching allocators (keys as torch.cuda's)."""

from __future__ import annotations

import collections
import pickle
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


def _record_memory_history(enabled: str | bool | None = "all", max_entries: int = 100_000, **unused) -> None:
    """Start (enabled="all", "state" or True) or stop (None or False) recording allocator events, as
    torch.cuda.memory._record_memory_history. Stack frames are not recorded."""
    _lazy_init()
    on = enabled not in (None, False)
    if on and enabled not in (True, "all", "state", "alloc"):
        raise ValueError(f"enabled must be 'all', 'state', True, None or False, but got {enabled!r}")
    if max_entries <= 0:
        raise ValueError(f"max_entries must be positive, but got {max_entries}")
    _C._record_memory_history(on, int(max_entries))


def _snapshot(device: Any = None) -> dict:
    """Segments, blocks and recorded events in torch.cuda.memory._snapshot's format."""
    _lazy_init()
    return _C._snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _fmt_bytes(n: float) -> str:
    """Ten characters, as the table's columns: bytes up to 1023, then the first unit that keeps the value under 1000
    (1010.00 MiB, eleven characters, widened its row: a worker's total allocations cross such values)."""
    if abs(n) < 1024:
        return f"{int(n):6d} B  "
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if abs(n) < 999.995 or unit == "TiB":  # what rounds to 1000.00 takes the next unit
            return f"{n:6.2f} {unit}"
    return ""


def _fmt_count(n: int) -> str:
    return f"{n:7d}   "


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A printable table of the allocator's statistics, in torch.cuda.memory_summary's layout."""
    stats = memory_stats(device)
    idx = _checked_index(device)

    def line(label: str, vals) -> str:
        return "|" + f" {label:<22}" + "|" + "|".join(f" {v:>10} " for v in vals) + "|"

    def rows(label: str, key: str, fmt) -> list[str]:
        pools = [("all", label)]
        if not abbreviated:
            pools += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        return [
            line(name, [fmt(stats.get(f"{key}.{pool}.{k}", 0)) for k in ("current", "peak", "allocated", "freed")])
            for pool, name in pools
        ]

    sep, thin = "|" + "=" * 75 + "|", "|" + "-" * 75 + "|"
    out = [
        sep,
        "|" + f"PyTorch mytorch memory management summary, device ID {idx:<3d}".center(75) + "|",
        thin,
        "|"
        + f"  mytorch OOMs: {stats.get('num_ooms', 0):<13d}".ljust(37)
        + "|"
        + f"  device malloc retries: {stats.get('num_alloc_retries', 0):<11d}".ljust(37)
        + "|",
        sep,
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
        thin,
    ]
    for label, key, fmt in (
        ("Allocated memory", "allocated_bytes", _fmt_bytes),
        ("Active memory", "active_bytes", _fmt_bytes),
        ("Requested memory", "requested_bytes", _fmt_bytes),
        ("Device reserved memory", "reserved_bytes", _fmt_bytes),
        ("Non-releasable memory", "inactive_split_bytes", _fmt_bytes),
        ("Allocations", "allocation", _fmt_count),
        ("Active allocs", "active", _fmt_count),
        ("Reserved segments", "segment", _fmt_count),
        ("Non-releasable allocs", "inactive_split", _fmt_count),
    ):
        out += rows(label, key, fmt)
        out.append(thin)
    for label, key in (("Oversize allocations", "oversize_allocations"), ("Oversize segments", "oversize_segments")):
        out.append(
            line(label, [_fmt_count(stats.get(f"{key}.{k}", 0)) for k in ("current", "peak", "allocated", "freed")])
        )
        out.append(thin)
    out.append(sep)
    return "\n".join(out) + "\n"
