"""Rank programs for the process-group tests (test/test_distributed.py) and benchmark.

Each worker runs in its own process (torch.multiprocessing, spawn), joins a process group over a local TCP
store, and writes what it found to ``<out>/rank<r>.json``: the parent test asserts on those files, so a
failure names the rank, the collective and the dtype.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
import traceback


def _init(rank: int, world: int, port: int, backend: str = "mytorch", timeout_s: float = 60.0):
    import torch.distributed as dist

    import mytorch  # noqa: F401  (registers the device and the backend)

    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return dist


def _write(out: str, rank: int, payload: dict) -> None:
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(payload, f)


def free_port() -> int:
    """A TCP port free on this machine now, for a job's store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(fn, world: int, out: str, *args, timeout_s: float = 600.0) -> None:
    """Run fn(rank, world, out, *args) on `world` spawned processes; raises when one fails, and kills them all and
    raises TimeoutError when they have not all ended within timeout_s (a hang cannot outlive its test)."""
    import torch.multiprocessing as mp

    ctx = mp.start_processes(fn, args=(world, out) + tuple(args), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise TimeoutError(f"{fn.__name__}: {world} ranks did not all end within {timeout_s:.0f} s")


def sleep_worker(rank: int, world: int, out: str, seconds: float) -> None:
    """Hangs (sleeps) for `seconds`: the launcher's own timeout is tested with it."""
    time.sleep(seconds)


# --- every collective and dtype --------------------------------------------------------------------------

DTYPES = [
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "uint16",
    "uint32",
    "uint64",
    "float8_e4m3fn",
    "float8_e5m2",
    "complex64",
]


def _value(rank: int, n: int, dtype, salt: int = 0):
    """Small integers (exact in every dtype, sums and products too): rank- and position-dependent."""
    import torch

    base = (torch.arange(n, dtype=torch.int64) + rank + salt) % 3
    if dtype == torch.bool:
        return (base + rank) % 2 == 1
    if dtype.is_complex:
        return torch.complex(base.double(), (base + 1).double()).to(dtype)
    return (base + 1).to(dtype)


def collectives_worker(rank: int, world: int, out: str, port: int) -> None:
    import torch

    dist = _init(rank, world, port)
    dev = "mytorch"
    failures: list[str] = []
    ran = 0

    def same(name, got, want, exact=True):
        nonlocal ran
        ran += 1
        got = got.cpu()
        if got.dtype != want.dtype or got.shape != want.shape:
            failures.append(f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
            return
        if got.dtype == torch.bool:
            ok = torch.equal(got, want)
        else:
            wide = torch.complex128 if got.is_complex() else torch.float64
            g, w = got.to(wide), want.to(wide)
            ok = torch.equal(g, w) if exact else torch.allclose(g, w, rtol=0.13, atol=1e-6)
        if not ok:
            failures.append(f"{name}: got {got.tolist()[:8]}, want {want.tolist()[:8]}")

    n = 6
    for dname in DTYPES:
        dt = getattr(torch, dname)
        vals = [_value(r, n, dt) for r in range(world)]
        mine = vals[rank]
        is_float8 = dname.startswith("float8")
        reducible = dname not in ("bool",)
        try:
            # broadcast from every root
            for root in range(world):
                t = mine.to(dev)
                dist.broadcast(t, src=root)
                same(f"broadcast[{dname},root={root}]", t, vals[root])
            # all_reduce / reduce, each op
            ops = {
                "SUM": dist.ReduceOp.SUM,
                "MAX": dist.ReduceOp.MAX,
                "MIN": dist.ReduceOp.MIN,
                "PRODUCT": dist.ReduceOp.PRODUCT,
                "AVG": dist.ReduceOp.AVG,
            }
            if dname == "bool":
                ops = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "MIN": dist.ReduceOp.MIN}
            if dname == "complex64":
                ops = {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG}
            wide = [v.to(torch.complex128 if dt.is_complex else torch.float64) if dt != torch.bool else v for v in vals]
            for oname, op in ops.items():
                if dt == torch.bool:
                    stack = torch.stack(vals)
                    want = stack.any(0) if oname in ("SUM", "MAX") else stack.all(0)
                else:
                    stack = torch.stack(wide)
                    want = {
                        "SUM": lambda s: s.sum(0),
                        "MAX": lambda s: s.max(0).values,
                        "MIN": lambda s: s.min(0).values,
                        "PRODUCT": lambda s: s.prod(0),
                        "AVG": lambda s: s.mean(0),
                    }[oname](stack)
                    if oname == "AVG" and not (dt.is_floating_point or dt.is_complex):
                        want = want.trunc()
                    want = want.to(dt)
                exact = not (oname == "AVG" and (is_float8 or dt in (torch.float16, torch.bfloat16)))
                t = mine.to(dev)
                dist.all_reduce(t, op=op)
                same(f"all_reduce[{dname},{oname}]", t, want, exact)
                root = world - 1
                t = mine.to(dev)
                dist.reduce(t, dst=root, op=op)
                same(f"reduce[{dname},{oname}]", t, want if rank == root else mine, exact)
            # all_gather (list and into one tensor)
            outs = [torch.empty(n, dtype=dt, device=dev) for _ in range(world)]
            dist.all_gather(outs, mine.to(dev))
            for r in range(world):
                same(f"all_gather[{dname}][{r}]", outs[r], vals[r])
            flat = torch.empty(world * n, dtype=dt, device=dev)
            dist.all_gather_into_tensor(flat, mine.to(dev))
            same(f"all_gather_into_tensor[{dname}]", flat, torch.cat(vals))
            # reduce_scatter (list and from one tensor), SUM
            if reducible:
                ins = [_value(rank, n, dt, salt=j) for j in range(world)]
                o = torch.empty(n, dtype=dt, device=dev)
                dist.reduce_scatter(o, [x.to(dev) for x in ins])
                want = (
                    torch.stack(
                        [
                            _value(r, n, dt, salt=rank).to(torch.complex128 if dt.is_complex else torch.float64)
                            for r in range(world)
                        ]
                    )
                    .sum(0)
                    .to(dt)
                )
                same(f"reduce_scatter[{dname}]", o, want)
                o = torch.empty(n, dtype=dt, device=dev)
                dist.reduce_scatter_tensor(o, torch.cat(ins).to(dev))
                same(f"reduce_scatter_tensor[{dname}]", o, want)
            # all_to_all_single: equal and uneven splits; all_to_all (lists)
            x = torch.cat([_value(rank, 2, dt, salt=j) for j in range(world)])
            y = torch.empty(2 * world, dtype=dt, device=dev)
            dist.all_to_all_single(y, x.to(dev))
            same(f"all_to_all_single[{dname}]", y, torch.cat([_value(r, 2, dt, salt=rank) for r in range(world)]))
            # uneven: rank r sends (r + j + 1) rows to rank j
            in_splits = [rank + j + 1 for j in range(world)]
            out_splits = [r + rank + 1 for r in range(world)]
            x = torch.cat([_value(rank, s, dt, salt=10 * j) for j, s in enumerate(in_splits)])
            y = torch.empty(sum(out_splits), dtype=dt, device=dev)
            dist.all_to_all_single(y, x.to(dev), out_splits, in_splits)
            want = torch.cat([_value(r, out_splits[r], dt, salt=10 * rank) for r in range(world)])
            same(f"all_to_all_single_uneven[{dname}]", y, want)
            # rows of 3, rank 0 sending none (an MoE rank no token was routed from) but receiving j + 1 from each
            in_splits = [0 if rank == 0 else j + 1 for j in range(world)]
            out_splits = [0 if r == 0 else rank + 1 for r in range(world)]
            x = torch.cat([_value(rank, 3 * s, dt, salt=20 * j).view(s, 3) for j, s in enumerate(in_splits)])
            y = torch.empty(sum(out_splits), 3, dtype=dt, device=dev)
            dist.all_to_all_single(y, x.to(dev), out_splits, in_splits)
            want = torch.cat([_value(r, 3 * out_splits[r], dt, salt=20 * rank).view(-1, 3) for r in range(world)])
            same(f"all_to_all_single_empty_sender[{dname}]", y, want)
            outs = [torch.empty(r + 1, dtype=dt, device=dev) for r in range(world)]
            dist.all_to_all(outs, [_value(rank, rank + 1, dt, salt=j).to(dev) for j in range(world)])
            for r in range(world):
                same(f"all_to_all[{dname}][{r}]", outs[r], _value(r, r + 1, dt, salt=rank))
            # gather / scatter
            root = 0
            g = [torch.empty(n, dtype=dt, device=dev) for _ in range(world)] if rank == root else None
            dist.gather(mine.to(dev), g, dst=root)
            if rank == root:
                for r in range(world):
                    same(f"gather[{dname}][{r}]", g[r], vals[r])
            s = torch.empty(n, dtype=dt, device=dev)
            dist.scatter(
                s, [_value(j, n, dt, salt=5).to(dev) for j in range(world)] if rank == root else None, src=root
            )
            same(f"scatter[{dname}]", s, _value(rank, n, dt, salt=5))
            # send / recv around a ring, and batch_isend_irecv both ways
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            r_buf = torch.empty(n, dtype=dt, device=dev)
            if rank % 2 == 0:
                dist.send(mine.to(dev), nxt)
                dist.recv(r_buf, prv)
            else:
                dist.recv(r_buf, prv)
                dist.send(mine.to(dev), nxt)
            same(f"send_recv[{dname}]", r_buf, vals[prv])
            a, b = torch.empty(n, dtype=dt, device=dev), torch.empty(n, dtype=dt, device=dev)
            reqs = dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.irecv, a, prv),
                    dist.P2POp(dist.irecv, b, nxt),
                    dist.P2POp(dist.isend, mine.to(dev), nxt),
                    dist.P2POp(dist.isend, mine.to(dev), prv),
                ]
            )
            for q in reqs:
                q.wait()
            same(f"batch_isend_irecv[{dname}]", a, vals[prv])
            same(f"batch_isend_irecv[{dname}]", b, vals[nxt])
        except Exception:
            failures.append(f"{dname}: raised {traceback.format_exc(limit=3)}")
            break
    # allreduce_coalesced (DDP's path for buffers) and PREMUL_SUM, barrier, async works
    try:
        ts = [torch.full((3,), float(rank + 1), device=dev), torch.full((2, 2), float(rank), device=dev)]
        dist.all_reduce_coalesced(ts)
        same("all_reduce_coalesced[0]", ts[0], torch.full((3,), float(sum(range(1, world + 1)))))
        same("all_reduce_coalesced[1]", ts[1], torch.full((2, 2), float(sum(range(world)))))
        t = torch.full((4,), float(rank + 1), device=dev)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        same("all_reduce[PREMUL_SUM]", t, torch.full((4,), 0.5 * sum(range(1, world + 1))))
        works = [dist.all_reduce(torch.full((8,), float(i), device=dev), async_op=True) for i in range(4)]
        for w in works:
            w.wait()
            torch.mytorch.synchronize()  # NCCL path: wait() orders the stream only (as ProcessGroupNCCL's)
            ran += 1
            if not w.is_completed():
                failures.append("async all_reduce: not completed after wait()")
        fut = dist.all_reduce(torch.ones(3, device=dev), async_op=True).get_future()
        res = fut.wait()
        same("all_reduce future value", res[0], torch.full((3,), float(world)))
        dist.barrier()
    except Exception:
        failures.append(f"extras: raised {traceback.format_exc(limit=3)}")
    _write(out, rank, {"failures": failures, "ran": ran})
    dist.destroy_process_group()


