"""torch.cuda's attention operators on mytorch (csrc/aten/nn/AttentionVariants.cpp, Note [Attention operator
families]): the flash and memory-efficient SDPA ops with their backwards, and _flash_attention_forward/_backward,
dense and varlen (cu_seqlens), each against the CPU's math path and an fp64 reference by the shared rule; the
output, logsumexp and RNG-state tensors as torch's meta functions promise; dropout drawing what the SDPA hook's op
draws for the same seed; torch.nn.attention.varlen.varlen_attn on mytorch tensors; bad arguments raising."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mytorch
from mytorch.testing._compare import assert_aligned

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

DEV = "mytorch"
aten = torch.ops.aten


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _math(q, k, v, causal=False, scale=None, bias=None):
    """(B, H, L, E) attention and logsumexp on the CPU in q's dtype, GQA by repetition; causal top-left."""
    hq, hkv = q.shape[1], k.shape[1]
    k, v = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if bias is not None:
        s = s + bias
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s.float() if s.dtype != torch.float64 else s, -1)
    return torch.softmax(s, -1) @ v, lse


def _grads(fn, inputs, g):
    """fn's first output and the inputs' gradients for the cotangent g."""
    ts = [t.detach().requires_grad_() for t in inputs]
    out = fn(*ts)
    out = out[0] if isinstance(out, tuple) else out
    return [out.detach().cpu()] + [x.cpu() for x in torch.autograd.grad(out, ts, g.to(out.device, out.dtype))]


