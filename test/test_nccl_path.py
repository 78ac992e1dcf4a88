"""The NCCL path of the mytorch process group across rank processes: on the emulated build through the emulated
NCCL (kernels/emu/nccl.cpp, Note [The emulated NCCL]), on GPUs through NCCL. Marked `gpu` (it runs the cuda
path's code); test/test_distributed.py runs on this path too in CI's emulated stage (scripts/test.sh)."""

import json
import time
from pathlib import Path

import pytest
import torch

import mytorch
from mytorch.testing import _dist_workers as W
from mytorch.testing import _nccl_workers as N

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not mytorch.distributed.is_available(), reason="torch.distributed with Gloo needed"),
]


def results(out, world, ranks=None):
    return [json.loads((Path(out) / f"rank{r}.json").read_text()) for r in (ranks or range(world))]


@pytest.fixture(autouse=True)
def _one_device_per_rank(request):
    world = request.node.callspec.params.get("world", 2) if hasattr(request.node, "callspec") else 2
    if torch.mytorch.runtime() == "cuda" and torch.mytorch.device_count() < world:
        pytest.skip(f"NCCL puts one rank on each GPU: {world} ranks need {world} GPUs")


def _launch_tolerating_exit(fn, world, out, *args):
    try:
        W.launch(fn, world, str(out), W.free_port(), *args)
    except Exception:  # noqa: BLE001 - a rank made to exit is reported by the launcher; the files count
        pass


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_dtype_and_op_against_the_host(world, tmp_path):
    W.launch(N.collectives_worker, world, str(tmp_path), W.free_port())
    for r, res in enumerate(results(tmp_path, world)):
        assert res["path"] == "nccl", res["path"]
        assert res["failures"] == [], f"rank {r}: " + "\n".join(res["failures"])
        assert res["ran"] >= len(N.DTYPES) * 2 * 6, res["ran"]  # a silent early exit would shrink this


@pytest.mark.parametrize("order", ["send_first", "recv_first"])
def test_batch_isend_irecv_rings_and_the_deadlock_negative_control(order, tmp_path):
    W.launch(N.p2p_worker, 2, str(tmp_path), W.free_port(), order)
    timed_out = 0
    for res in results(tmp_path, 2):
        assert res["ring7"] and res["ring300000"], res
        # Negative control: both ranks send before receiving, outside a group. NCCL's send waits for the
        # matching receive, so this deadlocks there; the emulated NCCL does the same, and the watchdog turns it
        # into an error naming the call within the timeout (Gloo, which buffers sends, would have passed it).
        # The rank whose watchdog fires first aborts the communicator, and its peer's send may then fail with that
        # abort a moment before its own timeout: either names the send; at least one rank must have timed out.
        timeout = "did not finish within the timeout" in res["deadlock"]
        aborted = "aborted the communicator" in res["deadlock"]
        assert "send (rank" in res["deadlock"] and (timeout or aborted), res
        assert res["elapsed"] < 6 + 5, res
        timed_out += timeout
    assert timed_out >= 1, "no rank's send timed out"


def test_a_point_to_point_size_mismatch_fails_both_ranks_naming_the_sizes(tmp_path):
    if torch.mytorch.runtime() != "emu":
        pytest.skip("NCCL itself does not check the sizes (it corrupts or hangs); the emulated NCCL does")
    W.launch(N.p2p_mismatch_worker, 2, str(tmp_path), W.free_port())
    for r, res in enumerate(results(tmp_path, 2)):
        assert res["error"] and "rank 0 sent 32 bytes to rank 1, which posted a receive of 16 bytes" in res["error"], (
            r,
            res,
        )


@pytest.mark.parametrize("fault", ["error", "exit", "hang"])
def test_injected_faults_fail_every_rank_within_the_timeout(fault, tmp_path):
    if torch.mytorch.runtime() != "emu":
        pytest.skip("fault injection is the emulated NCCL's (MYTORCH_EMU_NCCL_FAULT)")
    start = time.monotonic()
    _launch_tolerating_exit(N.fault_worker, 3, tmp_path, fault)
    survivors = [0, 1] if fault == "exit" else [0, 1, 2]
    for r, res in zip(survivors, results(tmp_path, 3, survivors)):
        assert res["error"] is not None, f"rank {r} did not raise"
        assert f"mytorch allreduce (rank {r} of 3" in res["error"] and "Float[1000]" in res["error"], res
        assert res["elapsed"] < 5 + 5, res
    errors = " | ".join(res["error"] for res in results(tmp_path, 3, survivors))
    want = {"error": "injected error", "exit": "(pid", "hang": "did not finish within the timeout"}[fault]
    assert want in errors, errors
    assert time.monotonic() - start < 120


def test_destroy_with_work_pending_returns_and_fails_the_peers(tmp_path):
    W.launch(N.destroy_pending_worker, 2, str(tmp_path), W.free_port())
    first, second = results(tmp_path, 2)
    assert first["destroyed_in"] < 5, first
    assert "destroyed with this work pending" in first["work"], first
    assert second["later"] != "no error" and "mytorch allreduce (rank 1 of 2" in second["later"], second
    assert second["elapsed"] < 6 + 5, second


def test_subgroups_split_from_the_parent_communicator(tmp_path):
    W.launch(N.split_worker, 4, str(tmp_path), W.free_port())
    for r, res in enumerate(results(tmp_path, 4)):
        assert res["uses_nccl"] and res["halves"] and res["dp"] and res["tp"], (r, res)
        assert res.get("evens", True), (r, res)


MLP_PARAMETERS = ["0.bias", "0.weight", "2.bias", "2.weight"]


def _aligned_state(out, what):
    """The parameters after the step whose distributed values align with one process's (the shared tolerance
    rule against the float64 CPU gold; raises on the first that does not), sorted by name."""
    from mytorch.testing._compare import assert_aligned

    s = torch.load(Path(out) / "state.pt")
    init = N._mlp().state_dict()
    aligned = []
    for k in sorted(s["got"]):
        assert_aligned(s["got"][k], s["want"][k], s["gold"][k], f"{what} {k}")
        if not torch.equal(init[k], s["want"][k]):  # the step moved it: not two copies of the initialisation
            aligned.append(k)
    return aligned


@pytest.mark.parametrize("world", [2, 4])
def test_tensor_parallel_matches_one_process(world, tmp_path):
    W.launch(N.tensor_parallel_worker, world, str(tmp_path), W.free_port(), False)
    assert _aligned_state(tmp_path, f"TP over {world}") == MLP_PARAMETERS


def test_fsdp2_by_tensor_parallel_on_a_2d_mesh(tmp_path):
    W.launch(N.tensor_parallel_worker, 4, str(tmp_path), W.free_port(), True)
    assert _aligned_state(tmp_path, "FSDP2 x TP") == MLP_PARAMETERS


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_schedules_match_one_process(schedule, tmp_path):
    W.launch(N.pipeline_worker, 2, str(tmp_path), W.free_port(), schedule)
    assert _aligned_state(tmp_path, schedule) == MLP_PARAMETERS


def test_the_gpu_verify_distributed_steps(tmp_path):
    """gpu_verify's distributed stage, its mytorch steps here (torch's own NCCL step needs a GPU)."""
    import os
    import subprocess
    import sys

    for step in (["mytorch-nccl", "2"], ["device-index"]):
        env = dict(os.environ, NCCL_DEBUG="INFO", TORCH_DEVICE_BACKEND_AUTOLOAD="0", MYTORCH_SIM_DEVICES="1")
        p = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-m", "mytorch.testing._dist_probe", *step],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert p.returncode == 0 and f"ok {step[0]}" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