# --- mistakes across ranks, bad input, dead peers --------------------------------------------------------


def mismatch_worker(rank: int, world: int, out: str, port: int) -> None:
    import torch

    import mytorch

    os.environ["MYTORCH_DIST_CHECK"] = "1"  # the agreement check is what this worker tests (on every path)
    dist = _init(rank, world, port, timeout_s=30)
    nccl = mytorch.distributed.data_path() == "nccl"
    dev = "mytorch"
    seen = {}

    def attempt(name, fn):
        try:
            fn()
            seen[name] = "no error"
        except Exception as e:  # noqa: BLE001  (the test asserts on the text)
            seen[name] = f"{type(e).__name__}: {e}"

    attempt("shape", lambda: dist.all_reduce(torch.ones(4 if rank == 0 else 8, device=dev)))
    attempt("dtype", lambda: dist.all_reduce(torch.ones(4, device=dev, dtype=torch.float32 if rank else torch.float64)))
    attempt(
        "collective",
        lambda: (
            dist.all_reduce(torch.ones(4, device=dev)) if rank == 0 else dist.broadcast(torch.ones(4, device=dev), 0)
        ),
    )
    attempt("root", lambda: dist.broadcast(torch.ones(4, device=dev), src=rank % 2))
    attempt(
        "splits",
        lambda: dist.all_to_all_single(
            torch.empty(2 * world, device=dev),
            torch.ones(2 * world, device=dev),
            [2] * world,
            [1] * (world - 1) + [world + 1],
        ),
    )

    def p2p():
        if rank == 0:
            dist.send(torch.ones(8, device=dev), 1)
        elif rank == 1:
            dist.recv(torch.empty(4, device=dev), 0)

    if nccl:
        # NCCL has no size header on point-to-point messages: a mismatch fails the communicator for both ranks
        # (the emulated NCCL names the sizes; test/test_nccl_path.py), so it cannot be followed by "after" here.
        seen["p2p"] = "not tried on the NCCL path"
    else:
        attempt("p2p", p2p)
    attempt("cpu_tensor", lambda: dist.all_reduce(torch.ones(4)))
    attempt("non_contiguous", lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()))
    t = torch.full((4,), float(rank + 1), device=dev)
    attempt("after", lambda: dist.all_reduce(t))
    _write(out, rank, {"seen": seen, "after": t.cpu().tolist(), "nccl": nccl})
    dist.destroy_process_group()


