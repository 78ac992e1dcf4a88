"""TorchTitan on mytorch (issue 54; docs/torchtitan.md): TorchTitan's llama3 debug model, parallelized by
TorchTitan's own parallelize_llama (FSDP2, then TP) on 2 sim ranks with its varlen attention, and its qwen3 MoE
debug model with expert parallelism (parallelize_qwen3), trained 3 steps from seeded weights: each rank's losses
match the same run on 2 CPU ranks over Gloo (the shared rule), with nothing on the CPU fallback; the float64 run of
the same is the rule's exact reference. Skipped where torchtitan is not installed (the test command installs it)."""

import json
import math
import os

import pytest
import torch

from mytorch.testing import _dist_workers as W
from mytorch.testing._compare import assert_aligned

pytest.importorskip("torchtitan", reason="pip install torchtitan==0.3.0 (scripts/test.sh installs it)")
from mytorch.testing import _titan_workers as T  # noqa: E402

pytestmark = [pytest.mark.native]


def _losses(tmp_path, mode, dev, world=2):
    out = tmp_path / f"{dev}-{mode}"
    out.mkdir()
    W.launch(T.torchtitan_worker, world, str(out), W.free_port(), mode, 3, dev, timeout_s=600)
    return [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(world)]


CONVERTED = {  # the converter's modules in each model, every one passing its self-check
    "fsdp+converter": {"MytorchFeedForward": 6, "MytorchComplexRoPE": 6, "MytorchLinearCrossEntropyLoss": 1},
    "ep+converter": {
        "MytorchCosSinRoPE": T.MOE_LAYERS,
        "MytorchGroupedExperts": T.MOE_LAYERS,
        "MytorchLinearCrossEntropyLoss": 1,
    },
}


@pytest.mark.parametrize("mode", ["fsdp", "tp", "pp", "fsdp+converter", "ep+converter"])
def test_torchtitan_trains_as_on_the_cpu(tmp_path, mode):
    """+converter: mytorch.torchtitan's converter and fused loss, its fused modules passing their self-checks; the float32 CPU
    reference runs the same fused modules (their CPU implementations) and the float64 one the unconverted model.
    ep: the qwen3 MoE model with its experts sharded over the 2 ranks (TorchTitan's parallelize_qwen3), tokens moved
    by mytorch.distributed.ep (the converter's dispatcher) on mytorch and by TorchTitan's all-to-all over Gloo on
    the CPU. pp: TorchTitan's pipeline split (pipeline_llm, Interleaved1F1B, 2 stages a rank) stepped as its trainer
    steps it (a microbatch a row); the rank holding the last stage reports the losses."""
    mine, cpu, gold = (_losses(tmp_path, mode, dev) for dev in ("mytorch", "cpu", "cpu64"))
    holders = [[bool(x["losses"]) for x in run] for run in (mine, cpu, gold)]
    assert holders[0] == holders[1] == holders[2] and any(holders[0]), holders
    for rank, (m, c, g) in enumerate(zip(mine, cpu, gold)):
        assert m["fallback_calls"] == 0, f"rank {rank}: {m['fallback_calls']} calls on the CPU fallback"
        want = CONVERTED.get(mode, {})
        assert m["fused"] == want and c["fused"] == want, (m["fused"], c["fused"])
        if not m["losses"]:  # pp: a rank without the last stage
            continue
        got, want, exact = (torch.tensor(x["losses"], dtype=torch.float64) for x in (m, c, g))
        assert_aligned(got.float(), want.float(), exact, f"{mode} rank {rank} losses")
        assert m["losses"][-1] < m["losses"][0], f"rank {rank}: the loss did not fall: {m['losses']}"


