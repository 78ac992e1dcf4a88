"""The pytest plugin `python -m mytorch.testing.suites` loads into PyTorch's own test files (-p): a
deterministic sample of the collected tests, a per-test time limit, and one JSON line per test outcome.

Environment (set by suites.py):
  MYTORCH_SUITE_RESULTS   file the outcomes are appended to
  MYTORCH_SUITE_SAMPLE    fraction of the tests to keep (default 1), chosen by a hash of the test's
                          device-independent name, so a CPU test and its mytorch twin are kept together
  MYTORCH_SUITE_SEED      changes the sample
  MYTORCH_SUITE_SHARD     K/N: keep only the K-th of N shards (by the same hash, so twins stay together)
  MYTORCH_SUITE_TIMEOUT   seconds one test may run (default 120); past it the test fails with TimeoutError
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal

import pytest

# The harness names a device class after its base's device_type: PRIVATEUSE1 as a rule, the backend's own name
# (MYTORCH) where PrivateUse1TestBase.device_type has been set to it before instantiation.
_MYTORCH_CLASS = ("PRIVATEUSE1", "MYTORCH")
_DEVICE_CLASS = re.compile(r"(CPU|PRIVATEUSE1|MYTORCH)$")
_TOKEN = {"cpu": re.compile(r"_cpu(?=_|$)"), "mytorch": re.compile(r"_(mytorch|privateuse1)(?=_|$)")}


def twin_key(nodeid: str) -> str:
    """A test's name with the device taken out: TestFooCPU::test_x_cpu_float32 and
    TestFooPRIVATEUSE1::test_x_mytorch_float32 give the same key. The device is the last device token of the
    name (instantiation appends it after the test's own name and parameters, before the dtypes), so a test
    whose own name says cpu or mytorch keeps that part."""
    parts = nodeid.split("::")
    dev = device_of(nodeid)
    if len(parts) >= 2:
        parts[-2] = _DEVICE_CLASS.sub("", parts[-2])
    if dev in _TOKEN:
        found = list(_TOKEN[dev].finditer(parts[-1]))
        if found:
            m = found[-1]
            parts[-1] = parts[-1][: m.start()] + "_DEVICE" + parts[-1][m.end() :]
    return "::".join(parts)


def device_of(nodeid: str) -> str:
    cls = nodeid.split("::")[-2] if "::" in nodeid else ""
    if cls.endswith(_MYTORCH_CLASS):
        return "mytorch"
    if cls.endswith("CPU"):
        return "cpu"
    return "other"


def _keep(nodeid: str, fraction: float, seed: str, shard: tuple[int, int] = (0, 1)) -> bool:
    key = twin_key(nodeid)
    if shard[1] > 1:
        h = hashlib.sha256(f"shard:{key}".encode()).digest()
        if int.from_bytes(h[:8], "big") % shard[1] != shard[0]:
            return False
    if fraction >= 1:
        return True
    h = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < fraction


def shard_of(spec: str) -> tuple[int, int]:
    """'K/N' -> (K, N), K in [0, N)."""
    k, _, n = spec.partition("/")
    k, n = int(k), int(n or 1)
    if not 0 <= k < n:
        raise ValueError(f"MYTORCH_SUITE_SHARD: expected K/N with 0 <= K < N, got {spec!r}")
    return k, n


def pytest_collection_modifyitems(config, items):
    fraction = float(os.environ.get("MYTORCH_SUITE_SAMPLE", "1"))
    seed = os.environ.get("MYTORCH_SUITE_SEED", "0")
    shard = shard_of(os.environ.get("MYTORCH_SUITE_SHARD", "0/1"))
    kept = {id(it) for it in items if _keep(it.nodeid, fraction, seed, shard)}
    keep = [it for it in items if id(it) in kept]
    dropped = [it for it in items if id(it) not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


class _Timeout(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = int(float(os.environ.get("MYTORCH_SUITE_TIMEOUT", "120")))

    def expire(signum, frame):
        raise TimeoutError(f"test ran past {limit} s (MYTORCH_SUITE_TIMEOUT)")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def pytest_runtest_logreport(report):
    path = os.environ.get("MYTORCH_SUITE_RESULTS")
    if not path:
        return
    # one line per test: the call phase, or the phase that failed or skipped before it
    if (
        report.when == "call"
        or (report.when == "setup" and not report.passed)
        or (report.when == "teardown" and report.failed)
    ):
        outcome = report.outcome
        if report.when != "call" and report.failed:
            outcome = "error"
        if hasattr(report, "wasxfail"):
            outcome = "xfail" if report.skipped else "xpass"
        message = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = (
                crash.message if crash is not None else ((report.longreprtext or "").strip().splitlines() or [""])[-1]
            )
            message = message[:300]
        elif report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])[:200]
        with open(path, "a") as f:
            f.write(
                json.dumps(
                    {
                        "id": report.nodeid,
                        "outcome": outcome,
                        "when": report.when,
                        "seconds": round(report.duration, 3),
                        "message": message,
                    }
                )
                + "\n"
            )
