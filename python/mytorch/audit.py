"""Coverage of a user's model: which aten ops ran on mytorch, natively or through the CPU fallback.

    report = mytorch.audit(lambda: model(x).sum().backward())
    print(report.table())

    with mytorch.audit() as report:
        train_step()
    report.rows   # one dict per aten op

Every aten op that reaches the dispatcher with a mytorch tensor (or a mytorch device argument) is
intercepted by a TorchDispatchMode, timed with device events, and attributed to "native" (no fallback call
happened inside it), "fallback" or "mixed" (some of its calls fell back) from the fallback counters.
Backward ops are included. Times are device time on cuda and host time on sim (where the device is the
host); the mode synchronises nothing, so the overhead is one pair of events per op.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from . import _C

_BACKEND = "mytorch"


@dataclasses.dataclass
class OpRow:
    op: str
    calls: int = 0
    fallback_calls: int = 0
    bytes_moved: int = 0
    time_ms: float = 0.0
    fallback_ops: set = dataclasses.field(default_factory=set)

    @property
    def status(self) -> str:
        if self.fallback_calls == 0:
            return "native"
        return "fallback" if self.fallback_calls == self.calls else "mixed"


def _touches_device(args, kwargs) -> bool:
    for x in tree_leaves((args, kwargs)):
        if isinstance(x, torch.Tensor) and x.device.type == _BACKEND:
            return True
        if isinstance(x, torch.device) and x.type == _BACKEND:
            return True
        if isinstance(x, str) and x.startswith(_BACKEND):
            return True
    return False


class AuditReport:
    def __init__(self):
        self._rows: dict[str, OpRow] = {}
        self._pending: list = []

    def _finish(self) -> None:
        if self._pending:
            torch.mytorch.synchronize()
            for row, start, end in self._pending:
                row.time_ms += start.elapsed_time(end)
            self._pending.clear()

    @property
    def rows(self) -> list[dict]:
        self._finish()
        total = sum(r.time_ms for r in self._rows.values()) or 1.0
        out = []
        for r in sorted(self._rows.values(), key=lambda r: (-r.time_ms, r.op)):
            out.append(
                {
                    "op": r.op,
                    "calls": r.calls,
                    "status": r.status,
                    "fallback_calls": r.fallback_calls,
                    "bytes_moved": r.bytes_moved,
                    "time_ms": r.time_ms,
                    "time_share": r.time_ms / total,
                    "fallback_ops": sorted(r.fallback_ops),
                }
            )
        return out

    @property
    def ops(self) -> dict[str, str]:
        """aten op -> native / fallback / mixed."""
        return {r.op: r.status for r in self._rows.values()}

    def summary(self) -> dict:
        rows = self.rows
        return {
            "ops": len(rows),
            "native": sum(r["status"] == "native" for r in rows),
            "fallback": sum(r["status"] != "native" for r in rows),
            "calls": sum(r["calls"] for r in rows),
            "fallback_calls": sum(r["fallback_calls"] for r in rows),
            "bytes_moved": sum(r["bytes_moved"] for r in rows),
        }

    def table(self, limit: int | None = None) -> str:
        rows = self.rows[:limit] if limit else self.rows
        s = self.summary()
        lines = [
            f"{s['ops']} aten ops on mytorch ({s['native']} native, {s['fallback']} through the CPU fallback), "
            f"{s['calls']} calls, {s['fallback_calls']} fell back, {s['bytes_moved'] / 2**20:.1f} MiB moved",
            f"{'op':44s} {'calls':>7s} {'status':>8s} {'MiB moved':>10s} {'time ms':>9s} {'share':>6s}",
        ]
        for r in rows:
            lines.append(
                f"{r['op']:44s} {r['calls']:7d} {r['status']:>8s} {r['bytes_moved'] / 2**20:10.2f} "
                f"{r['time_ms']:9.3f} {100 * r['time_share']:5.1f}%"
            )
        return "\n".join(lines)

    __str__ = table


class _AuditMode(TorchDispatchMode):
    def __init__(self, report: AuditReport, timing: bool = True):
        super().__init__()
        self.report = report
        self.timing = timing
        self._stats = _C._fallback_stats()  # per-op counters as last seen; refreshed only when totals move

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _touches_device(args, kwargs):
            return func(*args, **kwargs)
        name = func.name()
        row = self.report._rows.get(name)
        if row is None:
            row = self.report._rows[name] = OpRow(name)
        calls0, bytes0 = _C._fallback_totals()
        if self.timing:
            start, end = torch.Event(_BACKEND, enable_timing=True), torch.Event(_BACKEND, enable_timing=True)
            start.record()
            out = func(*args, **kwargs)
            end.record()
            self.report._pending.append((row, start, end))
        else:
            out = func(*args, **kwargs)
        calls1, bytes1 = _C._fallback_totals()
        row.calls += 1
        if calls1 != calls0:
            row.fallback_calls += 1
            row.bytes_moved += bytes1 - bytes0
            stats1 = _C._fallback_stats()
            row.fallback_ops.update(
                k for k, v in stats1.items() if v["calls"] != self._stats.get(k, {}).get("calls", 0)
            )
            self._stats = stats1
        return out


class _Audit:
    def __init__(self):
        self.report = AuditReport()
        self._mode = None

    def __enter__(self) -> AuditReport:
        torch.mytorch._lazy_init()
        self._mode = _AuditMode(self.report)
        self._mode.__enter__()
        return self.report

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        self.report._finish()
        return False


def audit(fn: Callable[..., Any] | None = None, *args, **kwargs):
    """With a callable: run it under the audit and return the AuditReport. Without: a context manager."""
    if fn is None:
        return _Audit()
    with _Audit() as report:
        fn(*args, **kwargs)
    return report