def functional_worker(rank: int, world: int, out: str, port: int) -> None:
    """Functional collectives (what DTensor, tensor parallelism and compiled graphs use) and a DTensor on a
    DeviceMesh of mytorch devices."""
    import torch
    import torch.distributed._functional_collectives as fc
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist = _init(rank, world, port)
    t = torch.full((4,), float(rank + 1), device="mytorch")
    reduced = fc.all_reduce(t, "sum", dist.group.WORLD)
    gathered = fc.all_gather_tensor(t, 0, dist.group.WORLD)
    mesh = init_device_mesh("mytorch", (world,))
    dt = distribute_tensor(torch.arange(2.0 * world, device="mytorch"), mesh, [Shard(0)])
    doubled = (dt * 2).redistribute(mesh, [Replicate()]).to_local()
    _write(
        out,
        rank,
        {
            "reduced": reduced.cpu().tolist(),
            "gathered": gathered.cpu().tolist(),
            "local": dt.to_local().cpu().tolist(),
            "doubled": doubled.cpu().tolist(),
        },
    )
    dist.destroy_process_group()


def check_setting_worker(rank: int, world: int, out: str, port: int) -> None:
    """Ranks that disagree on MYTORCH_DIST_CHECK: refused when the group is created."""
    os.environ["MYTORCH_DIST_CHECK"] = "1" if rank == 0 else "0"
    try:
        _init(rank, world, port, timeout_s=30)
        error = None
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    _write(out, rank, {"error": error})
    os._exit(0)


