"""The NCCL path of the mytorch process group on one GPU (world size 1: NCCL cannot put two ranks on one
device), against the same collectives of stock ProcessGroupNCCL on torch.cuda. Marked `gpu`."""

import pytest
import torch
import torch.distributed as dist

import mytorch
from mytorch.testing import _dist_workers as W

pytestmark = [pytest.mark.gpu, pytest.mark.hardware]  # NCCL: nothing to emulate it with


@pytest.fixture
def groups():
    port = W.free_port()
    dist.init_process_group("cuda:nccl,mytorch:mytorch", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield dist.distributed_c10d._get_default_group()
    finally:
        dist.destroy_process_group()


def test_nccl_path_is_live(groups):
    backend = groups._get_backend(torch.device("mytorch"))
    assert backend.uses_nccl
    assert mytorch.distributed.nccl_version() > 0


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8, torch.bool]
)
def test_collectives_match_process_group_nccl(groups, dtype):
    g = torch.Generator().manual_seed(0)
    base = (torch.randint(0, 4, (4097,), generator=g)).to(dtype)
    for op in [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN] + (
        [dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT] if dtype != torch.bool else []
    ):
        a, b = base.to("mytorch"), base.cuda()
        dist.all_reduce(a, op=op)
        dist.all_reduce(b, op=op)
        assert torch.equal(a.cpu(), b.cpu()), (dtype, op)
    a, b = base.to("mytorch"), base.cuda()
    dist.broadcast(a, 0)
    dist.broadcast(b, 0)
    assert torch.equal(a.cpu(), b.cpu())
    out_a, out_b = torch.empty_like(base, device="mytorch"), torch.empty_like(base, device="cuda")
    dist.all_gather_into_tensor(out_a, base.to("mytorch"))
    dist.all_gather_into_tensor(out_b, base.cuda())
    assert torch.equal(out_a.cpu(), out_b.cpu())
    y = torch.empty_like(base, device="mytorch")
    dist.all_to_all_single(y, base.to("mytorch"))
    assert torch.equal(y.cpu(), base)
    dist.barrier()


def test_stream_order_and_future(groups):
    x = torch.ones(1 << 20, device="mytorch")
    s = torch.mytorch.Stream()
    with torch.mytorch.stream(s):
        x.mul_(3)  # queued on a side stream
        w = dist.all_reduce(x, async_op=True)
        w.wait()  # orders this stream after the collective
        y = x + 1
    assert torch.equal(y.cpu(), torch.full((1 << 20,), 4.0))
    fut = dist.all_reduce(torch.ones(8, device="mytorch"), async_op=True).get_future()
    assert torch.equal(fut.wait()[0].cpu(), torch.ones(8))


def test_ddp_on_the_gpu_runs(groups):
    model = torch.nn.Linear(64, 64).to("mytorch")
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    loss = ddp(torch.randn(8, 64, device="mytorch")).square().mean()
    loss.backward()
    assert model.weight.grad is not None and torch.isfinite(model.weight.grad.cpu()).all()


def test_a_rank_that_never_arrives_raises_after_the_timeout():
    """Note [Communicator setup and the timeout]: rank 1 joins the group but never calls a collective, so
    ncclCommInitRank on rank 0 cannot finish; rank 0 must raise after the group's timeout (5 s here), not hang.
    (Both ranks share the one GPU: rank 1 never creates an NCCL communicator.)"""
    import subprocess
    import sys
    import textwrap
    import time

    port = W.free_port()
    code = textwrap.dedent(f"""
        import sys, time, datetime, torch, torch.distributed as dist, mytorch
        rank = int(sys.argv[1])
        dist.init_process_group("mytorch", init_method="tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=5))
        if rank == 1:
            time.sleep(40)
            raise SystemExit(0)
        start = time.time()
        try:
            dist.all_reduce(torch.ones(4, device="mytorch"))
        except Exception as e:
            print("raised after", round(time.time() - start, 1), type(e).__name__, str(e)[:300])
            raise SystemExit(0)
        print("no error")
    """)
    env = dict(__import__("os").environ, MYTORCH_RUNTIME="cuda")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for r in (0, 1)
    ]
    start = time.time()
    out, err = procs[0].communicate(timeout=60)
    procs[1].kill()
    assert "raised after" in out and "within the timeout" in out, out + err[-2000:]
    assert time.time() - start < 40
