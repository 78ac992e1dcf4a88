"""Clean exit: a script that used the device ends with status 0, whatever was still alive at exit.

Note [Autograd threads at exit] (csrc/python/Module.cpp): the autograd engine's device thread used to free
the last graph task while the interpreter was finalizing, aborting the process with "terminate called without
an active exception" (status 134) in about one run in six under load. The scripts below are run many times at
once, so the machine is loaded the way it was when the abort was seen; every run must exit with 0.
MYTORCH_SHUTDOWN_RUNS sets the number of runs (the issue's acceptance figure is 200).

Not covered, because stock torch aborts the same way on the CPU: a daemon thread still inside torch work
when the interpreter finalizes (docs/troubleshooting.md).
"""

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from conftest import ROOT

SCRIPTS = {
    # The script: one backward, then exit with the tensor alive.
    "backward": """
        import torch
        import mytorch
        x = torch.randn(4, device="mytorch", requires_grad=True); (x * 2).sum().backward()
    """,
    # Work queued on a side stream and never synchronised; a Python thread that ran backwards (joined by
    # the interpreter before exit).
    "stream_and_thread": """
        import threading
        import torch
        import mytorch
        def work():
            w = torch.randn(32, 32, device="mytorch", requires_grad=True)
            for _ in range(3):
                (w @ w).sum().backward()
        t = threading.Thread(target=work); t.start()
        s = torch.mytorch.Stream()
        with torch.mytorch.stream(s):
            y = torch.randn(256, 256, device="mytorch", requires_grad=True)
            (y.relu() * 3).mean().backward()
    """,
    # The profiler's device activity, left without export.
    "profiler": """
        import torch
        import mytorch
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            x = torch.randn(16, 16, device="mytorch", requires_grad=True)
            (x.sin() @ x).sum().backward()
    """,
    # A process group left alive at exit (no destroy_process_group), after a collective and a backward.
    "process_group": """
        import torch
        import torch.distributed as dist
        import mytorch
        dist.init_process_group("mytorch", store=dist.HashStore(), rank=0, world_size=1)
        x = torch.ones(8, device="mytorch", requires_grad=True)
        dist.all_reduce(x.detach())
        (x * x).sum().backward()
    """,
}


def _run_many(runs: int, parallel: int = 4, names: list[str] | None = None) -> list[tuple[str, int, str]]:
    names = names or sorted(SCRIPTS)
    env = dict(os.environ)

    def one(i: int):
        name = names[i % len(names)]
        r = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(SCRIPTS[name])],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        return name, r.returncode, r.stderr[-400:]

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, range(runs)))


def _failures(runs: int, names: list[str] | None = None) -> list[tuple[str, int, str]]:
    """The runs (script, exit status, stderr tail) that did not exit with 0."""
    results = _run_many(runs, names=names)
    assert len(results) == runs
    return [r for r in results if r[1] != 0]


@pytest.mark.slow
def test_scripts_exit_cleanly_under_load():
    bad = _failures(int(os.environ.get("MYTORCH_SHUTDOWN_RUNS", "24")))
    assert not bad, f"{len(bad)} runs did not exit with 0: {bad[:3]}"


@pytest.mark.gpu
def test_scripts_exit_cleanly_on_the_cuda_runtime():
    """The same scripts where the runtime has threads of its own (the emulator's stream workers), and the NCCL
    path's watchdog (Note [Process-group watchdogs at exit]): half the runs leave a process group alive. Without
    that note's drain, 8 of 88 process-group runs aborted on the ASan emulated build; with it 0 of 105."""
    assert torch.mytorch.runtime() in ("cuda", "emu")
    names = sorted(SCRIPTS) + ["process_group"] * (len(SCRIPTS) - 1)
    bad = _failures(int(os.environ.get("MYTORCH_SHUTDOWN_RUNS", "12")), names)
    assert not bad, f"{len(bad)} runs did not exit with 0: {bad[:3]}"
