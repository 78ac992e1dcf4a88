"""Rank programs for the NCCL path of the process group (test/test_nccl_path.py): on the emulated build they run
through the emulated NCCL (kernels/emu/nccl.cpp), on GPUs through NCCL. Each writes what it saw to
``<out>/rank<r>.json``; the test asserts against host references computed here from every rank's inputs."""

from __future__ import annotations

import os
import time
import traceback

from mytorch.testing._dist_workers import _init, _write

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool", "float8_e4m3fn"]


def _inputs(rank: int, n: int, dtype, salt: int = 0):
    import torch

    g = torch.Generator().manual_seed(1000 * salt + rank)
    v = torch.randint(0, 3, (n,), generator=g)
    return v.bool() if dtype == torch.bool else v.to(dtype)


def _fail(failures, name, got, want):
    import torch

    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape:
        failures.append(f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
    elif not torch.equal(
        got.double() if got.dtype != torch.bool else got, want.double() if want.dtype != torch.bool else want
    ):
        failures.append(f"{name}: got {got.flatten()[:6].tolist()}, want {want.flatten()[:6].tolist()}")


def collectives_worker(rank: int, world: int, out: str, port: int) -> None:
    """Every collective x dtype x op, in place and out of place, against the host reference; sizes that cross
    the emulated NCCL's chunks; uneven all_to_all; coalesced calls (one NCCL group)."""
    import torch

    import mytorch

    dist = _init(rank, world, port)
    failures: list[str] = []
    ran = 0
    path = mytorch.distributed.data_path(nbytes=4)
    for dname in DTYPES:
        dt = getattr(torch, dname)
        for n in (5, 70_001):  # one chunk; several (the emulated NCCL's slots hold 256 KiB)
            vals = [_inputs(r, n, dt) for r in range(world)]
            wide = torch.stack([v.double() if dt != torch.bool else v for v in vals])
            ops = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "MIN": dist.ReduceOp.MIN}
            if dt != torch.bool:
                ops["PRODUCT"] = dist.ReduceOp.PRODUCT
            if dt.is_floating_point and not dname.startswith("float8"):
                ops["AVG"] = dist.ReduceOp.AVG
            try:
                for oname, op in ops.items():
                    if dt == torch.bool:
                        want = wide.any(0) if oname in ("SUM", "MAX") else wide.all(0)
                    else:
                        red = {"SUM": wide.sum(0), "MAX": wide.amax(0), "MIN": wide.amin(0), "PRODUCT": wide.prod(0)}
                        want = (red["SUM"] / world if oname == "AVG" else red[oname]).to(dt)
                    t = vals[rank].to("mytorch")
                    dist.all_reduce(t, op=op)  # in place
                    _fail(failures, f"all_reduce[{dname},{n},{oname}]", t, want)
                    r = vals[rank].to("mytorch")
                    dist.reduce(r, dst=world - 1, op=op)
                    if rank == world - 1:
                        _fail(failures, f"reduce[{dname},{n},{oname}]", r, want)
                    ran += 2
                if dt.is_floating_point and not dname.startswith("float8"):
                    t = vals[rank].to("mytorch")
                    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
                    _fail(failures, f"all_reduce[{dname},{n},PREMUL_SUM]", t, (wide * 0.5).sum(0).to(dt))
                    ran += 1
                for root in range(world):
                    b = vals[rank].to("mytorch")
                    dist.broadcast(b, src=root)
                    _fail(failures, f"broadcast[{dname},{n},root={root}]", b, vals[root])
                    ran += 1
                # all_gather out of place, and in place (the input a view of the output)
                o = torch.empty(world * n, dtype=dt, device="mytorch")
                dist.all_gather_into_tensor(o, vals[rank].to("mytorch"))
                _fail(failures, f"all_gather[{dname},{n}]", o, torch.cat(vals))
                o2 = torch.zeros(world * n, dtype=dt, device="mytorch")
                o2[rank * n : (rank + 1) * n].copy_(vals[rank].to("mytorch"))
                dist.all_gather_into_tensor(o2, o2[rank * n : (rank + 1) * n])
                _fail(failures, f"all_gather_in_place[{dname},{n}]", o2, torch.cat(vals))
                ran += 2
                if dt != torch.bool:
                    big = [_inputs(r, world * n, dt, salt=1) for r in range(world)]
                    stack = torch.stack([b.double() for b in big]).sum(0).to(dt)
                    rs = torch.empty(n, dtype=dt, device="mytorch")
                    dist.reduce_scatter_tensor(rs, big[rank].to("mytorch"))
                    _fail(failures, f"reduce_scatter[{dname},{n}]", rs, stack[rank * n : (rank + 1) * n])
                    ran += 1
            except Exception as e:  # noqa: BLE001 - reported per dtype
                failures.append(f"{dname},{n}: {type(e).__name__}: {e}\n{traceback.format_exc()[-600:]}")
    # uneven all_to_all: rank r sends (r + j + 1) rows of 3 to rank j
    rows = [[r + j + 1 for j in range(world)] for r in range(world)]
    src = torch.arange(sum(rows[rank]) * 3, dtype=torch.float32).reshape(-1, 3) + 100 * rank
    out_rows = [rows[j][rank] for j in range(world)]
    got = torch.empty(sum(out_rows), 3, device="mytorch")
    dist.all_to_all_single(got, src.to("mytorch"), out_rows, rows[rank])
    pieces = []
    for j in range(world):
        theirs = torch.arange(sum(rows[j]) * 3, dtype=torch.float32).reshape(-1, 3) + 100 * j
        start = sum(rows[j][:rank])
        pieces.append(theirs[start : start + rows[j][rank]])
    _fail(failures, "all_to_all_single[uneven]", got, torch.cat(pieces))
    # coalesced: several collectives of one group in one NCCL group
    ts = [torch.full((k + 1,), float(rank + k), device="mytorch") for k in range(3)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for k, t in enumerate(ts):
        _fail(failures, f"coalesced[{k}]", t, torch.full((k + 1,), float(sum(range(world)) + world * k)))
    ran += 4
    _write(out, rank, {"failures": failures, "ran": ran, "path": path})
    dist.destroy_process_group()


def p2p_worker(rank: int, world: int, out: str, port: int, order: str) -> None:
    """A ring of batch_isend_irecv, sends posted first or receives first, and a message larger than a transfer
    buffer; then the same pair of calls ungrouped, in the order that deadlocks on NCCL (the negative control)."""
    import torch

    os.environ["MYTORCH_DIST_BLOCKING_WAIT"] = "1"
    dist = _init(rank, world, port, timeout_s=6)
    seen: dict = {}
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for n in (7, 300_000):
        send = torch.arange(n, dtype=torch.float32, device="mytorch") + 1000 * rank
        recv = torch.empty(n, device="mytorch")
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
        if order == "recv_first":
            ops.reverse()
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        want = torch.arange(n, dtype=torch.float32) + 1000 * prv
        seen[f"ring{n}"] = bool(torch.equal(recv.cpu(), want))
    if world == 2:
        peer = 1 - rank
        a, b = torch.ones(5, device="mytorch"), torch.empty(5, device="mytorch")
        start = time.monotonic()
        try:
            dist.send(a, peer)  # both ranks send first: NCCL's send waits for a receive that is never posted
            dist.recv(b, peer)
            seen["deadlock"] = "no error"
        except Exception as e:  # noqa: BLE001 - the test asserts on the text
            seen["deadlock"] = f"{type(e).__name__}: {e}"
        seen["elapsed"] = time.monotonic() - start
    _write(out, rank, seen)
    if world == 2:
        # Both ranks time out at about the same moment. A rank that exits at once can make its peer's communicator
        # report "remote process exited" before the peer's own timeout fires, so each waits (bounded) for the
        # other's report before leaving.
        peer_file = os.path.join(out, f"rank{1 - rank}.json")
        deadline = time.monotonic() + 30
        while not os.path.exists(peer_file) and time.monotonic() < deadline:
            time.sleep(0.05)
    os._exit(0)  # after the negative control the group is broken


def p2p_mismatch_worker(rank: int, world: int, out: str, port: int) -> None:
    """Rank 0 sends 8 floats, rank 1 receives 4: NCCL has no size header (it would corrupt or hang); the emulated
    NCCL fails the communicator for both, naming the sizes."""
    import torch

    os.environ["MYTORCH_DIST_BLOCKING_WAIT"] = "1"
    dist = _init(rank, world, port, timeout_s=6)
    seen: dict = {}
    try:
        if rank == 0:
            dist.send(torch.ones(8, device="mytorch"), 1)
        else:
            dist.recv(torch.empty(4, device="mytorch"), 0)
        dist.all_reduce(torch.ones(2, device="mytorch"))
        seen["error"] = None
    except Exception as e:  # noqa: BLE001
        seen["error"] = f"{type(e).__name__}: {e}"
    _write(out, rank, seen)
    os._exit(0)


def fault_worker(rank: int, world: int, out: str, port: int, fault: str) -> None:
    """MYTORCH_EMU_NCCL_FAULT on the last rank: its third NCCL task hangs, fails or ends the process."""
    import torch

    if rank == world - 1:
        os.environ["MYTORCH_EMU_NCCL_FAULT"] = f"{fault}@3"
    os.environ["MYTORCH_DIST_BLOCKING_WAIT"] = "1"
    timeout_s = 5.0
    dist = _init(rank, world, port, timeout_s=timeout_s)
    t = torch.ones(1000, device="mytorch")
    error, start = None, time.monotonic()
    try:
        for _ in range(6):
            dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    _write(out, rank, {"error": error, "elapsed": time.monotonic() - start})
    os._exit(0)


def destroy_pending_worker(rank: int, world: int, out: str, port: int) -> None:
    """Rank 0 destroys the group with an all_reduce pending (rank 1 has not called it): destroy returns, the work
    fails naming why, and rank 1's later all_reduce fails within the timeout instead of hanging."""
    import torch

    os.environ["MYTORCH_DIST_BLOCKING_WAIT"] = "1"
    dist = _init(rank, world, port, timeout_s=6)
    t = torch.ones(8, device="mytorch")
    dist.all_reduce(t)  # the communicator is up
    seen: dict = {}
    start = time.monotonic()
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)
        dist.destroy_process_group()
        seen["destroyed_in"] = time.monotonic() - start
        try:
            work.wait()
            seen["work"] = "no error"
        except Exception as e:  # noqa: BLE001
            seen["work"] = f"{type(e).__name__}: {e}"
    else:
        time.sleep(1.0)
        try:
            dist.all_reduce(t)
            seen["later"] = "no error"
        except Exception as e:  # noqa: BLE001
            seen["later"] = f"{type(e).__name__}: {e}"
        seen["elapsed"] = time.monotonic() - start
    _write(out, rank, seen)
    os._exit(0)