def debug_detail_worker(rank: int, world: int, out: str, port: int) -> None:
    """Under torch's TORCH_DISTRIBUTED_DEBUG=DETAIL (set by the parent): torch wraps the backend with its own
    collective checker, which needs the backend's sequence numbers."""
    import torch

    dist = _init(rank, world, port, timeout_s=30)
    t = torch.ones(4, device="mytorch")
    dist.all_reduce(t)
    try:
        dist.all_reduce(torch.ones(4 if rank == 0 else 8, device="mytorch"))
        error = None
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    _write(out, rank, {"first": t.cpu().tolist(), "error": error})
    os._exit(0)  # torch's wrapper leaves the group unusable after a mismatch


def dead_rank_worker(
    rank: int, world: int, out: str, port: int, timeout_s: float, how: str = "exit", check: bool = True
) -> None:
    import torch

    os.environ["MYTORCH_DIST_CHECK"] = "1" if check else "0"
    dist = _init(rank, world, port, timeout_s=timeout_s)
    t = torch.ones(1024, device="mytorch")
    for _ in range(3):
        dist.all_reduce(t)
    if rank == world - 1:
        if how == "hang":
            time.sleep(timeout_s + 6)  # alive, connected, and silent past the others' timeout
        os._exit(0)  # dies without a word, mid-run
    start = time.monotonic()
    error = None
    try:
        for _ in range(50):
            dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    _write(out, rank, {"error": error, "elapsed": time.monotonic() - start})
    os._exit(0)  # the group is broken: skip the shutdown handshake