@pytest.mark.slow
def test_torchtitan_context_parallel_as_on_the_cpu_and_in_one_process(tmp_path):
    """TorchTitan's context parallelism (CP=2, head-tail load balancing, K/V all-gathered for its flex attention,
    compiled: Note [Compiled flex attention on the sim's C++ path]) on the llama3 debug model with packed documents:
    each rank's losses match the same CP run on 2 CPU ranks, and the ranks' mean loss (each rank holds half the
    tokens) matches one process holding the whole sequence (float64: the rule's exact reference)."""
    mine, cpu, gold = (_losses(tmp_path, "cp", dev) for dev in ("mytorch", "cpu", "cpu64"))
    (one,) = _losses(tmp_path, "flex", "cpu64", world=1)
    for rank, (m, c, g) in enumerate(zip(mine, cpu, gold)):
        assert m["fallback_calls"] == 0, f"rank {rank}: {m['fallback_calls']} calls on the CPU fallback"
        got, want, exact = (torch.tensor(x["losses"], dtype=torch.float64) for x in (m, c, g))
        assert_aligned(got.float(), want.float(), exact, f"cp rank {rank} losses")
    got, want = (torch.tensor([x["losses"] for x in run], dtype=torch.float64).mean(0) for run in (mine, cpu))
    assert_aligned(got.float(), want.float(), torch.tensor(one["losses"], dtype=torch.float64), "cp mean, one process")
    assert got[-1] < got[0], f"the loss did not fall: {got.tolist()}"


TRAINER_RUNS = {  # TorchTitan's own configs, with its trainer, as docs/torchtitan.md gives the commands
    "llama3 FSDP2 varlen": ["--module", "llama3", "--config", "llama3_debugmodel_varlen_attn"],
    "llama3 PP": ["--module", "llama3", "--config", "llama3_debugmodel", "--parallelism.pipeline_parallel_degree", "2"],
    "llama3 CP": ["--module", "llama3", "--config", "llama3_debugmodel", "--parallelism.context_parallel_degree", "2"],
    "qwen3-MoE EP": [
        "--module",
        "qwen3",
        "--config",
        "qwen3_debugmodel_moe_param_groups",
        "--parallelism.expert_parallel_degree",
        "2",
    ],
}
TRAINER_SEQ = {"llama3 CP": 256}  # torch's CP block mask: a multiple of 2 ranks x flex's 128-token block
TRAINER_BATCH = {"llama3 PP": 4}  # Interleaved1F1B: a microbatch per stage


@pytest.mark.slow
@pytest.mark.parametrize("run", list(TRAINER_RUNS))
def test_torchtitan_trainer_trains_on_mytorch(tmp_path, run):
    """TorchTitan's trainer through examples/torchtitan_train.py (what torch 2.13 lacks, supplied) on 2 sim ranks under
    torchrun, the CPU fallback forbidden, its configs' own attention (compiled flex, or varlen): 3 steps logged by
    every rank that holds the loss, finite and falling."""
    import re
    import subprocess
    import sys

    from conftest import ROOT

    tok, data = T.make_assets(str(tmp_path))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(W.free_port()),
        os.path.join(ROOT, "examples", "torchtitan_train.py"),
        *TRAINER_RUNS[run],
        "--hf_assets_path",
        tok,
        "--dataloader.dataset_path",
        data,
        "--training.steps",
        "3",
        "--training.seq_len",
        str(TRAINER_SEQ.get(run, 128)),
        "--training.local_batch_size",
        str(TRAINER_BATCH.get(run, 2)),
        "--checkpoint.no-enable",
        "--validator.no-enable",
        "--parallelism.spmd_backend",
        "partial_dtensor",
        "--training.disable_cuda_graphs",
        "--dump_folder",
        str(tmp_path / "out"),
        "activation-checkpoint:none",
    ]
    env = dict(os.environ, MYTORCH_FALLBACK="error")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    log = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)
    assert r.returncode == 0, log[-3000:]
    losses = [float(x) for x in re.findall(r"step:\s+\d+\s+loss:\s+(-?[\d.]+)", log) if float(x) >= 0]
    assert len(losses) >= 3 and all(math.isfinite(x) for x in losses), log[-3000:]
    assert losses[-1] < losses[0], losses


