"""The CPU fallback's policy and counters (docs/architecture.md, "Op registration and fallback")."""

from __future__ import annotations

from .. import _C


def fallback_stats() -> dict[str, dict[str, int]]:
    """Per-operator counters since the last reset: {'aten::add.Tensor': {'calls', 'bytes_to_cpu', 'bytes_to_device'}}."""
    return dict(_C._fallback_stats())


def reset_fallback_stats() -> None:
    """Clear the counters (and the warn-once memory, so each op warns again)."""
    _C._reset_fallback_stats()


def host_route_stats() -> dict[str, int]:
    """Calls of the sim's host route per family since the last reset ({'gemm': n, 'solver': n, ...}): operators that
    ran as mytorch's own but with the CPU library's loops on host views of device memory (Note [Sim host route] in
    csrc/aten/glue/HostRoute.h). Always empty on cuda."""
    return dict(_C._host_route_stats())


def reset_host_route_stats() -> None:
    _C._reset_host_route_stats()


def set_fallback_mode(mode: str) -> None:
    """'warn' (warn once per op), 'silent', or 'error' (an op without a native kernel raises)."""
    _C._set_fallback_mode(mode)


def get_fallback_mode() -> str:
    return _C._get_fallback_mode()
