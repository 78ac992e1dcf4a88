"""The mytorch c10d backend on 2 and 4 ranks of this machine (sim: Gloo over views of device memory).

Each test spawns its ranks (python/mytorch/testing/_dist_workers.py), which write what they saw to JSON;
assertions happen here against the mathematically expected results and single-process training.
"""

import functools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import mytorch
from mytorch.testing import _dist_workers as W
from mytorch.testing._compare import assert_aligned

EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")

pytestmark = pytest.mark.skipif(not mytorch.distributed.is_available(), reason="torch.distributed with Gloo needed")


def results(out, world):
    return [json.loads((Path(out) / f"rank{r}.json").read_text()) for r in range(world)]


def test_the_launcher_kills_ranks_that_outlive_its_timeout(tmp_path):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="2 ranks did not all end within 3 s"):
        W.launch(W.sleep_worker, 2, str(tmp_path), 120.0, timeout_s=3)
    assert time.monotonic() - start < 60


def test_registered_for_the_device():
    assert "mytorch" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["mytorch"] == "mytorch"
    assert dist.Backend.backend_capability["mytorch"] == ["mytorch"]


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_and_dtype(world, tmp_path):
    W.launch(W.collectives_worker, world, str(tmp_path), W.free_port())
    for r, res in enumerate(results(tmp_path, world)):
        assert res["failures"] == [], f"rank {r}: " + "\n".join(res["failures"])
        # each dtype ran every collective (a silent early exit would shrink this)
        assert res["ran"] >= len(W.DTYPES) * 20, res["ran"]


def test_mismatches_raise_clear_errors_on_every_rank(tmp_path):
    W.launch(W.mismatch_worker, 2, str(tmp_path), W.free_port())
    for res in results(tmp_path, 2):
        seen = res["seen"]
        assert (
            "element counts differ" in seen["shape"] and "Float[4]" in seen["shape"] and "Float[8]" in seen["shape"]
        ), seen["shape"]
        assert "dtypes differ" in seen["dtype"], seen["dtype"]
        assert "not every rank called" in seen["collective"], seen["collective"]
        assert "roots differ" in seen["root"], seen["root"]
        assert "which expects" in seen["splits"], seen["splits"]
        # torch routes by device before any backend sees the call, and says so
        assert "No backend type associated with device type cpu" in seen["cpu_tensor"], seen["cpu_tensor"]
        assert "contiguous" in seen["non_contiguous"], seen["non_contiguous"]
        # the group still works after every refused call
        assert seen["after"] == "no error" and res["after"] == [3.0] * 4
    if results(tmp_path, 2)[0]["nccl"]:
        return  # point-to-point sizes on the NCCL path: test/test_nccl_path.py
    # the receiver is told what arrived; the sender's message was drained, so it finished
    assert "sent 8 elements" in results(tmp_path, 2)[1]["seen"]["p2p"]
    assert results(tmp_path, 2)[0]["seen"]["p2p"] == "no error"


def test_functional_collectives_and_dtensor(tmp_path):
    W.launch(W.functional_worker, 2, str(tmp_path), W.free_port())
    for r, res in enumerate(results(tmp_path, 2)):
        assert res["reduced"] == [3.0] * 4
        assert res["gathered"] == [1.0] * 4 + [2.0] * 4
        assert res["local"] == [2.0 * r, 2.0 * r + 1]
        assert res["doubled"] == [2.0 * i for i in range(4)]


def test_ranks_must_agree_on_checking(tmp_path):
    W.launch(W.check_setting_worker, 2, str(tmp_path), W.free_port())
    for res in results(tmp_path, 2):
        assert res["error"] and "MYTORCH_DIST_CHECK is" in res["error"] and "same way on every rank" in res["error"], (
            res
        )


def test_torch_debug_detail_wraps_the_backend(tmp_path, monkeypatch):
    # torch's own checker instead of ours: the children read both variables when they start
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    monkeypatch.setenv("MYTORCH_DIST_CHECK", "0")
    W.launch(W.debug_detail_worker, 2, str(tmp_path), W.free_port())
    for res in results(tmp_path, 2):
        assert res["first"] == [2.0] * 4
        assert res["error"] and "Detected mismatch between collectives" in res["error"], res["error"]


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("how", ["exit", "hang"])
def test_dead_rank_makes_the_others_raise_within_the_timeout(how, check, tmp_path):
    timeout_s = 10.0 if how == "exit" else 4.0
    start = time.monotonic()
    try:
        W.launch(W.dead_rank_worker, 3, str(tmp_path), W.free_port(), timeout_s, how, check)
    except Exception:  # noqa: BLE001 - the dead rank's exit is reported by the launcher; the survivor's file counts
        pass
    for r in range(2):  # every survivor
        res = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert res["error"] is not None, f"rank {r} did not raise"
        # named: the collective, the rank, the sizes
        assert f"mytorch allreduce (rank {r} of 3" in res["error"] and "Float[1024]" in res["error"], res["error"]
        assert res["elapsed"] < timeout_s + 5, res
    assert time.monotonic() - start < 120


