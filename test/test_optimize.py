"""mytorch.optimize (Note [optimize] in python/mytorch/_optimize.py): the convergence test of Liger Kernel's kind.
A small model of each family, built from a config (no download), trains 20 AdamW steps on mytorch with and without
the fused ops; every step's loss, the eval top-k log-probabilities and every parameter are compared within the
dtype's tolerance, at float32 and bfloat16, with the CPU fallback forbidden. generate() still works."""

import copy

import pytest
import torch

import mytorch
from mytorch.testing._compare import FLOORS, compare_tensor

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.native, pytest.mark.slow]

DEV = "mytorch"
SMALL = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
FAMILIES = {
    "llama": lambda: transformers.LlamaConfig(intermediate_size=64, **SMALL),
    "mistral": lambda: transformers.MistralConfig(intermediate_size=64, **SMALL),
    "qwen2": lambda: transformers.Qwen2Config(intermediate_size=64, **SMALL),
    "qwen3": lambda: transformers.Qwen3Config(intermediate_size=64, head_dim=8, **SMALL),
    "gemma": lambda: transformers.GemmaConfig(intermediate_size=64, head_dim=8, **SMALL),
    "phi3": lambda: transformers.Phi3Config(intermediate_size=64, pad_token_id=0, **SMALL),
    "mixtral": lambda: transformers.MixtralConfig(intermediate_size=32, num_local_experts=4, **SMALL),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(
        intermediate_size=64, moe_intermediate_size=16, num_experts=8, num_experts_per_tok=2, head_dim=8, **SMALL
    ),
    "deepseek_v3": lambda: transformers.DeepseekV3Config(
        **dict(SMALL, num_key_value_heads=4),
        intermediate_size=64,
        moe_intermediate_size=16,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        first_k_dense_replace=1,
        q_lora_rank=None,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
    ),
    "gpt_oss": lambda: transformers.GptOssConfig(
        intermediate_size=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        head_dim=8,
        layer_types=["full_attention"] * 2,
        **SMALL,
    ),
}
# What optimize must swap in each family (the report's kinds); the rest of the test checks it changed nothing.
EXPECTED = {
    "llama": {"rms_norm", "residual_rms_norm", "swiglu", "rope", "cross_entropy"},
    "gemma": {"rms_norm", "residual_rms_norm", "swiglu", "rope", "cross_entropy"},
    "mixtral": {"rms_norm", "moe_router", "moe_experts", "rope", "cross_entropy"},
    "gpt_oss": {"rms_norm", "moe_router", "moe_experts", "rope", "cross_entropy"},
    "deepseek_v3": {"rms_norm", "residual_rms_norm", "swiglu", "moe_router", "moe_experts", "rope", "cross_entropy"},
    "qwen3_moe": {"rms_norm", "residual_rms_norm", "moe_router", "moe_experts", "rope", "cross_entropy"},
}
STEPS = 20
LOSS_RTOL = {torch.float32: 1e-4, torch.bfloat16: FLOORS[torch.bfloat16][1]}  # test_models' parity rule; bf16 floor


LR = 1e-3


def assert_params_close(name, got, want):
    """Within the dtype's floor, except where AdamW turned rounding noise into a different step. An AdamW step
    moves an element by about lr whatever its gradient's size, so a gradient that cancels to near zero (test_models'
    note) or, in bfloat16, an update rounded one way in one run and the other way in the other, can part the two
    runs by up to 2 lr a step. float32: at most 0.5% of a tensor's elements may use that allowance; bfloat16 (the
    weights themselves in 8 bits: an update below half an ulp of the weight is rounded away or not) any of them.
    The losses and the eval log-probs bound what this lets through."""
    e = compare_tensor(got, want, None)
    if e.ok:
        return
    diff = (got.float() - want.float()).abs().cpu()
    if got.dtype == torch.float32:
        atol, rtol = FLOORS[got.dtype]
        outside = int((diff > atol + rtol * want.float().abs().cpu()).sum())
        assert outside <= max(1, int(0.005 * got.numel())), f"{name}: {e.bad} of {e.total} outside the floor"
    assert float(diff.max()) <= 2 * LR * STEPS, f"{name}: max difference {float(diff.max()):.3g}"


