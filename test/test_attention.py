"""Fused attention (issue: scaled_dot_product_attention on mytorch): F.scaled_dot_product_attention reaches
mytorch's fused kernel through PyTorch's PrivateUse1 hook, and its output and all three input gradients
stay within twice PyTorch's own math-path error against an fp64 reference (the FlashAttention test rule),
for odd lengths, q_len != kv_len, causal masking, GQA, head dims 32..256, masks and dropout."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mytorch
from mytorch.testing._compare import assert_aligned

DEV = "mytorch"
FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"


pytestmark = pytest.mark.native


def _inputs(b, hq, hkv, lq, lk, d, dv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, hq, lq, d, generator=g),
        torch.randn(b, hkv, lk, d, generator=g),
        torch.randn(b, hkv, lk, dv or d, generator=g),
    )


def _sdpa_all(q, k, v, dtype, device, **kw):
    ts = [t.to(dtype).to(device).detach().requires_grad_() for t in (q, k, v)]
    kw = dict(kw)
    mask = kw.pop("attn_mask", None)
    if mask is not None:
        mask = mask.to(device) if mask.dtype == torch.bool else mask.to(dtype).to(device)
    with sdpa_kernel([SDPBackend.MATH]) if device == "cpu" else _nullcontext():
        out = F.scaled_dot_product_attention(*ts, attn_mask=mask, **kw)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).to(dtype).to(device)
    grads = torch.autograd.grad(out, ts, g)
    return [out.detach().cpu()] + [x.cpu() for x in grads]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def assert_within_math_error(q, k, v, dtype, **kw):
    dev = _sdpa_all(q, k, v, dtype, DEV, **kw)
    math_ = _sdpa_all(q, k, v, dtype, "cpu", **kw)
    gold = _sdpa_all(q, k, v, torch.float64, "cpu", **kw)
    for name, a, m, g in zip(["out", "dq", "dk", "dv"], dev, math_, gold):
        assert_aligned(a, m, g, name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(
    "shape", [(1, 2, 2, 37, 53, 64), (2, 3, 3, 64, 64, 32), (1, 2, 2, 100, 7, 128), (1, 1, 1, 1, 300, 80)]
)
@pytest.mark.parametrize("causal", [False, True])
def test_matches_math_path_error_bound(dtype, shape, causal):
    b, hq, hkv, lq, lk, d = shape
    assert_within_math_error(*_inputs(b, hq, hkv, lq, lk, d), dtype, is_causal=causal)


@pytest.mark.parametrize("d", [32, 96, 256])
def test_head_dims_scale_and_value_dim(d):
    q, k, v = _inputs(1, 2, 2, 19, 23, d, dv=d // 2 if d > 32 else d)
    assert_within_math_error(q, k, v, torch.bfloat16, scale=0.3)


def test_gqa_masks_and_fp64():
    q, k, v = _inputs(2, 8, 2, 17, 29, 64)
    assert_within_math_error(q, k, v, torch.float16, enable_gqa=True)
    assert_within_math_error(q, k, v, torch.float16, enable_gqa=True, is_causal=True)
    bias = torch.randn(1, 1, 17, 29)
    assert_within_math_error(q[:, :2], k, v, torch.float32, attn_mask=bias)
    keep = torch.rand(17, 29) > 0.3
    keep[:, 0] = True  # no fully masked row (test_fully_masked_rows_* has them)
    assert_within_math_error(q[:, :2], k, v, torch.bfloat16, attn_mask=keep)
    assert_within_math_error(q[:, :2], k, v, torch.float64)


def test_fused_kernel_runs_and_sdpa_kernel_is_honoured():
    q, k, v = (t.to(DEV).requires_grad_() for t in _inputs(1, 2, 2, 8, 8, 16))
    ops = mytorch.audit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()).ops
    assert FUSED in ops and FUSED + "_backward" in ops
    with sdpa_kernel([SDPBackend.MATH]):
        ops = mytorch.audit(lambda: F.scaled_dot_product_attention(q, k, v)).ops
    assert FUSED not in ops  # the math path (on native GEMM / softmax kernels)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), pytest.raises(RuntimeError, match="No available kernel"):
        F.scaled_dot_product_attention(q, k, v)  # our backend and math both excluded: a clear error
    wide = torch.randn(1, 1, 4, 300, device=DEV)  # head dim above 256: the math path, still native kernels
    ops = mytorch.audit(lambda: F.scaled_dot_product_attention(wide, wide, wide)).ops
    assert FUSED not in ops
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).to(DEV)
    x = torch.randn(2, 5, 32, device=DEV)
    ops = mytorch.audit(lambda: mha(x, x, x, need_weights=False)[0].sum().backward()).ops
    assert FUSED in ops


def test_dropout_statistics_reproducibility_and_backward():
    p, s, d = 0.4, 64, 64
    q = torch.zeros(1, 2, 48, d, device=DEV, requires_grad=True)
    k = torch.zeros(1, 2, s, d, device=DEV, requires_grad=True)
    v = torch.eye(s, d).expand(1, 2, s, d).contiguous().to(DEV).requires_grad_()
    torch.manual_seed(0)
    torch.mytorch.manual_seed(123)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    z = (out * s * (1 - p)).detach().cpu()  # uniform attention and V = I: out = keep / (s (1 - p))
    assert torch.allclose(z, z.round(), atol=1e-4) and set(z.round().unique().tolist()) <= {0.0, 1.0}
    kept = z.mean().item()
    assert abs(kept - (1 - p)) < 4 * math.sqrt(p * (1 - p) / z.numel())
    torch.mytorch.manual_seed(123)
    again = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    assert torch.equal(again.cpu(), out.cpu())  # reproducible for a seed
    assert not torch.equal(F.scaled_dot_product_attention(q, k, v, dropout_p=p).cpu(), out.cpu())
    # the backward regenerates the same mask: compare with the explicit-mask math on the CPU
    g = torch.randn(out.shape)
    torch.mytorch.manual_seed(5)
    qr, kr, vr = (torch.randn(t.shape).to(DEV).requires_grad_() for t in (q, k, v))
    o = F.scaled_dot_product_attention(qr, kr, vr, dropout_p=p)
    torch.mytorch.manual_seed(5)
    probe = F.scaled_dot_product_attention(q, k, v, dropout_p=p).detach().cpu() * s * (1 - p)
    keep = probe.round()[..., :s] if probe.shape[-1] >= s else probe.round()
    grads = torch.autograd.grad(o, (qr, kr, vr), g.to(DEV))
    refs = {}
    for dt in (torch.float32, torch.float64):  # the explicit-mask math on the CPU, and its golden values
        qc, kc, vc = (t.detach().cpu().to(dt).requires_grad_() for t in (qr, kr, vr))
        att = torch.softmax(qc @ kc.transpose(-1, -2) / math.sqrt(d), -1) * keep.to(dt) / (1 - p)
        refs[dt] = [(att @ vc).detach()] + list(torch.autograd.grad(att @ vc, (qc, kc, vc), g.to(dt)))
    for name, got, want, gold in zip(
        ["out", "dq", "dk", "dv"], [o.detach(), *grads], refs[torch.float32], refs[torch.float64]
    ):
        assert_aligned(got, want, gold, name)


def test_gradcheck_float64():
    q, k, v = (t.double().to(DEV).requires_grad_() for t in _inputs(1, 2, 1, 5, 7, 8))
    assert torch.autograd.gradcheck(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, enable_gqa=True), (q, k, v)
    )


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_hugging_face_model_uses_the_fused_kernel(arch):
    transformers = pytest.importorskip("transformers")  # installed by scripts/setup.sh
    torch.manual_seed(0)
    if arch == "llama":  # grouped-query attention, causal
        cfg = transformers.LlamaConfig(
            vocab_size=128,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
        make = transformers.LlamaForCausalLM
    else:
        cfg = transformers.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64)
        make = transformers.GPT2LMHeadModel
    cfg._attn_implementation = "sdpa"
    cpu = make(cfg).eval()
    gold = copy.deepcopy(cpu).double()  # the golden values: the same model in float64
    dev = make(cfg).eval().to(DEV)
    dev.load_state_dict(cpu.state_dict())
    ids = torch.randint(0, 128, (2, 19))
    ref = cpu(ids, labels=ids)
    ref.loss.backward()
    gold_out = gold(ids, labels=ids)
    gold_out.loss.backward()
    box = {}
    report = mytorch.audit(lambda: box.setdefault("out", dev(ids.to(DEV), labels=ids.to(DEV))).loss.backward())
    assert FUSED in report.ops and FUSED + "_backward" in report.ops
    assert_aligned(box["out"].loss.detach(), ref.loss.detach(), gold_out.loss.detach(), "loss")
    for (name, p), q, p64 in zip(cpu.named_parameters(), dev.parameters(), gold.parameters()):
        assert_aligned(q.grad, p.grad, p64.grad, name)


def test_decoding_splits_a_long_kv_cache():
    # one query row against 3000 keys takes the split-KV path (chunks of 256 combined per row)
    q, k, v = _inputs(2, 8, 2, 1, 3000, 64)
    assert_within_math_error(q, k, v, torch.bfloat16, enable_gqa=True)
    assert_within_math_error(q[:, :2], k, v, torch.float32, attn_mask=torch.randn(1, 1, 1, 3000))
    assert_within_math_error(
        q[:, :2], k, v, torch.float16, is_causal=True
    )  # causal decoding: top-left, key 0 only (not split)


def test_outputs_take_the_layouts_the_meta_functions_promise():
    """Note [Attention output layout]: a query transposed from (B, L, H, E), as Hugging Face models pass it, gives
    an output and gradients with the strides of PyTorch's meta functions (compiled graphs assert them)."""
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    bwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    q, k, v = (torch.randn(2, 16, 4, 8).transpose(1, 2) for _ in range(3))
    dev, meta = [[t.to(d) for t in (q, k, v)] for d in ("mytorch", "meta")]
    out, lse, *rest = op(*dev, is_causal=True)
    out_m, lse_m, *_ = op(*meta, is_causal=True)
    assert out.stride() == out_m.stride() and out.stride() != out.contiguous().stride()
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_aligned(out, ref, F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True), "out")
    grad = torch.randn_like(ref).transpose(1, 2).contiguous().transpose(1, 2)
    grads = bwd(
        grad.to("mytorch"),
        *dev,
        None,
        [True, True, True, False],
        out,
        lse,
        rest[0],
        rest[1],
        rest[2],
        rest[3],
        0.0,
        True,
        rest[4],
        rest[5],
    )
    grads_m = bwd(
        grad.to("meta"),
        *meta,
        None,
        [True, True, True, False],
        out_m,
        lse_m,
        None,
        None,
        16,
        16,
        0.0,
        True,
        torch.empty((), dtype=torch.long, device="meta"),
        torch.empty((), dtype=torch.long, device="meta"),
    )
    wants, golds = (
        [
            torch.autograd.grad(F.scaled_dot_product_attention(*ts, is_causal=True), ts, grad.to(dt))
            for ts in [[t.to(dt).requires_grad_() for t in (q, k, v)]]
        ][0]
        for dt in (torch.float32, torch.float64)
    )
    for got, promised, want, gold in zip(grads[:3], grads_m[:3], wants, golds):
        assert got.stride() == promised.stride()
        assert_aligned(got, want, gold, "gradient")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fully_masked_rows_give_zero_and_finite_gradients_as_pytorch(dtype):
    """Note [Fused attention]: a query row whose every key is masked (left padding under a causal mask) gives
    output 0 and finite gradients, as PyTorch's CPU and CUDA kernels: in the tiled path (boolean and additive
    -inf masks), and in the decoding path."""
    q, k, v = _inputs(2, 2, 2, 12, 40, 32)
    keep = torch.rand(2, 1, 12, 40, generator=torch.Generator().manual_seed(3)) > 0.3
    keep[0, :, 3] = False
    keep[1, :, :5] = False
    assert_within_math_error(q, k, v, dtype, attn_mask=keep)
    additive = torch.zeros(2, 1, 12, 40).masked_fill(keep.logical_not(), float("-inf"))
    assert_within_math_error(q, k, v, dtype, attn_mask=additive)
    qd, kd, vd = _inputs(1, 2, 2, 1, 700, 32)  # decoding: the split path, every key masked
    assert_within_math_error(qd, kd, vd, dtype, attn_mask=torch.zeros(1, 1, 1, 700, dtype=torch.bool))
    dev = _sdpa_all(q, k, v, dtype, DEV, attn_mask=keep)
    assert all(t.isfinite().all() for t in dev)
    assert dev[0][0, :, 3].abs().max() == 0 and dev[0][1, :, :5].abs().max() == 0
