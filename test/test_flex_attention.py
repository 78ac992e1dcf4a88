"""flex_attention on mytorch (issue 54; mytorch/_flex.py): eager flex_attention with a block mask and a score
modification, forward and backward, against the CPU math of the same masks and an fp64 reference by the shared
rule, with nothing on the CPU fallback; torch's own device check refuses mytorch without the adaptation. Compiled
flex_attention (as TorchTitan compiles it, max-autotune) on the sim's C++ Inductor path: the same results, and
Inductor's own lowering refusing it without the adaptation (Note [Compiled flex attention on the sim's C++ path])."""

import math

import pytest
import torch

from mytorch import _C
from mytorch.testing._compare import assert_aligned

pytestmark = [pytest.mark.native]

DEV = "mytorch"


def _causal(b, h, q, k):
    return q >= k


def _bias(score, b, h, q, k):  # ALiBi-like: a per-head slope times the distance
    return score - (h + 1) * 0.1 * (q - k).abs()


def _math(q, k, v):
    L, S = q.shape[-2], k.shape[-2]
    i, j = torch.arange(L)[:, None], torch.arange(S)[None]
    heads = torch.arange(q.shape[1], dtype=q.dtype)[:, None, None]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - (heads + 1) * 0.1 * (i - j).abs().to(q.dtype)
    s = s.masked_fill(j > i, float("-inf"))
    return torch.softmax(s, -1) @ v


def _run(fn, q, k, v, g):
    ts = [t.detach().requires_grad_() for t in (q, k, v)]
    out = fn(*ts)
    return [out.detach().cpu()] + [t.cpu() for t in torch.autograd.grad(out, ts, g.to(out.device, out.dtype))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_flex_attention_matches_the_math(dtype):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(2, 3, 40, 16, generator=gen) for _ in range(4))
    mask = create_block_mask(_causal, None, None, 40, 40, device=DEV)
    calls0 = _C._fallback_totals()[0]
    dev = _run(
        lambda a, b, c: flex_attention(a, b, c, score_mod=_bias, block_mask=mask),
        *(t.to(dtype).to(DEV) for t in (q, k, v)),
        g,
    )
    assert _C._fallback_totals()[0] == calls0, "flex_attention put an operator on the CPU fallback"
    ref = _run(_math, *(t.to(dtype) for t in (q, k, v)), g)
    gold = _run(_math, *(t.double() for t in (q, k, v)), g)
    for name, a, r, o in zip(["out", "dq", "dk", "dv"], dev, ref, gold):
        assert_aligned(a, r, o, name)


def test_torchs_own_device_check_refuses_mytorch():
    import torch.nn.attention.flex_attention as fa

    assert getattr(fa._validate_device, "_mytorch", False), "the adaptation was not applied"
    x = torch.randn(1, 1, 4, 8, device=DEV)
    with pytest.raises(ValueError, match="only supported on"):
        fa._validate_device.__wrapped__(x, x, x)  # the negative control: torch 2.13's check as shipped
    fa._validate_device(x, x, x)
    with pytest.raises(NotImplementedError, match="backward on CPU"):  # other devices: torch's check unchanged
        c = torch.randn(1, 1, 4, 8, requires_grad=True)
        fa._validate_device(c, c, c)


def _compiled_flex(dtype):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(1)
    q, k, v, g = (torch.randn(2, 3, 128, 16, generator=gen) for _ in range(4))
    mask = torch.compile(create_block_mask)(_causal, None, None, 128, 128, device=DEV)
    options = {"max_autotune": True, "coordinate_descent_tuning": True, "triton.cudagraphs": False}
    compiled = torch.compile(flex_attention, options=options)
    dev = _run(
        lambda a, b, c: compiled(a, b, c, score_mod=_bias, block_mask=mask),
        *(t.to(dtype).to(DEV) for t in (q, k, v)),
        g,
    )
    return dev, (q, k, v, g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_flex_attention_on_the_sim_cpp_path(dtype):
    from mytorch.backend import inductor

    if inductor.path()[0] != "cpp":
        pytest.skip("the C++ Inductor path is the sim runtime's default (the Triton path: test_compile_triton)")
    calls0 = _C._fallback_totals()[0]
    dev, (q, k, v, g) = _compiled_flex(dtype)
    assert _C._fallback_totals()[0] == calls0, "compiled flex_attention put an operator on the CPU fallback"
    ref = _run(_math, *(t.to(dtype) for t in (q, k, v)), g)
    gold = _run(_math, *(t.double() for t in (q, k, v)), g)
    for name, a, r, o in zip(["out", "dq", "dk", "dv"], dev, ref, gold):
        assert_aligned(a, r, o, name)


def test_compiled_flex_attention_without_the_adaptation_fails_at_lowering(monkeypatch):
    """The negative control: Inductor's own lowering of flex attention on mytorch (its Triton templates, which the
    sim's C++ path cannot run) refuses, so the test above passes through the adaptation."""
    import torch._inductor.compile_fx as cfx

    from mytorch.backend import inductor

    if inductor.path()[0] != "cpp":
        pytest.skip("the C++ Inductor path is the sim runtime's default")
    assert getattr(cfx.compile_fx, "_mytorch", False), "the adaptation was not applied"
    monkeypatch.setattr(cfx, "compile_fx", cfx.compile_fx.__wrapped__)
    with pytest.raises(Exception, match="LoweringException|active drivers"):
        _compiled_flex(torch.float32)
    torch._dynamo.reset()