def _train(model, batches):
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    model.train()
    losses = []
    for ids in batches:
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_optimized_model_trains_like_the_original(family, dtype):
    torch.manual_seed(0)
    base = transformers.AutoModelForCausalLM.from_config(FAMILIES[family]()).to(dtype)
    plain = copy.deepcopy(base).to(DEV)
    fused = copy.deepcopy(base).to(DEV)
    assert mytorch.optimize(fused, verbose=False) is fused  # model = mytorch.optimize(model), as ipex.optimize
    report = fused.mytorch_optimized
    assert not [k for k in report if k.startswith("left:")], report
    assert EXPECTED.get(family, {"rms_norm", "rope", "cross_entropy"}) <= set(report), report
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(3, 96, (2, 16), generator=g).to(DEV) for _ in range(STEPS)]
    want, got = _train(plain, batches), _train(fused, batches)
    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= LOSS_RTOL[dtype] * abs(b), f"step {step}: loss {a} against {b}"
    plain.eval(), fused.eval()
    probe = batches[0]
    with torch.no_grad():
        lp = [torch.log_softmax(m(input_ids=probe).logits.float(), -1).topk(5, -1) for m in (fused, plain)]
    e = compare_tensor(lp[0].values.to(dtype), lp[1].values.to(dtype), None)  # (logits of the model's dtype)
    assert e.ok, f"eval top-5 log-probs: {e.bad} of {e.total} out of tolerance (max abs {e.max_abs:.3g})"
    for (name, p), q in zip(fused.named_parameters(), plain.parameters()):
        assert_params_close(name, p.detach(), q.detach())
    greedy = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert torch.equal(fused.generate(probe[:, :6], **greedy).cpu(), plain.generate(probe[:, :6], **greedy).cpu())
    assert torch.mytorch.fallback_stats() == {}


def test_optimize_is_idempotent_and_leaves_unknown_models_alone(capsys):
    model = transformers.AutoModelForCausalLM.from_config(FAMILIES["llama"]()).to(DEV)
    first = dict(mytorch.optimize(model).mytorch_optimized)
    again = mytorch.optimize(model, verbose=False)
    assert again is model and model.mytorch_optimized == {"cross_entropy": 1, "rope": 1}  # (the rest already fused)
    assert "LlamaForCausalLM" in capsys.readouterr().out and first["swiglu"] == 2
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 4)).to(DEV)
    assert mytorch.optimize(mlp).mytorch_optimized == {}
    assert "nothing swapped" in capsys.readouterr().out


def test_a_module_that_differs_is_left_as_it_was():
    """An RMSNorm-named module with other math fails optimize's check and keeps its forward."""

    class OddRMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(8))
            self.eps = 1e-6

        def forward(self, x):
            return x * self.weight  # no normalisation at all

    m = OddRMSNorm().to(DEV)
    report = mytorch.optimize(m, verbose=False).mytorch_optimized
    assert report == {"left:OddRMSNorm": 1} and "forward" not in m.__dict__


def test_the_comparison_catches_a_loss_that_is_slightly_off(monkeypatch):
    """Negative control: a fused loss with a z-loss of 1e-4 slipped in (the loss about 0.05% off) fails
    the per-step loss check of the convergence test."""
    original = mytorch.ops.linear_cross_entropy
    monkeypatch.setattr(mytorch.ops, "linear_cross_entropy", lambda *a, **k: original(*a, **dict(k, z_loss=1e-4)))
    with pytest.raises(AssertionError, match="loss"):
        test_optimized_model_trains_like_the_original("llama", torch.float32)


@pytest.mark.parametrize("family", ["llama", "qwen3_moe"])
def test_optimize_works_on_the_cpu(family):
    """A model on the CPU: the ops' CPU implementations (aten compositions), the same loss and gradients."""
    torch.manual_seed(0)
    plain = transformers.AutoModelForCausalLM.from_config(FAMILIES[family]())
    fused = copy.deepcopy(plain)
    report = mytorch.optimize(fused, verbose=False).mytorch_optimized
    assert {"rms_norm", "residual_rms_norm", "rope", "cross_entropy"} <= set(report), report
    ids = torch.randint(3, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    losses = []
    for m in (fused, plain):
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        losses.append(loss.detach())
    e = compare_tensor(losses[0], losses[1], None)
    assert e.ok, losses
    for (name, p), q in zip(fused.named_parameters(), plain.parameters()):
        if q.grad is not None:
            e = compare_tensor(p.grad, q.grad, None)
            assert e.ok, f"{name}: {e.bad} of {e.total} gradients out of tolerance (max abs {e.max_abs:.3g})"