def split_worker(rank: int, world: int, out: str, port: int) -> None:
    """Subgroups split from the default group's communicator (the default group bound to a device): split_group,
    new_group (members split, the others take part with no color) and a 2 x 2 DeviceMesh."""
    import datetime

    import torch
    import torch.distributed as dist

    import mytorch  # noqa: F401

    dist.init_process_group(
        "mytorch",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
        device_id=torch.device("mytorch:0"),
    )
    seen: dict = {}
    halves = dist.split_group(split_ranks=[list(range(world // 2)), list(range(world // 2, world))])
    t = torch.full((3,), float(rank), device="mytorch")
    dist.all_reduce(t, group=halves)
    mine = range(world // 2) if rank < world // 2 else range(world // 2, world)
    seen["halves"] = t.cpu().tolist() == [float(sum(mine))] * 3
    evens = dist.new_group(ranks=list(range(0, world, 2)))
    e = torch.full((2,), float(rank), device="mytorch")
    if rank % 2 == 0:
        dist.all_reduce(e, group=evens)
        seen["evens"] = e.cpu().tolist() == [float(sum(range(0, world, 2)))] * 2
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("mytorch", (2, world // 2), mesh_dim_names=("dp", "tp"))
    for dim in ("dp", "tp"):
        g = mesh.get_group(dim)
        x = torch.full((2,), float(rank), device="mytorch")
        dist.all_reduce(x, group=g)
        want = float(sum(dist.get_process_group_ranks(g)))
        seen[dim] = x.cpu().tolist() == [want] * 2
    seen["uses_nccl"] = halves._get_backend(torch.device("mytorch")).uses_nccl
    _write(out, rank, seen)
    dist.destroy_process_group()


# --- parallelisms on the NCCL path, each against one process (float32 on mytorch) and the float64 CPU gold ----


def _mlp(seed: int = 0):
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))


def _batch(n: int = 8):
    import torch

    g = torch.Generator().manual_seed(7)
    return torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)


def _one_process(step, device, dtype):
    """The reference: `step(model, x, y)` on one model in one process; returns the parameters after it."""
    model = _mlp().to(device=device, dtype=dtype)
    x, y = (t.to(device=device, dtype=dtype) for t in _batch())
    step(model, x, y)
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _sgd_step(model, x, y):
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    opt.step()


def _save(out: str, rank: int, got: dict, step) -> None:
    import torch

    if rank == 0:
        want = _one_process(step, "mytorch", torch.float32)
        gold = _one_process(step, "cpu", torch.float64)
        torch.save({"got": got, "want": want, "gold": gold}, os.path.join(out, "state.pt"))


def tensor_parallel_worker(rank: int, world: int, out: str, port: int, mesh_2d: bool) -> None:
    """Tensor parallelism (colwise then rowwise) over all ranks, or a 2 x 2 mesh: FSDP2 over `dp`, TP over `tp`,
    each dp rank on its half of the batch. One SGD step; the full parameters compared with one process."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dist = _init(rank, world, port)
    model = _mlp().to("mytorch")
    x, y = (t.to("mytorch") for t in _batch())
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}
    if mesh_2d:
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("mytorch", (2, world // 2), mesh_dim_names=("dp", "tp"))
        parallelize_module(model, mesh["tp"], plan)
        fully_shard(model, mesh=mesh["dp"])
        d = mesh["dp"].get_local_rank()
        half = x.shape[0] // 2
        x, y = x[d * half : (d + 1) * half], y[d * half : (d + 1) * half]
    else:
        mesh = init_device_mesh("mytorch", (world,))
        parallelize_module(model, mesh, plan)
    _sgd_step(model, x, y)
    got = {k: v.full_tensor().detach().cpu() for k, v in model.state_dict().items()}
    _save(out, rank, got, _sgd_step)
    dist.destroy_process_group()


def _microbatch_step(model, x, y, chunks: int = 4):
    """What a pipeline schedule computes: per microbatch a mean-squared loss, gradients averaged over the
    microbatches (the schedules' scale_grads)."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xs, ys in zip(x.chunk(chunks), y.chunk(chunks)):
        (torch.nn.functional.mse_loss(model(xs), ys) / chunks).backward()
    opt.step()


def pipeline_worker(rank: int, world: int, out: str, port: int, schedule: str) -> None:
    """Two pipeline stages (one Linear+ReLU, one Linear) with GPipe or 1F1B over 4 microbatches: their point-to-point
    goes through batch_isend_irecv (one NCCL group per exchange). One SGD step, compared with one process."""
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    dist = _init(rank, world, port)
    full = _mlp().to("mytorch")
    stage_mod = torch.nn.Sequential(full[0], full[1]) if rank == 0 else torch.nn.Sequential(full[2])
    stage = PipelineStage(stage_mod, rank, world, torch.device("mytorch", 0))
    kind = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
    sched = kind(stage, n_microbatches=4, loss_fn=torch.nn.functional.mse_loss)
    x, y = (t.to("mytorch") for t in _batch())
    opt = torch.optim.SGD(stage_mod.parameters(), lr=0.1)
    if rank == 0:
        sched.step(x)
    else:
        sched.step(target=y)
    opt.step()
    mine = {k: v.detach().cpu() for k, v in full.state_dict().items() if k.startswith("0." if rank == 0 else "2.")}
    parts = [None] * world
    dist.all_gather_object(parts, mine)
    got = {k: v for p in parts for k, v in p.items()}
    _save(out, rank, got, _microbatch_step)
    dist.destroy_process_group()