@pytest.mark.parametrize("backend", ["cpu:gloo,mytorch:mytorch", None])
def test_cpu_gloo_and_mytorch_in_one_group(backend, tmp_path):
    world = 4 if backend is None else 2
    W.launch(W.mixed_backend_worker, world, str(tmp_path), W.free_port(), backend)
    for r, res in enumerate(results(tmp_path, world)):
        total = float(world * (world + 1) // 2)
        assert res["mytorch"] == [total] * 3
        assert res["cpu"] == ([total] * 3 if backend else [float(r + 1)] * 3)
        assert res["backend"] == "ProcessGroupMytorch"
        # the subgroup of even ranks summed 0 + 2 (+ ...), the odd ranks kept theirs
        assert res["evens"] == ([float(sum(range(0, world, 2)))] * 2 if r % 2 == 0 else [float(r)] * 2)
        assert res["objects"] == [{"rank": i, "tag": "x" * i} for i in range(world)]
        assert res["box"] == [{"from": 0}]


@functools.lru_cache(maxsize=None)
def _golden_training(steps, world):
    """The one-process run in float64 on the CPU: the golden values of the comparison."""
    return W.reference_training(EXAMPLES, steps, per_rank=4 // world, world=world, device="cpu", dtype=torch.float64)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("kind", ["ddp", "fsdp2"])
def test_data_parallel_training_matches_one_process(kind, world, tmp_path):
    # The emulated build (the NCCL path under ASan) runs every kernel on the CPU: fewer steps, the same comparison.
    steps = 20 if torch.mytorch.runtime() == "sim" else 4
    W.launch(W.data_parallel_worker, world, str(tmp_path), W.free_port(), EXAMPLES, kind, steps)
    got = torch.load(tmp_path / "state.pt")
    # the same 4 sequences per step, split across the ranks or taken whole by one process
    want = W.reference_training(EXAMPLES, steps, per_rank=4 // world, world=world)
    gold = _golden_training(steps, world)
    assert got.keys() == want.keys()
    for k in want:
        assert_aligned(got[k], want[k], gold[k], f"{kind} {k}")
    # training moved the weights: the comparison is not between two copies of the initialisation
    torch.manual_seed(0)
    init = W._gpt(EXAMPLES).state_dict()
    assert not torch.allclose(init["head.weight"], want["head.weight"])


def test_torchrun_launch(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent("""
        import os, torch, torch.distributed as dist
        import mytorch
        dist.init_process_group("mytorch")
        rank, world = dist.get_rank(), dist.get_world_size()
        t = torch.full((4,), float(rank + 1), device="mytorch")
        dist.all_reduce(t)
        assert t.cpu().tolist() == [world * (world + 1) / 2] * 4, t
        open(os.path.join(os.environ["OUT_DIR"], f"ok{rank}"), "w").close()
        dist.destroy_process_group()
    """)
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(W.free_port()),
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "OUT_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists()


@pytest.mark.skipif(
    torch.mytorch.runtime() == "emu",
    reason="the example trains the main job's GPT (minutes per step on the emulated build under ASan); its DDP path "
    "is test_data_parallel_training_matches_one_process's, which runs there",
)
def test_ddp_example_job():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(W.free_port()),
            str(Path(EXAMPLES) / "train_gpt_ddp.py"),
            "--steps",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: data-parallel and single-process training agree" in proc.stdout, proc.stdout


def test_single_rank_group_in_process(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("mytorch", store=store, rank=0, world_size=1)
    try:
        t = torch.arange(5.0, device="mytorch")
        dist.all_reduce(t)
        assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        out = torch.empty(5, device="mytorch")
        dist.all_gather_into_tensor(out, t)
        assert torch.equal(out.cpu(), t.cpu())
        with pytest.raises(ValueError, match="expected a contiguous"):
            dist.all_reduce(torch.ones(3, 3, device="mytorch").t())
        backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("mytorch"))
        with pytest.raises(ValueError, match="expected a root"):
            backend.broadcast([t], _root(5))
    finally:
        dist.destroy_process_group()


def _root(r):
    o = dist.BroadcastOptions()
    o.rootRank = r
    return o