def mixed_backend_worker(rank: int, world: int, out: str, port: int, backend=None) -> None:
    """A group with CPU tensors on Gloo and mytorch tensors on mytorch, or torch's default (backend=None:
    the backend registered for the current accelerator, which is mytorch), plus a subgroup of even ranks."""
    import torch

    dist = _init(rank, world, port, backend=backend)
    c = torch.full((3,), float(rank + 1))
    d = torch.full((3,), float(rank + 1), device="mytorch")
    if backend is not None:
        dist.all_reduce(c)
    dist.all_reduce(d)
    pg = dist.distributed_c10d._get_default_group()
    name = type(pg._get_backend(torch.device("mytorch"))).__name__
    evens = dist.new_group(ranks=list(range(0, world, 2)), backend="mytorch")
    e = torch.full((2,), float(rank), device="mytorch")
    if rank % 2 == 0:
        dist.all_reduce(e, group=evens)
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "tag": "x" * rank})
    box = [{"from": rank}] if rank == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    _write(
        out,
        rank,
        {
            "cpu": c.tolist(),
            "mytorch": d.cpu().tolist(),
            "backend": name,
            "evens": e.cpu().tolist(),
            "objects": objs,
            "box": box,
        },
    )
    dist.destroy_process_group()


# --- DDP and FSDP2 against one process on the concatenated batch ------------------------------------------


def _gpt(examples: str):
    sys.path.insert(0, examples)
    from train_gpt import GPT

    return GPT(block_size=16, n_layer=2, n_head=2, n_embd=32)


def _batches(steps: int, per_rank: int, world: int):
    import torch

    g = torch.Generator().manual_seed(1234)
    return [torch.randint(0, 256, (per_rank * world, 17), generator=g) for _ in range(steps)]


def _optimizer(params):
    # SGD with momentum, not Adam: the key bias of attention has a gradient that is zero up to rounding,
    # and Adam would blow that rounding noise up to full-size steps in both runs alike.
    import torch

    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def reference_training(examples: str, steps: int, per_rank: int, world: int, device: str = "mytorch", dtype=None):
    """One process, the whole batch: the parameters after `steps` optimizer steps (in `dtype`, float64 for the
    golden values)."""
    import torch

    torch.manual_seed(0)
    model = _gpt(examples).to(device)
    if dtype is not None:
        model = model.to(dtype)
    opt = _optimizer(model.parameters())
    for batch in _batches(steps, per_rank, world):
        batch = batch.to(device)
        loss = model(batch[:, :-1].contiguous(), batch[:, 1:].contiguous())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def data_parallel_worker(rank: int, world: int, out: str, port: int, examples: str, kind: str, steps: int) -> None:
    import torch

    dist = _init(rank, world, port)
    torch.manual_seed(0)
    model = _gpt(examples).to("mytorch")
    per_rank = 4 // world if world <= 4 else 1
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(model, bucket_cap_mb=0.05)  # several buckets
        params = wrapped.parameters()
    else:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        wrapped = fully_shard(model)
        params = model.parameters()
    opt = _optimizer(params)
    for batch in _batches(steps, per_rank, world):
        local = batch[rank * per_rank : (rank + 1) * per_rank].to("mytorch")
        loss = wrapped(local[:, :-1].contiguous(), local[:, 1:].contiguous())
        opt.zero_grad()
        loss.backward()
        opt.step()
    if kind == "ddp":
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    else:
        state = {k: v.full_tensor().detach().cpu() for k, v in model.state_dict().items()}
    if rank == 0:
        torch.save(state, os.path.join(out, "state.pt"))
    _write(out, rank, {"done": True})
    dist.destroy_process_group()


