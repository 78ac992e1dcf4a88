"""Expert parallelism (mytorch.distributed.ep): dispatch and combine across 2 and 4 ranks of this machine, both
modes and both transports, against every rank's expected rows and the single-process formula (the rank bodies:
python/mytorch/testing/_ep_workers.py, with deliberately unbalanced routing)."""

import json
from pathlib import Path

import pytest

import mytorch
from mytorch.testing import _dist_workers as W
from mytorch.testing import _ep_workers as E

pytestmark = pytest.mark.skipif(not mytorch.distributed.is_available(), reason="torch.distributed with Gloo needed")

SYMM, PG = "symmetric-memory", "process-group"


def results(out, ranks):
    return [json.loads((Path(out) / f"rank{r}.json").read_text()) for r in ranks]


@pytest.mark.parametrize(
    "world, transport, mode, dtype, align, capacity",
    [
        (2, SYMM, "exact", "float32", 1, None),
        (2, SYMM, "exact", "bfloat16", 4, None),
        (2, PG, "exact", "float32", 4, None),
        (2, SYMM, "capacity", "bfloat16", 1, 10),  # 10 rows a pair: tokens dropped
        (2, PG, "capacity", "float32", 4, None),  # the default capacity: nothing dropped
        (4, SYMM, "exact", "bfloat16", 8, None),
        (4, PG, "capacity", "float32", 2, 7),
    ],
)
def test_dispatch_combine_and_gradients(tmp_path, world, transport, mode, dtype, align, capacity):
    experts = 4 * world
    W.launch(
        E.correctness_worker,
        world,
        str(tmp_path),
        W.free_port(),
        transport,
        mode,
        dtype,
        align,
        capacity,
        experts,
        timeout_s=300,
    )
    assert all(r["ok"] and r["rows"] > 0 for r in results(tmp_path, range(world)))


@pytest.mark.parametrize("transport", [SYMM, PG])
def test_capacity_mode_makes_no_host_synchronisation(tmp_path, transport):
    W.launch(E.sync_free_worker, 2, str(tmp_path), W.free_port(), transport, timeout_s=120)
    assert all(r["ok"] for r in results(tmp_path, range(2)))


@pytest.mark.parametrize("transport", [SYMM, PG])
def test_bad_input_raises_on_every_rank(tmp_path, transport):
    W.launch(E.bad_input_worker, 2, str(tmp_path), W.free_port(), transport, timeout_s=120)
    want = {
        "id": "expert id outside",
        "shape": "mismatched shapes",
        "tokens": "max_tokens_per_rank",
        "experts": "num_experts",
    }
    for r in results(tmp_path, range(2)):
        assert r["seen"]["capacity invalid"] == 2
        for name, text in want.items():
            assert "rank 1 gave" in r["seen"][name] and text in r["seen"][name], (name, r["seen"][name])


@pytest.mark.parametrize("transport", [SYMM, PG])
def test_a_dead_rank_fails_the_others_within_the_timeout(tmp_path, transport):
    W.launch(E.dead_rank_worker, 2, str(tmp_path), W.free_port(), transport, timeout_s=120)
    (r,) = results(tmp_path, [0])
    assert r["error"] != "no error" and r["seconds"] < 30, r


@pytest.mark.parametrize(
    "world, transport, mode", [(2, SYMM, "exact"), (2, PG, "capacity"), (4, SYMM, "capacity"), (4, SYMM, "exact")]
)
def test_deepseek_v3_shaped_layer_matches_one_process(tmp_path, world, transport, mode):
    """64 routed experts (top-8, grouped routing with the expert bias), one shared expert, hidden 512, spread over
    the ranks: outputs and every gradient equal the single-process layer's."""
    W.launch(E.dsv3_worker, world, str(tmp_path), W.free_port(), 24, transport, mode, timeout_s=600)
    assert all(r["ok"] for r in results(tmp_path, range(world)))


@pytest.mark.parametrize("family", ["qwen3_moe", "deepseek_v3"])
def test_transformers_model_trained_with_ep2_matches_one_process(tmp_path, family):
    """mytorch.optimize(model, ep_group=...) shards a loaded transformers MoE model's experts over 2 ranks; 20
    AdamW steps give the single-process run's losses within the shared rule."""
    pytest.importorskip("transformers")
    W.launch(E.hf_train_worker, 2, str(tmp_path), W.free_port(), family, 20, timeout_s=600)
    r0 = results(tmp_path, [0])[0]
    assert r0["problem"] is None, r0["problem"]
    assert len(r0["losses"]) == 20 and r0["losses"][-1] < r0["losses"][0] - 0.5


def test_transformers_ep_negative_control(tmp_path):
    """The loss check can fail: without the replicated parameters' gradient sum the losses leave the rule."""
    pytest.importorskip("transformers")
    W.launch(E.hf_train_worker, 2, str(tmp_path), W.free_port(), "qwen3_moe", 20, False, timeout_s=600)
    assert results(tmp_path, [0])[0]["problem"] is not None


@pytest.mark.parametrize("transport", [SYMM, PG])
def test_fp8_dispatch(tmp_path, transport):
    W.launch(E.fp8_worker, 2, str(tmp_path), W.free_port(), transport, timeout_s=120)
    assert all(r["ok"] and r["rows"] > 0 for r in results(tmp_path, range(2)))


def test_dispatch_overlaps_the_previous_micro_batch_experts(tmp_path):
    W.launch(E.overlap_worker, 2, str(tmp_path), W.free_port(), timeout_s=120)
    for r in results(tmp_path, range(2)):
        assert r["threads"][0] != r["threads"][1], r  # the transport off the calling thread
        assert r["overlap_us"] > 0, r  # concurrent, not in turn (how much depends on the load: 2 cores, 4 threads)


@pytest.mark.parametrize("transport", [SYMM, PG])
def test_capacity_mode_inside_torch_compile(tmp_path, transport):
    W.launch(E.compile_worker, 2, str(tmp_path), W.free_port(), transport, timeout_s=600)
    assert all(r["ok"] for r in results(tmp_path, range(2)))
