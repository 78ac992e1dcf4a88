"""Rank bodies of test/test_symm_mem.py: symmetric memory on mytorch (issue 51). Each asserts in its body against
the process group's result over Gloo on CPU tensors (the shared tolerance rule) and against the rank-ordered sum
the kernels promise bit for bit; a failing rank fails the launch (mytorch.testing._dist_workers.launch)."""

from __future__ import annotations

import functools
import os
import time

import torch

from mytorch.testing._compare import assert_aligned
from mytorch.testing._dist_workers import _init, _write

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _ordered_sum(parts: list, dtype: torch.dtype) -> torch.Tensor:
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    return functools.reduce(lambda a, b: a + b, [p.to(acc) for p in parts]).to(dtype)


def _gathered(dist, x: torch.Tensor) -> list:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return parts


def ops_worker(rank: int, world: int, out: str, port: int) -> None:
    """Every symm_mem operator, every dtype, against the process group (Gloo, CPU) and the rank-ordered sum."""
    dist = _init(rank, world, port, backend="cpu:gloo,mytorch:mytorch")
    import torch.distributed._symmetric_memory as symm_mem

    g = dist.group.WORLD.group_name
    ops = torch.ops.symm_mem
    gen = torch.Generator().manual_seed(100 + rank)
    for dtype in DTYPES:
        n = 1003 * world  # not a multiple of the chunks' alignment; divisible by world for reduce_scatter
        x = torch.randn(n, generator=gen).to(dtype)
        parts = _gathered(dist, x)
        exact = _ordered_sum(parts, dtype)
        ref = x.clone()
        dist.all_reduce(ref)
        buf = symm_mem.empty(n, dtype=dtype, device="mytorch")
        buf.copy_(x)
        got = ops.one_shot_all_reduce(buf, "sum", g).cpu()
        assert torch.equal(got, exact), f"one_shot_all_reduce {dtype}"
        assert_aligned(got, ref, _ordered_sum(parts, torch.float64), what=f"one_shot_all_reduce {dtype} vs Gloo")
        o = torch.empty(n, dtype=dtype, device="mytorch")
        assert torch.equal(ops.one_shot_all_reduce_out(buf, "sum", g, o).cpu(), exact)
        local = x[:500].to("mytorch")
        buf.zero_()
        got = ops.one_shot_all_reduce_copy(buf, local, "sum", g).cpu()
        assert torch.equal(got, exact[:500]), f"one_shot_all_reduce_copy {dtype}"
        buf.copy_(x)
        o2 = torch.empty(n, dtype=dtype, device="mytorch")
        assert torch.equal(ops.two_shot_all_reduce_out(buf, "sum", g, o2).cpu(), exact), f"two_shot_out {dtype}"
        buf.copy_(x)
        ops.two_shot_all_reduce_(buf, "sum", g)
        assert torch.equal(buf.cpu(), exact), f"two_shot_all_reduce_ {dtype}"
        # reduce_scatter, flat and along the last dimension
        buf.copy_(x)
        rs = torch.empty(n // world, dtype=dtype, device="mytorch")
        ops.reduce_scatter_out(buf, g, False, rs)
        assert torch.equal(rs.cpu(), exact.view(world, -1)[rank]), f"reduce_scatter_out {dtype}"
        m = symm_mem.empty(3, 4 * world, dtype=dtype, device="mytorch")
        xm = torch.randn(3, 4 * world, generator=gen).to(dtype)
        m.copy_(xm)
        rs2 = torch.empty(3, 4, dtype=dtype, device="mytorch")
        ops.reduce_scatter_out(m, g, True, rs2)
        exact_m = _ordered_sum(_gathered(dist, xm), dtype)
        assert torch.equal(rs2.cpu(), exact_m[:, 4 * rank : 4 * rank + 4]), f"reduce_scatter split_last_dim {dtype}"
    _all_to_alls(dist, symm_mem, g, rank, world, gen)
    flags = torch.zeros(4, dtype=torch.int32, device="mytorch")
    ops.stream_write_value32_(flags, 2, 7)
    ops.memset32_(flags, 0, 5, 2)
    assert flags.cpu().tolist() == [5, 5, 7, 0]
    _write(out, rank, {"ok": True})
    dist.destroy_process_group()


def _all_to_alls(dist, symm_mem, g, rank, world, gen) -> None:
    ops = torch.ops.symm_mem
    D = 5
    # all_to_all_vdev against the process group's all_to_all_single with the same splits
    splits = torch.randint(0, 6, (world,), generator=gen)
    rows = int(splits.sum())
    x = torch.randn(rows, D, generator=gen)
    out_splits = torch.empty_like(splits)
    dist.all_to_all_single(out_splits, splits)
    ref = torch.empty(int(out_splits.sum()), D)
    dist.all_to_all_single(ref, x, out_splits.tolist(), splits.tolist())
    cap = 6 * world
    inp = symm_mem.empty(cap, D, device="mytorch")
    inp[:rows].copy_(x)
    outp = symm_mem.empty(cap, D, device="mytorch")
    sp = symm_mem.empty(world, dtype=torch.int64, device="mytorch")
    sp.copy_(splits)
    so = symm_mem.empty(2, world, dtype=torch.int64, device="mytorch")
    ops.all_to_all_vdev(inp, outp, sp, so, g)
    so = so.cpu()
    assert torch.equal(so[0], out_splits), "all_to_all_vdev output splits"
    assert torch.equal(so[1], torch.cumsum(out_splits, 0) - out_splits), "all_to_all_vdev output offsets"
    assert torch.equal(outp[: ref.shape[0]].cpu(), ref), "all_to_all_vdev rows"
    # 2-D dispatch (rank-major in, expert-major out, major_align) then combine back: the round trip is the identity
    ne, align = 3, 4
    splits2 = torch.randint(0, 4, (world * ne,), generator=gen)
    rows2 = int(splits2.sum())
    x2 = torch.randn(rows2, D, generator=gen)
    cap2 = 4 * world * ne + align * ne
    inp2 = symm_mem.empty(cap2, D, device="mytorch")
    inp2[:rows2].copy_(x2)
    out2 = symm_mem.empty(cap2, D, device="mytorch")
    sp2 = symm_mem.empty(world * ne, dtype=torch.int64, device="mytorch")
    sp2.copy_(splits2)
    so2 = symm_mem.empty(2, world * ne, dtype=torch.int64, device="mytorch")
    ops.all_to_all_vdev_2d(inp2, out2, sp2, so2, g, major_align=align)
    allsplits = _gathered(dist, splits2)
    got = so2.cpu()
    starts = []
    at = 0
    for e in range(ne):
        seg = 0
        for s in range(world):
            want = int(allsplits[s][rank * ne + e])
            assert int(got[0, e * world + s]) == want, "all_to_all_vdev_2d splits"
            assert int(got[1, e * world + s]) == at + seg, "all_to_all_vdev_2d offsets"
            starts.append(at + seg)
            seg += want
        at += max(-(-seg // align) * align, align)
    # combine: the experts' rows (still at the dispatch offsets) go back to their sources in rank-major order
    iso = symm_mem.empty(2, ne * world, dtype=torch.int64, device="mytorch")
    iso.copy_(got)
    back = symm_mem.empty(cap2, D, device="mytorch")
    so3 = symm_mem.empty(2, world * ne, dtype=torch.int64, device="mytorch")
    ops.all_to_all_vdev_2d_offset(out2, back, iso, so3, g)
    assert torch.equal(so3.cpu()[0], splits2), "all_to_all_vdev_2d_offset splits"
    assert torch.equal(back[:rows2].cpu(), x2), "dispatch then combine is the identity"


def signal_worker(rank: int, world: int, out: str, port: int) -> None:
    """Barrier and signal ordering, with the negative control: without the barrier a peer's write is not seen."""
    dist = _init(rank, world, port)
    import torch.distributed._symmetric_memory as symm_mem

    g = dist.group.WORLD.group_name
    buf = symm_mem.empty(4, device="mytorch")
    buf.zero_()
    h = symm_mem.rendezvous(buf, g)
    h.barrier()
    seen = {}
    if rank == 1:
        time.sleep(0.5)
        buf.fill_(7.0)
        h.barrier(channel=1)
        h.barrier(channel=3)  # rank 0 has read the 7s
        buf.fill_(9.0)
        h.put_signal(0, channel=2)
    else:
        seen["without_barrier"] = h.get_buffer(1, (4,), torch.float32).cpu().tolist()
        h.barrier(channel=1)
        seen["after_barrier"] = h.get_buffer(1, (4,), torch.float32).cpu().tolist()
        h.barrier(channel=3)
        h.wait_signal(1, channel=2)
        seen["after_signal"] = h.get_buffer(1, (4,), torch.float32).cpu().tolist()
    seen["pads_zero"] = all(
        v == 0 for v in h.get_signal_pad(rank, (16,), dtype=torch.int32).cpu().tolist()
    )  # every exchange done: the pads are zero again
    _write(out, rank, seen)
    dist.destroy_process_group()


def exit_worker(rank: int, world: int, out: str, port: int) -> None:
    """Rank 1 exits after the rendezvous; the others' barrier must fail within the timeout, naming it."""
    dist = _init(rank, world, port, timeout_s=20)
    import torch.distributed._symmetric_memory as symm_mem

    g = dist.group.WORLD.group_name
    buf = symm_mem.empty(16, device="mytorch")
    h = symm_mem.rendezvous(buf, g)
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        h.barrier(timeout_ms=10000)
        torch.mytorch.synchronize()  # on a device the wait's error is raised at the next synchronisation
        err = None
    except RuntimeError as e:
        err = str(e)
    _write(out, rank, {"error": err, "seconds": time.monotonic() - start})
    os._exit(0)  # the group cannot be destroyed cleanly without rank 1


def memory_worker(rank: int, world: int, out: str, port: int) -> None:
    """Memory from symmetric memory counts in the device's statistics and is released when freed / destroyed."""
    import gc

    import mytorch  # noqa: F401

    before = torch.mytorch.memory_allocated()
    dist = _init(rank, world, port)
    import torch.distributed._symmetric_memory as symm_mem

    with_group = torch.mytorch.memory_allocated()
    buf = symm_mem.empty(1 << 18, device="mytorch")
    symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    with_buffer = torch.mytorch.memory_allocated()
    dist.all_reduce(torch.ones(8, device="mytorch"))
    del buf
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    gc.collect()
    _write(
        out,
        rank,
        {"before": before, "group": with_group, "buffer": with_buffer, "after": torch.mytorch.memory_allocated()},
    )


def tp_worker(rank: int, world: int, out: str, port: int) -> None:
    """Async TP: a tensor-parallel MLP with fused_all_gather_matmul and fused_matmul_reduce_scatter on mytorch
    tensors equals the same MLP with the process group's all_gather and reduce_scatter."""
    dist = _init(rank, world, port)
    import torch.distributed._symmetric_memory  # noqa: F401  (registers the ops; mytorch adapts them)
    import torch.distributed._functional_collectives as funcol

    g = dist.group.WORLD.group_name
    torch.manual_seed(0)
    S, D, H = 8 * world, 16, 32
    x = torch.randn(S, D)
    w1, w2 = torch.randn(D, H) / 4, torch.randn(H, D) / 4
    cols = slice(rank * H // world, (rank + 1) * H // world)
    x_shard = x.chunk(world)[rank].to("mytorch")
    w1s, w2s = w1[:, cols].contiguous().to("mytorch"), w2[cols, :].contiguous().to("mytorch")
    ag, (h,) = torch.ops.symm_mem.fused_all_gather_matmul(x_shard, [w1s], 0, g)
    y = torch.ops.symm_mem.fused_matmul_reduce_scatter(torch.relu(h), w2s, "sum", 0, g)
    full = funcol.wait_tensor(funcol.all_gather_tensor(x_shard, 0, g))
    y_ref = funcol.wait_tensor(funcol.reduce_scatter_tensor(torch.relu(full @ w1s) @ w2s, "sum", 0, g))
    assert torch.equal(ag.cpu(), x), "the gathered A"
    assert_aligned(h.cpu(), (full @ w1s).cpu(), what="fused_all_gather_matmul")
    assert_aligned(y.cpu(), y_ref.cpu(), what="fused_matmul_reduce_scatter")
    assert_aligned(y.cpu(), (torch.relu(x @ w1) @ w2).chunk(world)[rank], what="the MLP against one process")
    _write(out, rank, {"ok": True})
    dist.destroy_process_group()


def path_worker(rank: int, world: int, out: str, port: int) -> None:
    """The process group's intra-host collectives (every size through the workspace, several rounds above it)
    against Gloo on CPU tensors and the rank-ordered sum; MYTORCH_DIST_SYMM_MEM=0 keeps Gloo."""
    dist = _init(rank, world, port, backend="cpu:gloo,mytorch:mytorch")
    import mytorch

    paths = {"default": mytorch.distributed.data_path(None, 1 << 20)}
    gen = torch.Generator().manual_seed(7 + rank)
    for n in (5 * world, 40000 * world, (3 << 20) + 4 * world):  # one-shot, two-shot, several 8 MiB rounds
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(n, generator=gen).to(dtype)
            parts = _gathered(dist, x)
            d = x.to("mytorch")
            dist.all_reduce(d)
            if paths["default"] == "symmetric-memory":  # its promise; NCCL's reduction order is NCCL's
                assert torch.equal(d.cpu(), _ordered_sum(parts, dtype)), f"all_reduce {n} {dtype}"
            ref = x.clone()
            dist.all_reduce(ref)
            gold = _ordered_sum(parts, torch.float64)  # Gloo rounds every step in the dtype; the kernels once
            assert_aligned(d.cpu(), ref, gold, what=f"all_reduce {n} {dtype} vs Gloo")
            ag = torch.empty(n * world, dtype=dtype, device="mytorch")
            dist.all_gather_into_tensor(ag, x.to("mytorch"))
            assert torch.equal(ag.cpu(), torch.cat(parts)), f"all_gather {n}"
            rs = torch.empty(n // world, dtype=dtype, device="mytorch")
            dist.reduce_scatter_tensor(rs, x.to("mytorch"))
            want = _ordered_sum([p.view(world, -1)[rank] for p in parts], dtype)
            if paths["default"] == "symmetric-memory":
                assert torch.equal(rs.cpu(), want), f"reduce_scatter {n} {dtype}"
            assert_aligned(
                rs.cpu(),
                want,
                _ordered_sum([p.view(world, -1)[rank] for p in parts], torch.float64),
                what=f"reduce_scatter {n} {dtype}",
            )
        splits = [((rank + r) * (n // world // 3)) % (n // world) for r in range(world)]
        out_splits = torch.empty(world, dtype=torch.int64)
        dist.all_to_all_single(out_splits, torch.tensor(splits))
        x = torch.randn(sum(splits), generator=gen)
        ref = torch.empty(int(out_splits.sum()))
        dist.all_to_all_single(ref, x, out_splits.tolist(), splits)
        got = torch.empty(int(out_splits.sum()), device="mytorch")
        dist.all_to_all_single(got, x.to("mytorch"), out_splits.tolist(), splits)
        assert torch.equal(got.cpu(), ref), f"all_to_all_single {n}"
    avg = torch.full((6,), float(rank + 1), device="mytorch")
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    assert torch.allclose(avg.cpu(), torch.full((6,), (world + 1) / 2))
    mx = torch.full((3,), rank, dtype=torch.int32, device="mytorch")  # not the workspace's: Gloo's
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    assert mx.cpu().tolist() == [world - 1] * 3
    os.environ["MYTORCH_DIST_SYMM_MEM"] = "0"
    gloo = dist.new_group(backend="mytorch")
    os.environ.pop("MYTORCH_DIST_SYMM_MEM")
    paths["off"] = mytorch.distributed.data_path(gloo, 1 << 20)
    _write(out, rank, paths)
    dist.destroy_process_group()


def _imported_files() -> int:
    """Mappings of other processes' sim memory files in this process (Note [Direct all_to_all reads])."""
    with open("/proc/self/maps") as f:
        return sum("mytorch-sim-ipc" in line for line in f)


def direct_worker(rank: int, world: int, out: str, port: int) -> None:
    """all_to_all_single's direct reads (2 ranks, sim): a pair of 256 KiB or more is read from the source's segment
    (one more memory-file mapping here, visible in /proc/self/maps; a small pair maps nothing), from an input at an
    offset in its segment; more distinct source segments than the cache holds stay bounded and correct; the
    source may overwrite its input once the call returns; disagreeing splits raise on the reading rank, and the
    group keeps working; destroying the group closes the mappings."""
    dist = _init(rank, world, port, backend="cpu:gloo,mytorch:mytorch", timeout_s=30)
    import mytorch  # noqa: F401

    gen = torch.Generator().manual_seed(11 + rank)

    def check(x: torch.Tensor, splits: list, what: str, group=None) -> None:
        out_splits = torch.empty(world, dtype=torch.int64)
        dist.all_to_all_single(out_splits, torch.tensor(splits))
        ref = torch.empty(int(out_splits.sum()))
        dist.all_to_all_single(ref, x.cpu(), out_splits.tolist(), splits)
        got = torch.empty(int(out_splits.sum()), device="mytorch")
        dist.all_to_all_single(got, x, out_splits.tolist(), splits, group=group)
        assert torch.equal(got.cpu(), ref), what

    base = _imported_files()
    check(torch.randn(2 * 1000, generator=gen).to("mytorch"), [1000, 1000], "small pairs")
    small = _imported_files()
    big = torch.randn(3 + 2 * 70000, generator=gen).to("mytorch")[3:]  # 280 KB pairs, 12 bytes into the block
    check(big, [70000, 70000], "direct pairs")
    direct = _imported_files()
    check(big, [70000, 70000], "the same segment again")
    again = _imported_files()
    # 12 MB each, above the size the allocator packs into shared 20 MiB segments: one segment each
    inputs = [torch.randn(2 * 70000 + (11 << 18), generator=gen).to("mytorch") for _ in range(20)]
    for i, x in enumerate(inputs):
        check(x[: 2 * 70000], [70000, 70000], f"segment {i}")
    check(inputs[0][: 2 * 70000], [70000, 70000], "an evicted segment mapped again")
    many = _imported_files()
    x = torch.randn(2 * 70000, generator=gen).to("mytorch")
    want = x.clone()
    got = torch.empty(2 * 70000, device="mytorch")
    dist.all_to_all_single(got, x)
    x.fill_(float("nan"))  # at once: the peer has read it
    parts = _gathered(dist, want.cpu())
    assert torch.equal(got.cpu(), torch.cat([p.view(2, -1)[rank] for p in parts])), "input overwritten after return"
    error = None
    try:  # rank 1 expects fewer bytes from rank 0 than rank 0 sends (no agreement check on this group)
        os.environ["MYTORCH_DIST_CHECK"] = "0"
        g = dist.new_group(backend="mytorch")
        os.environ.pop("MYTORCH_DIST_CHECK")
        recv = [70000, 70000] if rank == 0 else [65000, 70000]
        dist.all_to_all_single(torch.empty(sum(recv), device="mytorch"), big, recv, [70000, 70000], group=g)
    except RuntimeError as e:
        error = str(e)
    assert (error is None) == (rank == 0), error
    assert rank == 0 or "split sizes disagree" in error, error
    check(big, [70000, 70000], "the group after the error", group=g)
    dist.destroy_process_group()
    _write(
        out,
        rank,
        {"base": base, "small": small, "direct": direct, "again": again, "many": many, "after": _imported_files()},
    )