def test_converter_keeps_a_module_whose_fused_form_differs():
    """The converter's self-check (the negative control): a fused form that is wrong is caught on the first call,
    and the module keeps its own forward, with a warning; a right one is used."""
    from torchtitan.models.common.feed_forward import FeedForward
    from torchtitan.models.common.linear import Linear

    from mytorch.torchtitan import MytorchFeedForward

    def config(cls):
        return cls.Config(
            w1=Linear.Config(in_features=32, out_features=64),
            w2=Linear.Config(in_features=64, out_features=32),
            w3=Linear.Config(in_features=32, out_features=64),
        )

    torch.manual_seed(0)
    own = FeedForward(config(FeedForward)).to("mytorch")
    for lin in (own.w1, own.w2, own.w3):
        torch.nn.init.normal_(lin.weight, std=0.1)
    fused = MytorchFeedForward(config(MytorchFeedForward)).to("mytorch")
    fused.load_state_dict(own.state_dict())
    x = torch.randn(2, 5, 32, device="mytorch")
    torch.testing.assert_close(fused(x).cpu(), own(x).cpu())
    assert fused._mytorch_checked == {((2, 5, 32), torch.float32, "mytorch"): True}
    wrong = MytorchFeedForward(config(MytorchFeedForward)).to("mytorch")
    wrong.load_state_dict(own.state_dict())
    wrong._fused = lambda t: own(t) * 1.01
    with pytest.warns(UserWarning, match="keeps its own forward"):
        out = wrong(x)
    assert torch.equal(out.cpu(), own(x).cpu()) and not any(wrong._mytorch_checked.values())


def test_converter_checks_the_grouped_experts_against_torchtitans_formula():
    """The grouped experts' self-check (bfloat16 math, so its gold is TorchTitan's formula in float32): the fused
    activation passes and is used; a fused form that is off by 1% is caught (the negative control)."""
    from torchtitan.models.common.moe import GroupedExperts

    from mytorch.torchtitan import MytorchGroupedExperts

    torch.manual_seed(0)
    cfg = dict(dim=64, hidden_dim=96, num_experts=4)
    own = GroupedExperts(GroupedExperts.Config(**cfg)).to("mytorch")
    for w in own.parameters():
        torch.nn.init.normal_(w, std=0.05)
    x = torch.randn(40, 64, device="mytorch")
    counts = torch.tensor([7, 0, 21, 12], device="mytorch")
    fused = MytorchGroupedExperts(MytorchGroupedExperts.Config(**cfg)).to("mytorch")
    fused.load_state_dict(own.state_dict())
    got = fused(x, counts)
    assert fused._mytorch_checked == {((64,), torch.float32, "mytorch"): True}
    assert_aligned(got.bfloat16(), own(x, counts).bfloat16(), fused._reference(x, counts), "grouped experts")
    wrong = MytorchGroupedExperts(MytorchGroupedExperts.Config(**cfg)).to("mytorch")
    wrong.load_state_dict(own.state_dict())
    right = wrong._fused
    wrong._fused = lambda x_RD, c: right(x_RD, c) * 1.01
    with pytest.warns(UserWarning, match="keeps its own forward"):
        out = wrong(x, counts)
    assert torch.equal(out.cpu(), own(x, counts).cpu()) and not any(wrong._mytorch_checked.values())


def test_fused_loss_matches_torchtitans_cross_entropy_and_catches_a_wrong_form(monkeypatch):
    """MytorchLinearCrossEntropyLoss against TorchTitan's CrossEntropyLoss over the head's logits: the loss (sum over
    the valid tokens / their count, an ignored label included) and the gradients of the hidden states and the head,
    by the shared rule against float64; the negative control: a fused form off by 1% is caught by the self-check and
    TorchTitan's loss is used, with a warning."""
    from torchtitan.components.loss import IGNORE_INDEX, CrossEntropyLoss

    import mytorch
    from mytorch.torchtitan import MytorchLinearCrossEntropyLoss

    gen = torch.Generator().manual_seed(0)
    h, w = torch.randn(2, 9, 32, generator=gen), torch.randn(300, 32, generator=gen) * 0.1
    y = torch.randint(0, 300, (2, 9), generator=gen)
    y[1, 3] = IGNORE_INDEX
    tokens = (y != IGNORE_INDEX).sum()

    def run(loss_fn, dev, dtype=torch.float32):
        head = torch.nn.Linear(32, 300, bias=False).to(dev, dtype)
        with torch.no_grad():
            head.weight.copy_(w)
        x = h.to(dev, dtype).detach().requires_grad_()
        if isinstance(loss_fn, MytorchLinearCrossEntropyLoss):
            loss_fn.set_lm_head(head)
            loss = loss_fn(x, y.to(dev), tokens.to(dev))[0]
        else:
            loss = loss_fn(head(x), y.to(dev), tokens.to(dev))[0]
        loss.backward()
        return [t.detach().cpu() for t in (loss, x.grad, head.weight.grad)]

    fused = MytorchLinearCrossEntropyLoss.Config().build()
    got = run(fused, "mytorch")
    assert fused._mytorch_checked == {((2, 9, 32), torch.float32, "mytorch"): True}
    want, gold = (
        run(CrossEntropyLoss.Config().build(), "cpu"),
        run(CrossEntropyLoss.Config().build(), "cpu", torch.float64),
    )
    for name, a, r, o in zip(["loss", "d hidden", "d head"], got, want, gold):
        assert_aligned(a, r, o, name)
    right = mytorch.ops.linear_cross_entropy
    monkeypatch.setattr(mytorch.ops, "linear_cross_entropy", lambda *a, **k: right(*a, **k) * 1.01)
    wrong = MytorchLinearCrossEntropyLoss.Config().build()
    with pytest.warns(UserWarning, match="keeps its own forward"):
        out = run(wrong, "mytorch")
    assert not any(wrong._mytorch_checked.values())
    assert_aligned(out[0], want[0], gold[0], "loss after the failed check")


