"""torch's context parallelism (ring attention) on mytorch, issue 54: CP=2 on 2 sim ranks equals one process,
forward and backward, causal (with torch's head-tail load balancing) and not, float32 and bfloat16, through
torch.cuda's memory-efficient SDPA operator (Note [Attention operator families]) with nothing on the CPU fallback."""

import json
import os

import pytest

from mytorch.testing import _cp_workers as CP
from mytorch.testing import _dist_workers as W

pytestmark = [pytest.mark.native]


@pytest.mark.parametrize("causal", [False, True])
def test_context_parallel_two_ranks_equal_one_process(tmp_path, causal):
    W.launch(CP.context_parallel_worker, 2, str(tmp_path), W.free_port(), causal, timeout_s=300)
    for rank in range(2):
        with open(os.path.join(tmp_path, f"rank{rank}.json")) as f:
            result = json.load(f)
        for dtype, r in result.items():
            assert r["efficient"], f"rank {rank} {dtype}: ring attention did not run mytorch's efficient op"
            assert r["local_shape"] == [2, 4, 64, 32], f"rank {rank} {dtype}: the sequence was not sharded"
            assert not r["fallback"], f"rank {rank} {dtype}: on the CPU fallback: {r['fallback']}"
            assert not any(r["problems"]), f"rank {rank}: {[p for p in r['problems'] if p]}"