def _check(op_dev, op_ref, inputs, dtype, names):
    """The device op against the CPU math in `dtype` and in fp64, outputs and gradients."""
    g = _rand(*op_ref(*[t.double() for t in inputs]).shape, seed=9)
    dev = _grads(op_dev, [t.to(dtype).to(DEV) for t in inputs], g)
    ref = _grads(op_ref, [t.to(dtype) for t in inputs], g)
    gold = _grads(op_ref, [t.double() for t in inputs], g)
    for name, a, m, o in zip(names, dev, ref, gold):
        assert_aligned(a, m, o, name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_flash_matches_math_with_logsumexp(dtype, causal):
    q, k, v = _rand(2, 4, 37, 64, seed=1), _rand(2, 2, 37, 64, seed=2), _rand(2, 2, 37, 64, seed=3)
    q4 = q.to(dtype).to(DEV)
    out, lse, cq, ck, mq, mk, rng, unused, dbg = aten._scaled_dot_product_flash_attention(
        q4, k.to(dtype).to(DEV), v.to(dtype).to(DEV), is_causal=causal
    )
    assert (mq, mk) == (37, 37) and out.shape == q4.shape and out.stride() == q4.stride()
    assert lse.shape == (2, 4, 37) and lse.dtype == torch.float32
    assert rng.dtype == torch.uint64 and rng.shape == (2,) and unused.dtype == torch.uint64
    assert_aligned(
        lse.cpu(),
        _math(q.to(dtype), k.to(dtype), v.to(dtype), causal)[1],
        _math(q.double(), k.double(), v.double(), causal)[1],
        "logsumexp",
    )
    _check(
        lambda a, b, c: aten._scaled_dot_product_flash_attention(a, b, c, is_causal=causal)[0],
        lambda a, b, c: _math(a, b, c, causal)[0],
        (q, k, v),
        dtype,
        ["out", "dq", "dk", "dv"],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_efficient_layouts_padding_and_bias_gradient(dtype):
    q, k, v = _rand(2, 3, 45, 32, seed=4), _rand(2, 3, 29, 32, seed=5), _rand(2, 3, 29, 48, seed=6)
    bias = _rand(3, 45, 29, seed=7)
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(
        q.to(dtype).to(DEV), k.to(dtype).to(DEV), v.to(dtype).to(DEV), bias.to(dtype).to(DEV), True, scale=0.2
    )
    assert out.shape == (2, 3, 45, 48) and out.transpose(1, 2).is_contiguous()  # (B, L, H, E) memory order
    assert lse.shape == (2, 3, 64) and seed.dtype == torch.long and offset.dim() == 0
    want = _math(q.to(dtype), k.to(dtype), v.to(dtype), scale=0.2, bias=bias.to(dtype))[1]
    gold = _math(q.double(), k.double(), v.double(), scale=0.2, bias=bias.double())[1]
    assert_aligned(lse[..., :45].cpu(), want, gold, "logsumexp")
    no_lse = aten._scaled_dot_product_efficient_attention(q.to(DEV), k.to(DEV), v.to(DEV), None, False)[1]
    assert no_lse.shape == (2, 3, 0)  # compute_log_sumexp=False
    _check(
        lambda a, b, c, m: aten._scaled_dot_product_efficient_attention(a, b, c, m, True, scale=0.2)[0],
        lambda a, b, c, m: _math(a, b, c, scale=0.2, bias=m)[0],
        (q, k, v, bias),
        dtype,
        ["out", "dq", "dk", "dv", "dbias"],
    )
    qd, kd, vd = (t.to(DEV).requires_grad_() for t in (q, k, v))
    o = aten._scaled_dot_product_efficient_attention(qd, kd, vd, None, True, is_causal=True)[0]
    grads = torch.autograd.grad(o.sum(), (qd, kd, vd))
    assert all(g.transpose(1, 2).is_contiguous() for g in grads)  # the meta function's gradient layout


def _packed(lengths_q, lengths_k, hq, hkv, d, seed=0):
    tq, tk = sum(lengths_q), sum(lengths_k)
    cq = torch.tensor([0] + list(torch.tensor(lengths_q).cumsum(0)), dtype=torch.int32)
    ck = torch.tensor([0] + list(torch.tensor(lengths_k).cumsum(0)), dtype=torch.int32)
    return _rand(tq, hq, d, seed=seed), _rand(tk, hkv, d, seed=seed + 1), _rand(tk, hkv, d, seed=seed + 2), cq, ck


def _varlen_math(q, k, v, cq, ck, causal):
    """Per-sequence attention of packed (total, H, E) tensors, concatenated; logsumexp (H, total_q)."""
    outs, lses = [], []
    for i in range(len(cq) - 1):
        qi, ki, vi = (
            t[a:b].transpose(0, 1)[None]
            for t, (a, b) in ((q, (cq[i], cq[i + 1])), (k, (ck[i], ck[i + 1])), (v, (ck[i], ck[i + 1])))
        )
        o, lse = _math(qi, ki, vi, causal)
        outs.append(o[0].transpose(0, 1))
        lses.append(lse[0])
    return torch.cat(outs), torch.cat(lses, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_varlen_matches_per_sequence_math(dtype, causal):
    lq = [5, 17, 1, 33]
    lk = lq if causal else [9, 4, 12, 33]
    q, k, v, cq, ck = _packed(lq, lk, 4, 2, 32, seed=10)
    res = aten._flash_attention_forward(
        q.to(dtype).to(DEV),
        k.to(dtype).to(DEV),
        v.to(dtype).to(DEV),
        cq.to(DEV),
        ck.to(DEV),
        max(lq),
        max(lk),
        0.0,
        causal,
        False,
    )
    assert res[1].shape == (4, sum(lq)) and res[2].dtype == torch.uint64
    cql, ckl = cq.tolist(), ck.tolist()
    assert_aligned(
        res[1].cpu(),
        _varlen_math(q.to(dtype), k.to(dtype), v.to(dtype), cql, ckl, causal)[1],
        _varlen_math(q.double(), k.double(), v.double(), cql, ckl, causal)[1],
        "logsumexp",
    )
    _check(
        lambda a, b, c: aten._flash_attention_forward(
            a, b, c, cq.to(DEV), ck.to(DEV), max(lq), max(lk), 0.0, causal, False
        )[0],
        lambda a, b, c: _varlen_math(a, b, c, cql, ckl, causal)[0],
        (q, k, v),
        dtype,
        ["out", "dq", "dk", "dv"],
    )


def test_flash_dense_layout_and_varlen_attn_public_api():
    q, k, v = _rand(2, 21, 4, 64, seed=11), _rand(2, 21, 4, 64, seed=12), _rand(2, 21, 4, 64, seed=13)
    _check(
        lambda a, b, c: aten._flash_attention_forward(a, b, c, None, None, 21, 21, 0.0, True, False)[0],
        lambda a, b, c: _math(a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2), True)[0].transpose(1, 2),
        (q, k, v),
        torch.float32,
        ["out", "dq", "dk", "dv"],
    )
    qd = q.to(DEV)
    out, lse, rng, _, _ = aten._flash_attention_forward(qd, k.to(DEV), v.to(DEV), None, None, 21, 21, 0.0, True, False)
    assert out.shape == qd.shape and out.stride() == qd.stride()  # (B, L, H, E), as the meta function's empty_like
    assert lse.shape == (2, 4, 21) and lse.dtype == torch.float32 and rng.dtype == torch.uint64
    from torch.nn.attention.varlen import varlen_attn

    qp, kp, vp, cq, ck = _packed([7, 30, 12], [7, 30, 12], 4, 4, 64, seed=14)
    _check(
        lambda a, b, c: varlen_attn(a, b, c, cq.to(DEV), ck.to(DEV), 30, 30, window_size=(-1, 0)),
        lambda a, b, c: _varlen_math(a, b, c, cq.tolist(), ck.tolist(), True)[0],
        (qp, kp, vp),
        torch.bfloat16,
        ["out", "dq", "dk", "dv"],
    )


def test_dropout_draws_what_the_sdpa_hook_draws():
    q, k, v = (_rand(1, 2, 24, 16, seed=s).to(DEV) for s in (20, 21, 22))
    torch.mytorch.manual_seed(3)
    hook = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    torch.mytorch.manual_seed(3)
    flash = aten._scaled_dot_product_flash_attention(q, k, v, 0.3)
    torch.mytorch.manual_seed(3)
    eff = aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.3)
    torch.mytorch.manual_seed(3)
    dense = aten._flash_attention_forward(
        *(t.transpose(1, 2) for t in (q, k, v)), None, None, 24, 24, 0.3, False, False
    )[0].transpose(1, 2)
    torch.mytorch.manual_seed(3)
    cu = torch.tensor([0, 24], dtype=torch.int32, device=DEV)
    packed = aten._flash_attention_forward(
        *(t[0].transpose(0, 1) for t in (q, k, v)), cu, cu, 24, 24, 0.3, False, False
    )[0].transpose(0, 1)[None]
    for name, got in [("flash", flash[0]), ("efficient", eff[0]), ("dense", dense), ("varlen", packed)]:
        assert torch.equal(got.cpu(), hook.cpu()), name
    assert not torch.equal(aten._scaled_dot_product_flash_attention(q, k, v, 0.3)[0].cpu(), hook.cpu())
    # the backward regenerates the forward's mask from the rng state it returned
    qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
    torch.mytorch.manual_seed(4)
    o1 = F.scaled_dot_product_attention(qs, ks, vs, dropout_p=0.3)
    g1 = torch.autograd.grad(o1.sum(), (qs, ks, vs))
    torch.mytorch.manual_seed(4)
    o2 = aten._scaled_dot_product_flash_attention(qs, ks, vs, 0.3)[0]
    g2 = torch.autograd.grad(o2.sum(), (qs, ks, vs))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


def test_sdpa_backend_choice():
    q, k, v = (_rand(1, 2, 8, 16, seed=s).to(DEV) for s in (30, 31, 32))
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        ops = mytorch.audit(lambda: F.scaled_dot_product_attention(q, k, v)).ops
    assert "aten::_scaled_dot_product_efficient_attention" in ops
    ops = mytorch.audit(lambda: F.scaled_dot_product_attention(q, k, v)).ops
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in ops


def test_bad_arguments_raise():
    q = torch.randn(1, 2, 8, 16, device=DEV)
    k = torch.randn(1, 2, 6, 16, device=DEV)
    with pytest.raises(NotImplementedError, match="causal masking with a query length"):
        aten._scaled_dot_product_flash_attention(q, k, k, is_causal=True)
    with pytest.raises(NotImplementedError, match="sliding-window"):
        aten._flash_attention_forward(
            q.transpose(1, 2),
            q.transpose(1, 2),
            q.transpose(1, 2),
            None,
            None,
            8,
            8,
            0.0,
            False,
            False,
            window_size_left=4,
        )
    p = torch.randn(10, 2, 16, device=DEV)
    bad = torch.tensor([0, 4, 3, 10], dtype=torch.int32, device=DEV)
    with pytest.raises(RuntimeError, match="nondecreasing"):
        aten._flash_attention_forward(p, p, p, bad, bad, 4, 4, 0.0, False, False)
    over = torch.tensor([0, 4, 11], dtype=torch.int32, device=DEV)
    with pytest.raises(RuntimeError, match="from 0 to at most 10"):
        aten._flash_attention_forward(p, p, p, over, over, 7, 7, 0.0, False, False)
    with pytest.raises(RuntimeError, match="expected 4-D"):
        aten._scaled_dot_product_efficient_attention(p, p, p, None, False)