# --- benchmark: ProcessGroupMytorch against plain Gloo, same ranks ---------------------------------------


def bench_worker(
    rank: int, world: int, out: str, port: int, sizes: list, repeats: int, reference: str = "gloo"
) -> None:
    """Time per collective for each message size (bytes of the largest buffer, as nccl-tests counts): the
    reference backend (plain Gloo on CPU tensors, or ProcessGroupNCCL on CUDA tensors) and the mytorch
    backend with and without its agreement check, through the benchmark harness (mytorch.testing.bench):
    interleaved round by round. A sample repeats the call a number of times fixed by the message size (every
    rank must make the same calls, so it cannot be calibrated per rank): about 4 MiB moved per sample, at most
    64 calls. Rank 0 writes the per-call wall and CPU times of each variant."""
    import warnings

    import torch
    import torch.distributed as dist

    import mytorch  # noqa: F401
    from mytorch.testing.bench import measure

    warnings.filterwarnings("ignore", category=FutureWarning)  # *_into_tensor / *_tensor renames in torch 2.13
    ref_dev = "cpu" if reference == "gloo" else "cuda"
    if ref_dev == "cuda":
        torch.cuda.set_device(rank)
        torch.mytorch.set_device(rank)
    dist.init_process_group(
        f"{ref_dev}:{reference},mytorch:mytorch", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    os.environ["MYTORCH_DIST_CHECK"] = "0"
    unchecked = dist.new_group(backend="mytorch")
    os.environ["MYTORCH_DIST_CHECK"] = "1"
    checked = dist.new_group(backend="mytorch")
    os.environ.pop("MYTORCH_DIST_CHECK")
    variants = ((reference, ref_dev, None), ("mytorch", "mytorch", checked), ("mytorch_nocheck", "mytorch", unchecked))
    syncs = {
        "cpu": lambda: None,
        "cuda": torch.cuda.synchronize if ref_dev == "cuda" else None,
        "mytorch": torch.mytorch.synchronize,
    }
    results = []
    for nbytes in sizes:
        n = max(world, nbytes // 4 // world * world)  # float32 elements, divisible by the world size
        for coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            calls = {}
            for label, dev, group in variants:
                big = torch.ones(n, device=dev)
                part = torch.ones(n // world, device=dev)
                if coll == "all_reduce":
                    fn = lambda big=big, g=group: dist.all_reduce(big, group=g)  # noqa: E731
                elif coll == "all_to_all":
                    out_ = torch.empty(n, device=dev)
                    fn = lambda big=big, o=out_, g=group: dist.all_to_all_single(o, big, group=g)  # noqa: E731
                elif coll == "all_gather":
                    fn = lambda big=big, part=part, g=group: dist.all_gather_into_tensor(big, part, group=g)  # noqa: E731
                else:
                    fn = lambda big=big, part=part, g=group: dist.reduce_scatter_tensor(part, big, group=g)  # noqa: E731
                calls[label] = (fn, syncs[dev])
            stats = measure(calls, repeats, warmup=2, inner=max(1, min(64, (4 << 20) // (n * 4))))
            results.append(
                {
                    "bytes": n * 4,
                    "collective": coll,
                    "reference": reference,
                    "times": {label: {"wall": st.wall, "cpu": st.cpu} for label, st in stats.items()},
                }
            )
            del calls
    if rank == 0:
        _write(out, rank, {"results": results})
    dist.destroy_process_group()
