"""The distributed stage of scripts/gpu_verify.py, one step per process (so a crash names its step):

    python -X faulthandler python/mytorch/testing/_dist_probe.py torch-nccl WORLD   torch's own ProcessGroupNCCL
    python -X faulthandler -m mytorch.testing._dist_probe mytorch-nccl WORLD   mytorch's NCCL path
    python -X faulthandler -m mytorch.testing._dist_probe device-index         mytorch:1 where there is one device

torch's NCCL runs first: if NCCL itself crashes on the machine, that step fails before ours. It runs this file by
its path, so that neither it nor its spawned ranks import the mytorch package (whose import loads the extension: on
the lent machine's torch 2.11 a schema mismatch once aborted every step at that import, torch's own included). WORLD ranks share
the machine's devices (rank r on device r % count); NCCL refuses two ranks on one GPU, which the step reports as an
error, not a crash. Each step prints ``ok <step>: ...`` when it passed; an exception or a crash fails it.
"""

from __future__ import annotations

import os
import sys


def _rank_main(rank: int, world: int, port: int, which: str) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    if which == "torch-nccl":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        import mytorch

        dev = torch.device("mytorch", rank % torch.mytorch.device_count())
        torch.mytorch.set_device(dev.index)
        backend = "mytorch"
        del mytorch
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    t = torch.full((1 << 20,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    got = t[:4].cpu().tolist()
    want = [float(world * (world + 1) // 2)] * 4
    assert got == want, (got, want)
    if which == "mytorch-nccl":
        import mytorch

        path = mytorch.distributed.data_path()
        assert path == "nccl", path
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: all_reduce of {t.numel()} floats on {dev} through {backend}: {got[0]}", flush=True)


def run_world(which: str, world: int) -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:  # a free port for the store (not _dist_workers.free_port: no mytorch import here)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_rank_main, args=(world, port, which), nprocs=world, join=True, start_method="spawn")
    print(f"ok {which} {world}: every rank's all_reduce matched", flush=True)


def device_index() -> None:
    """What segfaulted on the one GPU run: a second device index where the machine has one device. Every call must
    raise a Python exception naming the device, and the process must live on."""
    import torch

    import mytorch  # noqa: F401

    n = torch.mytorch.device_count()
    bad = n  # the first index past the last device
    calls = {
        "empty": lambda: torch.empty(4, device=f"mytorch:{bad}"),
        "to": lambda: torch.ones(4).to(f"mytorch:{bad}"),
        "set_device": lambda: torch.mytorch.set_device(bad),
        "synchronize": lambda: torch.mytorch.synchronize(bad),
        "stream": lambda: torch.mytorch.Stream(device=bad),
        "memory": lambda: torch.mytorch.memory_allocated(bad),
        "properties": lambda: torch.mytorch.get_device_properties(bad),
        "guard": lambda: torch.ones(2, device="mytorch").to(f"mytorch:{bad}"),
    }
    failures = []
    for name, call in calls.items():
        try:
            call()
            failures.append(f"{name}: no error")
        except (RuntimeError, ValueError, IndexError, AssertionError) as e:
            text = str(e)
            if str(bad) not in text:
                failures.append(f"{name}: the message does not name device {bad}: {text[:200]}")
            print(f"{name}: {type(e).__name__}: {text.splitlines()[0][:160]}", flush=True)
    t = torch.ones(3, device="mytorch") * 2  # the device in use still works
    assert t.cpu().tolist() == [2.0] * 3
    if failures:
        raise SystemExit("device-index: " + "; ".join(failures))
    print(f"ok device-index: {len(calls)} calls on mytorch:{bad} ({n} device(s)) raised", flush=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("torch-nccl", "mytorch-nccl", "device-index"):
        print(__doc__)
        return 2
    if argv[0] == "device-index":
        device_index()
    else:
        run_world(argv[0], int(argv[1]) if len(argv) > 1 else 1)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    sys.exit(main(sys.argv[1:]))