@pytest.mark.parametrize("kind", ["softmax", "sigmoid+bias+groups"])
def test_converter_router_matches_torchtitans(kind):
    """MytorchRouter against TorchTitan's TokenChoiceTopKRouter: the same experts a token (compared as sets:
    TorchTitan's top-k is unsorted), their scores and the full scores, and the gate's gradient through the routing
    scores, by the shared rule against float64; qwen3's softmax routing and DeepSeek-V3's sigmoid routing with the
    expert bias and group-limited choice. The negative control: scores off by 1% are caught by the self-check."""
    from torchtitan.models.common.linear import Linear
    from torchtitan.models.common.moe import TokenChoiceTopKRouter

    from mytorch.torchtitan import MytorchRouter

    cfg = dict(num_experts=16, gate=Linear.Config(in_features=32, out_features=16), top_k=4)
    if kind == "softmax":
        cfg.update(score_func="softmax", route_norm=True)
    else:
        cfg.update(score_func="sigmoid", num_expert_groups=4, num_limited_groups=2, route_norm=True, route_scale=2.5)
    gen = torch.Generator().manual_seed(0)
    x, weight = torch.randn(2, 7, 32, generator=gen), torch.randn(16, 32, generator=gen) * 0.3
    bias = torch.randn(16, generator=gen) * 0.1 if kind != "softmax" else None

    def run(cls, dev, dtype=torch.float32):
        router = cls(cls.Config(**cfg)).to(dev, dtype)
        with torch.no_grad():
            router.gate.weight.copy_(weight)
        w, ids, scores = router(x.to(dev, dtype), None if bias is None else bias.to(dev, dtype))
        ids, order = ids.sort(-1)
        w = w.gather(-1, order)
        (w * torch.arange(1, 5, device=dev, dtype=w.dtype)).sum().backward()
        return router, [t.detach().cpu() for t in (w, ids, scores, router.gate.weight.grad)]

    fused, got = run(MytorchRouter, "mytorch")
    assert all(fused._mytorch_checked.values()) and fused._mytorch_checked
    _, want = run(TokenChoiceTopKRouter, "cpu")
    _, gold = run(TokenChoiceTopKRouter, "cpu", torch.float64)
    assert torch.equal(got[1], want[1]) and torch.equal(got[1], gold[1]), "different experts chosen"
    for name, a, r, o in zip(["scores", "ids", "all scores", "d gate"], got, want, gold):
        if name != "ids":
            assert_aligned(a, r, o, name)
    wrong = MytorchRouter(MytorchRouter.Config(**cfg)).to("mytorch")
    right = wrong._fused
    wrong._fused = lambda *a: (lambda r: (r[0] * 1.01, r[1], r[2]))(right(*a))
    with pytest.warns(UserWarning, match="keeps its own forward"):
        wrong(x.to("mytorch"), None if bias is None else bias.to("mytorch"))
    assert not any(wrong._mytorch_checked.values())
