"""TorchTitan on mytorch (issue 54; docs/torchtitan.md): TorchTitan's llama3 debug model, parallelized by
TorchTitan's own parallelize_llama (FSDP2, then TP) on 2 sim ranks with its varlen attention, trained 3 steps
from seeded weights: each rank's losses match the same run on 2 CPU ranks over Gloo (the shared rule), with
nothing on the CPU fallback; the float64 run of the same is the rule's exact reference. Skipped where torchtitan is not installed (the test command installs it)."""

import json
import os

import pytest
import torch

from mytorch.testing import _dist_workers as W
from mytorch.testing._compare import assert_aligned

pytest.importorskip("torchtitan", reason="pip install torchtitan==0.3.0 (scripts/test.sh installs it)")
from mytorch.testing import _titan_workers as T  # noqa: E402

pytestmark = [pytest.mark.native]


def _losses(tmp_path, mode, dev):
    if dev != "mytorch" and mode.endswith("+converter"):  # the references run without it
        mode = mode.removesuffix("+converter")
    out = tmp_path / dev
    out.mkdir()
    W.launch(T.torchtitan_worker, 2, str(out), W.free_port(), mode, 3, dev, timeout_s=600)
    return [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(2)]


@pytest.mark.parametrize("mode", ["fsdp", "tp", "fsdp+converter"])
def test_torchtitan_llama3_trains_as_on_the_cpu(tmp_path, mode):
    """+converter: mytorch.torchtitan's converter on the mytorch run only (its 6 SwiGLU feed-forwards fused and
    passing their self-check), against the same unconverted CPU runs."""
    mine, cpu, gold = (_losses(tmp_path, mode, dev) for dev in ("mytorch", "cpu", "cpu64"))
    for rank, (m, c, g) in enumerate(zip(mine, cpu, gold)):
        assert m["fallback_calls"] == 0, f"rank {rank}: {m['fallback_calls']} calls on the CPU fallback"
        assert m["fused_feed_forwards"] == (6 if "converter" in mode else 0), m["fused_feed_forwards"]
        got, want, exact = (torch.tensor(x["losses"], dtype=torch.float64) for x in (m, c, g))
        assert_aligned(got.float(), want.float(), exact, f"{mode} rank {rank} losses")
        assert m["losses"][-1] < m["losses"][0], f"rank {rank}: the loss did not fall: {m['losses']}"
