"""Timing shared by the benchmark scripts: median wall time of a synchronised call after warm-up."""
from __future__ import annotations

import statistics
import time


def timed(fn, sync, repeat: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)
