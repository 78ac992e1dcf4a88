"""The fused LLM ops (mytorch.ops: swiglu/geglu, rotary_embedding; Note [Fused LLM ops]) against the aten
compositions they replace: each result and gradient within the alignment rule of the CPU at float64, PyTorch's own
error being the composition's on the CPU at the same dtype. Runs on sim (the twins) and on the emulated CUDA build
(the kernels), with the CPU fallback forbidden."""

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

import mytorch
from mytorch.testing._compare import assert_aligned

pytestmark = pytest.mark.native

DEV = "mytorch"
# The emulated build runs the CUDA kernels a thousand times slower: it takes the bfloat16 cases (the 16-byte
# vector path and the float32 opmath) and every test that is not a dtype sweep.
EMU = pytest.mark.every_runtime
DTYPES = [torch.float32, pytest.param(torch.bfloat16, marks=EMU), torch.float16]


def run(fn, inputs, grad_out=None, device="cpu", dtype=None):
    """fn(*inputs) on `device` at `dtype` (the inputs' own dtype when None); returns (output, input grads)."""
    xs = [x.detach().to(device=device, dtype=dtype or x.dtype).requires_grad_(x.requires_grad) for x in inputs]
    out = fn(*xs)
    grads = []
    if grad_out is not None:
        out.backward(grad_out.to(device=device, dtype=out.dtype))
        grads = [x.grad for x in xs if x.requires_grad]
    return out, grads


def check(fused, composition, inputs, what) -> int:
    """The fused op on mytorch against the composition on the CPU (same dtype) and at float64: value and grads.
    Returns how many gradients were compared (the callers assert it: every input's)."""
    torch.manual_seed(1)
    out_ref, _ = run(composition, inputs)
    grad_out = torch.randn(out_ref.shape, dtype=torch.float64)
    dev_out, dev_grads = run(fused, inputs, grad_out, device=DEV)
    ref_out, ref_grads = run(composition, inputs, grad_out)
    gold_out, gold_grads = run(composition, inputs, grad_out, dtype=torch.float64)
    assert_aligned(dev_out, ref_out, gold_out, f"{what} output")
    assert len(dev_grads) == len(ref_grads) > 0
    for i, (d, r, g) in enumerate(zip(dev_grads, ref_grads, gold_grads)):
        assert_aligned(d, r, g, f"{what} grad {i}")
    return len(dev_grads)


# ---- SwiGLU / GeGLU ----------------------------------------------------------------------------------------------
ACTS = {
    "swiglu": (lambda g, u: mytorch.ops.swiglu(g, u), lambda g: F.silu(g)),
    "geglu": (lambda g, u: mytorch.ops.geglu(g, u), lambda g: F.gelu(g)),
    "geglu_tanh": (lambda g, u: mytorch.ops.geglu(g, u, approximate="tanh"), lambda g: F.gelu(g, approximate="tanh")),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("shape", [(4, 7, 64), (3, 5, 37), (1, 1)])
def test_glu_matches_the_composition(act, dtype, shape):
    fused, a = ACTS[act]
    gate = torch.randn(shape, dtype=dtype, requires_grad=True)
    up = torch.randn(shape, dtype=dtype, requires_grad=True)
    assert check(fused, lambda g, u: a(g) * u, [gate, up], f"{act} {dtype} {shape}") == 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [64, 19])
def test_glu_packed_gate_up(dtype, cols):
    """One packed projection [..., 2 * I]: the halves are read as views and the gradient is one buffer."""
    gate_up = torch.randn(3, 6, 2 * cols, dtype=dtype, requires_grad=True)
    assert check(mytorch.ops.swiglu, lambda x: F.silu(x[..., :cols]) * x[..., cols:], [gate_up], f"packed {dtype}") == 1
    y = mytorch.ops.swiglu(gate_up.detach().to(DEV).requires_grad_())
    assert y.shape == (3, 6, cols)


@EMU
def test_glu_strided_operands():
    """Transposed and sliced operands: rows at any stride, or a copy where the rows are not evenly spaced."""
    base = torch.randn(6, 4, 40)
    gate = base.transpose(0, 1)[..., :32].requires_grad_()  # rows not evenly spaced: copied
    up = torch.randn(4, 6, 64)[..., ::2].requires_grad_()  # last dim strided: copied
    gate_t = gate.detach().clone().requires_grad_()
    assert check(lambda g, u: mytorch.ops.swiglu(g, u), lambda g, u: F.silu(g) * u, [gate_t, up], "strided") == 2
    g_dev = base.to(DEV).transpose(0, 1)[..., :32]
    u_dev = torch.randn(4, 6, 32).to(DEV)
    assert_aligned(mytorch.ops.swiglu(g_dev, u_dev), F.silu(gate.detach()) * u_dev.cpu(), what="strided view")


@EMU
def test_glu_keeps_only_its_inputs():
    """The backward is recomputed from gate and up: the graph saves those two tensors and nothing else."""
    gate = torch.randn(8, 32, device=DEV, requires_grad=True)
    up = torch.randn(8, 32, device=DEV, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        mytorch.ops.swiglu(gate, up)
    assert len(saved) == 2 and {t.data_ptr() for t in saved} == {gate.data_ptr(), up.data_ptr()}


@EMU
def test_glu_bad_input_raises():
    g = torch.randn(4, 8, device=DEV)
    with pytest.raises(RuntimeError, match="same shape"):
        mytorch.ops.swiglu(g, torch.randn(4, 7, device=DEV))
    with pytest.raises(RuntimeError, match="even last dim"):
        mytorch.ops.swiglu(torch.randn(4, 7, device=DEV))
    with pytest.raises(RuntimeError, match="floating dtype"):
        mytorch.ops.swiglu(
            torch.ones(4, 8, dtype=torch.long, device=DEV), torch.ones(4, 8, dtype=torch.long, device=DEV)
        )
    with pytest.raises(RuntimeError, match="activation"):
        torch.ops.mytorch.glu(g, g, "relu")
    with pytest.raises(ValueError, match="approximate"):
        mytorch.ops.geglu(g, g, approximate="erf")


# ---- GPT-OSS's clamped SwiGLU (a pointwise table's Op row: docs/contributing.md, "Adding a fused op") -------------
def _gpt_oss_gate(gate, up, alpha=1.702, limit=7.0):
    """transformers' GptOssExperts._apply_gate on the two halves, word for word."""
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    return (up + 1) * glu


def _beyond_the_limit(shape, dtype, limit=7.0):
    """Operands of which about a third lies beyond +-limit, a few exactly at it: every branch of the clamps."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(shape, generator=g) * 1.5 * limit
    edges = torch.tensor([limit, -limit, 0.0, -0.5])
    x.view(-1)[: min(4, x.numel())] = edges[: min(4, x.numel())]
    return x.to(dtype).requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 7, 64), (3, 37), (1,)])
def test_clamped_swiglu_matches_gpt_oss(dtype, shape):
    gate, up = _beyond_the_limit(shape, dtype), _beyond_the_limit(shape, dtype).flip(0).detach().requires_grad_()
    assert check(mytorch.ops.clamped_swiglu, _gpt_oss_gate, [gate, up], f"clamped_swiglu {dtype} {shape}") == 2


@EMU
def test_clamped_swiglu_packed_interleaved_and_its_parameters():
    """GPT-OSS's interleaved gate_up (strided halves, one gradient buffer); alpha and limit reach the kernels: the
    check against a composition with other parameters fails (the negative control: the clamps are exercised)."""
    gate_up = _beyond_the_limit((5, 2 * 24), torch.float32, limit=3.0)

    def fused(x):
        return mytorch.ops.clamped_swiglu(x, alpha=1.2, limit=3.0)

    def composition(x, limit=3.0):
        return _gpt_oss_gate(x[..., ::2], x[..., 1::2], 1.2, limit)

    assert check(fused, composition, [gate_up], "clamped_swiglu packed") == 1
    with pytest.raises(AssertionError):
        check(fused, lambda x: composition(x, limit=7.0), [gate_up], "clamped_swiglu, the wrong limit")


@EMU
def test_clamped_swiglu_nan_and_infinities_as_the_composition():
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 7.0, -7.0, 8.0])
    gate, up = special.clone().requires_grad_(), special.flip(0).clone().requires_grad_()
    assert check(mytorch.ops.clamped_swiglu, _gpt_oss_gate, [gate, up], "clamped_swiglu nan/inf") == 2


def test_clamped_swiglu_keeps_gate_and_up_and_compiles():
    """Autograd keeps the inputs only (no intermediate), and torch.compile traces the fake kernel (the
    reference on fake tensors) and keeps the op as mytorch's kernel."""
    gate, up = (torch.randn(8, 16, device=DEV, requires_grad=True) for _ in range(2))
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        mytorch.ops.clamped_swiglu(gate, up)
    assert len(saved) == 2 and {t.data_ptr() for t in saved} == {gate.data_ptr(), up.data_ptr()}
    fn = torch.compile(lambda g, u: mytorch.ops.clamped_swiglu(g, u, limit=0.5) * 2, fullgraph=True)
    got, (code,) = run_and_get_code(fn, gate.detach(), up.detach())
    assert "clamped_swiglu" in code
    assert_aligned(got.cpu(), _gpt_oss_gate(gate.detach().cpu(), up.detach().cpu(), limit=0.5) * 2, None, "compiled")


def test_clamped_swiglu_bad_input_raises():
    ints = torch.ones(3, dtype=torch.int64, device=DEV)
    with pytest.raises(RuntimeError, match="expected floating-point tensors"):
        mytorch.ops.clamped_swiglu(ints, ints)
    with pytest.raises(RuntimeError, match="same device|device"):
        mytorch.ops.clamped_swiglu(torch.ones(3, device=DEV), torch.ones(3))
    with pytest.raises(RuntimeError, match="size"):
        mytorch.ops.clamped_swiglu(torch.ones(3, device=DEV), torch.ones(4, device=DEV))


# ---- rotary embedding --------------------------------------------------------------------------------------------
def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rotate_every_two(x):
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


def rope_composition(x, cos, sin, rot, interleaved):
    """transformers' apply_rotary_pos_emb for one tensor (rotate_every_two for GPT-J), partial rotary as Phi."""
    xr, xp = x[..., :rot], x[..., rot:]
    rotated = rotate_every_two(xr) if interleaved else rotate_half(xr)
    return torch.cat([xr * cos + rotated * sin, xp], dim=-1)


def tables(batch, seq, rot, interleaved, width=None, dtype=torch.float32):
    ang = torch.rand(batch, seq, rot // 2) * 6.28
    c, s = ang.cos(), ang.sin()
    if width == rot // 2:
        return c.to(dtype), s.to(dtype)
    if interleaved:
        return c.repeat_interleave(2, -1).to(dtype), s.repeat_interleave(2, -1).to(dtype)
    return torch.cat([c, c], -1).to(dtype), torch.cat([s, s], -1).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rot", [32, 16])  # head dim 32: full and partial rotary
def test_rope_matches_the_composition(dtype, interleaved, rot):
    b, h, s, d = 2, 3, 5, 32
    cos, sin = tables(b, s, rot, interleaved, dtype=dtype)
    q = torch.randn(b, h, s, d, dtype=dtype, requires_grad=True)

    def fused(x):
        return mytorch.ops.rotary_embedding(x, None, cos.to(x.device), sin.to(x.device), interleaved=interleaved)[0]

    def composition(x):
        c, si = cos.to(x.dtype).unsqueeze(1), sin.to(x.dtype).unsqueeze(1)
        return rope_composition(x, c, si, rot, interleaved)

    assert check(fused, composition, [q], f"rope {dtype} interleaved={interleaved} rot={rot}") == 1


@pytest.mark.parametrize("interleaved", [False, True])
@EMU
def test_rope_half_width_tables_and_bshd_layout(interleaved):
    """cos/sin per pair (width rot / 2) and q in [batch, seq, heads, dim] read through a transposed view."""
    b, h, s, d = 2, 4, 6, 16
    c_half, s_half = tables(b, s, d, interleaved, width=d // 2)
    c_full, s_full = tables(1, 1, d, interleaved)  # shape only
    c_full = c_half.repeat_interleave(2, -1) if interleaved else torch.cat([c_half, c_half], -1)
    s_full = s_half.repeat_interleave(2, -1) if interleaved else torch.cat([s_half, s_half], -1)
    q_bshd = torch.randn(b, s, h, d)
    dev_q = q_bshd.to(DEV).transpose(1, 2)  # bhsd view of bshd memory
    got, _ = mytorch.ops.rotary_embedding(
        dev_q, None, c_half.to(DEV), s_half.to(DEV), interleaved=interleaved, rotary_dim=d
    )
    want = rope_composition(q_bshd.transpose(1, 2), c_full.unsqueeze(1), s_full.unsqueeze(1), d, interleaved)
    gold = rope_composition(
        q_bshd.transpose(1, 2).double(), c_full.double().unsqueeze(1), s_full.double().unsqueeze(1), d, interleaved
    )
    assert_aligned(got, want, gold, "half-width tables, bshd")


@EMU
def test_rope_position_ids_and_in_place():
    b, h, s, d, positions = 2, 2, 5, 8, 11
    ang = torch.rand(positions, d // 2) * 6.28
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    pos = torch.randint(0, positions, (b, s))
    q, k = torch.randn(b, h, s, d), torch.randn(b, 1, s, d)
    want_q = rope_composition(q, cos[pos].unsqueeze(1), sin[pos].unsqueeze(1), d, False)
    want_k = rope_composition(k, cos[pos].unsqueeze(1), sin[pos].unsqueeze(1), d, False)
    dq, dk = q.to(DEV), k.to(DEV)
    got_q, got_k = mytorch.ops.rotary_embedding(dq, dk, cos.to(DEV), sin.to(DEV), position_ids=pos.to(DEV))
    assert_aligned(got_q, want_q, what="q by position ids")
    assert_aligned(got_k, want_k, what="k by position ids")
    with torch.no_grad():
        out_q, out_k = mytorch.ops.rotary_embedding(
            dq, dk, cos.to(DEV), sin.to(DEV), position_ids=pos.to(DEV), inplace=True
        )
    assert out_q is dq and out_k is dk
    assert_aligned(dq, want_q, what="q in place")
    assert_aligned(dk, want_k, what="k in place")


@EMU
def test_rope_complex_form():
    """DeepSeek-V2's apply_rotary_emb: x's pairs as complex numbers times freqs_cis."""
    b, s, h, d = 2, 5, 3, 16
    freqs = torch.polar(torch.ones(s, d // 2), torch.rand(s, d // 2) * 6.28)
    x = torch.randn(b, s, h, d)
    xc = torch.view_as_complex(x.reshape(b, s, h, d // 2, 2))
    want = torch.view_as_real(xc * freqs.view(1, s, 1, d // 2)).flatten(3)
    got = mytorch.ops.rotary_embedding_complex(x.to(DEV), freqs.to(DEV))
    assert_aligned(got, want, what="complex form")


@EMU
def test_rope_bad_input_raises():
    q = torch.randn(1, 2, 3, 8, device=DEV)
    cos = torch.randn(1, 3, 8, device=DEV)
    with pytest.raises(RuntimeError, match="even rotary dim"):
        mytorch.ops.rotary_embedding(q, None, cos, cos, rotary_dim=7)
    with pytest.raises(RuntimeError, match="width"):
        mytorch.ops.rotary_embedding(q, None, cos[..., :3], cos[..., :3], rotary_dim=8)
    with pytest.raises(RuntimeError, match="broadcast"):
        mytorch.ops.rotary_embedding(q, None, torch.randn(1, 4, 8, device=DEV), torch.randn(1, 4, 8, device=DEV))
    with pytest.raises(IndexError, match="out of bounds"):
        table = torch.randn(4, 8, device=DEV)
        out, _ = mytorch.ops.rotary_embedding(q, None, table, table, position_ids=torch.full((1, 3), 9, device=DEV))
        out.cpu()  # on the CUDA kernels the error is raised at the next synchronisation (Note [Device-side errors])
    with pytest.raises(NotImplementedError, match="cos/sin"):
        mytorch.ops.rotary_embedding(q, None, cos.requires_grad_(), cos)
    with pytest.raises(RuntimeError, match="internal overlap"):
        torch.ops.mytorch.rope_(torch.randn(1, 8, device=DEV).expand(3, 8), cos[0], cos[0], None, False, 0)


@pytest.mark.slow
def test_fused_ops_stay_extern_kernels_in_compiled_graphs():
    """torch.compile keeps the ops as calls of their kernels (fake kernels trace them), with the same results."""

    def block(x, gate_up, cos, sin, w, t):
        q, _ = mytorch.ops.rotary_embedding(x, None, cos, sin)
        y = mytorch.ops.swiglu(gate_up)
        return y + q.sum() + mytorch.ops.linear_cross_entropy(y, w, t)

    args = [torch.randn(2, 2, 4, 8), torch.randn(2, 4, 32), *tables(2, 4, 8, False), torch.randn(10, 16)]
    args.append(torch.randint(0, 10, (2, 4)))
    dev_args = [a.to(DEV) for a in args]
    eager = block(*dev_args)
    compiled, codes = run_and_get_code(torch.compile(block, fullgraph=True), *dev_args)
    assert_aligned(compiled, eager.cpu(), what="compiled")
    code = "\n".join(codes)
    for op in ("glu", "rope", "linear_cross_entropy"):
        assert f"torch.ops.mytorch.{op}.default" in code, (op, code)


# ---- linear + cross-entropy --------------------------------------------------------------------------------------
def lce_composition(h, w, t, b, ignore_index=-100, label_smoothing=0.0, reduction="mean", softcap=None, z_loss=0.0):
    """transformers' causal-LM loss over logits.float(), with Gemma-2's softcap and PaLM's z-loss."""
    logits = F.linear(h, w, b).float() if h.dtype != torch.float64 else F.linear(h, w, b)
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    loss = F.cross_entropy(logits, t, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction)
    if z_loss:
        valid = t != ignore_index
        z = torch.where(valid, z_loss * torch.logsumexp(logits, -1) ** 2, torch.zeros((), dtype=logits.dtype))
        loss = loss + (z.sum() / valid.sum() if reduction == "mean" else z.sum() if reduction == "sum" else z)
    return loss


def lce_inputs(dtype, rows=37, hidden=16, vocab=100, bias=True):
    torch.manual_seed(3)
    h = torch.randn(rows, hidden, dtype=dtype, requires_grad=True)
    w = (torch.randn(vocab, hidden) * 0.3).to(dtype).requires_grad_()
    t = torch.randint(0, vocab, (rows,))
    t[::7] = -100
    b = torch.randn(vocab, dtype=dtype, requires_grad=True) if bias else None
    return h, w, t, b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_linear_cross_entropy_matches_the_composition(dtype, reduction):
    """37 rows in chunks of 16 (chunk_rows), ignored rows, label smoothing, bias: loss and every gradient."""
    h, w, t, b = lce_inputs(dtype)
    assert mytorch.ops.cross_entropy.chunk_rows(37, 100, 16) == 16

    def fused(h, w, b):
        return mytorch.ops.linear_cross_entropy(h, w, t.to(h.device), b, label_smoothing=0.1, reduction=reduction)

    def composition(h, w, b):
        return lce_composition(h, w, t, b, label_smoothing=0.1, reduction=reduction)

    assert check(fused, composition, [h, w, b], f"linear_cross_entropy {dtype} {reduction}") == 3


@EMU
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_cross_entropy_softcap_and_z_loss(dtype):
    h, w, t, _ = lce_inputs(dtype, bias=False)
    kw = dict(softcap=3.0, z_loss=1e-2)

    def fused(h, w):
        return mytorch.ops.linear_cross_entropy(h, w, t.to(h.device), **kw)

    assert check(fused, lambda h, w: lce_composition(h, w, t, None, **kw), [h, w], f"softcap and z-loss {dtype}") == 2
    loss, z = mytorch.ops.linear_cross_entropy(h.to(DEV), w.to(DEV), t.to(DEV), **kw, return_z_loss=True)
    valid = t != -100
    logits = 3.0 * torch.tanh((h.double() @ w.double().t()) / 3.0)
    z_gold = (1e-2 * torch.logsumexp(logits, -1)[valid] ** 2).mean()
    z_ref = (1e-2 * torch.logsumexp(3.0 * torch.tanh((h @ w.t()).float() / 3.0), -1)[valid] ** 2).mean()
    assert_aligned(z, z_ref, z_gold, "z-loss term")


@EMU
def test_linear_cross_entropy_never_holds_the_logits():
    """Peak device memory of the fused forward + backward against the unfused one's: the logits (rows x vocab) are
    the unfused op's largest tensors, the fused op's chunks are the size of the hidden states."""
    rows, hidden, vocab = 256, 64, 8192
    h, w, t, _ = lce_inputs(torch.float32, rows, hidden, vocab, bias=False)
    peaks = {}
    fns = {
        "fused": lambda h, w, t: mytorch.ops.linear_cross_entropy(h, w, t),
        "unfused": lambda h, w, t: F.cross_entropy(h @ w.t(), t),
    }
    for fn in fns.values():  # once first: what a first GEMM allocates (a GEMM library's workspace) stays
        fn(h.detach().to(DEV).requires_grad_(), w.detach().to(DEV).requires_grad_(), t.to(DEV)).backward()
    for name, fn in fns.items():
        hd, wd, td = h.detach().to(DEV).requires_grad_(), w.detach().to(DEV).requires_grad_(), t.to(DEV)
        torch.mytorch.synchronize()
        base = torch.mytorch.memory_allocated()
        torch.mytorch.reset_peak_memory_stats()
        fn(hd, wd, td).backward()
        torch.mytorch.synchronize()
        peaks[name] = torch.mytorch.max_memory_allocated() - base
        del hd, wd
    logits_bytes = rows * vocab * 4
    assert peaks["unfused"] >= 2 * logits_bytes, peaks  # the logits and their gradient at least
    assert peaks["fused"] < 0.35 * peaks["unfused"], peaks
    assert peaks["fused"] < logits_bytes, peaks


@EMU
def test_linear_cross_entropy_bad_input_raises():
    h, w = torch.randn(4, 8, device=DEV), torch.randn(10, 8, device=DEV)
    t = torch.tensor([1, 2, 3, 4], device=DEV)
    with pytest.raises(ValueError, match="reduction"):
        mytorch.ops.linear_cross_entropy(h, w, t, reduction="avg")
    with pytest.raises(ValueError, match="weight"):
        mytorch.ops.linear_cross_entropy(h, torch.randn(10, 9, device=DEV), t)
    with pytest.raises(ValueError, match="target of shape"):
        mytorch.ops.linear_cross_entropy(h, w, t[:3])
    with pytest.raises(TypeError, match="integer class targets"):
        mytorch.ops.linear_cross_entropy(h, w, t.float())
    with pytest.raises(TypeError, match="one dtype"):
        mytorch.ops.linear_cross_entropy(h.double(), w, t)
    with pytest.raises(IndexError, match="out of bounds"):
        mytorch.ops.linear_cross_entropy(h, w, torch.tensor([1, 2, 30, 4], device=DEV)).cpu()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pytorch_chunked_linear_cross_entropy_accumulates_in_float32(dtype):
    """PyTorch's own chunked F.linear_cross_entropy picks its accumulation dtype per device type; a mytorch device
    gets the CPU's pick, float32 (ops/cross_entropy.py), where an unlisted device gets the input's dtype (the
    second assertion: what mytorch got before, and what made the alignment's chunked cases mismatch). The loss
    and gradients then align with the CPU's under the shared rule."""
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    opts = LinearCrossEntropyOptions()
    assert opts._adjust(64, 16, 48, dtype, torch.device(DEV)).acc_dtype == torch.float32
    assert opts._adjust(64, 16, 48, dtype, torch.device("meta")).acc_dtype == dtype
    g = torch.Generator().manual_seed(0)
    h = torch.randn(64, 16, generator=g).to(dtype)
    w = (torch.randn(48, 16, generator=g) / 4).to(dtype)
    t = torch.randint(0, 48, (64,), generator=g)
    t[::7] = -100  # ignored rows

    def run(device, dt, options):
        hh = h.to(device, dt, copy=True).requires_grad_()
        ww = w.to(device, dt, copy=True).requires_grad_()
        loss = F.linear_cross_entropy(hh, ww, t.to(device), ignore_index=-100, options=options)
        loss.backward()
        return [x.detach().cpu() for x in (loss, hh.grad, ww.grad)]

    gold, cpu, ours = run("cpu", torch.float64, None), run("cpu", dtype, opts), run(DEV, dtype, opts)
    for i, name in enumerate(("loss", "grad_input", "grad_weight")):
        assert_aligned(ours[i], cpu[i], gold[i], name)


# ---- MoE routing ---------------------------------------------------------------------------------------------------
def topk_composition(
    logits, k, score="softmax", renormalize=True, bias=None, n_group=1, topk_group=1, group_top=1, scaling=1.0
):
    """transformers' routers (Mixtral/Qwen-MoE softmax + top-k + renormalise; DeepSeek-V3 sigmoid + expert bias +
    grouped top-k + scaling) in float32, ids by a stable sort."""
    from mytorch.ops.moe import _topk_reference

    return _topk_reference(logits, k, score, renormalize, bias, n_group, topk_group, group_top, scaling)


ROUTERS = {
    "mixtral": dict(k=2),
    "qwen_no_renorm": dict(k=4, renormalize=False),
    "deepseek_v3": dict(k=4, score="sigmoid", n_group=4, topk_group=2, group_top=2, scaling=2.5, bias=True),
    "deepseek_v2": dict(k=3, n_group=8, topk_group=3, group_top=1, renormalize=False),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("router", sorted(ROUTERS))
def test_moe_topk_matches_the_router(router, dtype):
    kw = dict(ROUTERS[router])
    torch.manual_seed(5)
    tokens, experts = 45, 64
    logits = torch.randn(tokens, experts, dtype=dtype, requires_grad=True)
    bias = (torch.randn(experts) * 0.1) if kw.pop("bias", False) else None
    group_score = {1: "max", 2: "top2"}[kw.pop("group_top", 1)] if "n_group" in kw else None
    comp_kw = dict(kw, bias=bias, group_top={"max": 1, "top2": 2, None: 1}[group_score])
    _, ids_ref = topk_composition(logits.detach(), **comp_kw)
    w_dev, ids_dev = mytorch.ops.moe_topk(
        logits.detach().to(DEV), expert_bias=bias.to(DEV) if bias is not None else None, group_score=group_score, **kw
    )
    assert torch.equal(ids_dev.cpu(), ids_ref), f"{router}: the picked experts differ"

    def fused(x):
        b = bias.to(x.device) if bias is not None else None
        return mytorch.ops.moe_topk(x, expert_bias=b, group_score=group_score, **kw)[0]

    def composition(x):  # the weights of the picks the dtype's own reference made
        return topk_composition(x, **comp_kw)[0]

    assert check(fused, composition, [logits], f"moe_topk {router} {dtype}") == 1


@EMU
def test_moe_permute_groups_rows_by_expert():
    torch.manual_seed(6)
    tokens, k, experts, hidden = 23, 3, 8, 16
    x = torch.randn(tokens, hidden, requires_grad=True)
    ids = torch.stack([torch.randperm(experts)[:k] for _ in range(tokens)])
    xd = x.detach().to(DEV).requires_grad_()
    rows, offsets, pos = mytorch.ops.moe_permute(xd, ids.to(DEV), experts)
    order = torch.sort(ids.reshape(-1), stable=True).indices
    assert torch.equal(rows.detach().cpu(), x.detach()[order // k])
    assert torch.equal(offsets.cpu(), torch.cumsum(torch.bincount(ids.reshape(-1), minlength=experts), 0).int())
    assert torch.equal(rows.detach().cpu()[pos.cpu()], x.detach().unsqueeze(1).expand(tokens, k, hidden))
    g = torch.randn(tokens * k, hidden)
    rows.backward(g.to(DEV))
    want = torch.zeros(tokens, hidden).index_add_(0, order // k, g)
    assert_aligned(xd.grad, want, what="moe_permute grad")


@pytest.mark.parametrize("dtype", DTYPES)
def test_moe_unpermute_matches_the_weighted_sum(dtype):
    torch.manual_seed(7)
    tokens, k, hidden = 19, 2, 24
    rows = torch.randn(tokens * k, hidden, dtype=dtype, requires_grad=True)
    pos = torch.randperm(tokens * k).view(tokens, k)
    w = torch.rand(tokens, k, dtype=dtype, requires_grad=True)

    def fused(r, w):
        return mytorch.ops.moe_unpermute(r, pos.to(r.device), w)

    def composition(r, w):
        return (r[pos] * w.unsqueeze(-1)).sum(1)

    assert check(fused, composition, [rows, w], f"moe_unpermute {dtype}") == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_moe_unpermute_masked_slots(dtype):
    """pos -1 masks a slot (DeepEP's convention): it adds nothing and its weight gradient is zero."""
    torch.manual_seed(8)
    tokens, k, hidden = 13, 3, 16
    rows = torch.randn(tokens * k, hidden, dtype=dtype, requires_grad=True)
    pos = torch.randperm(tokens * k).view(tokens, k)
    pos[torch.rand(tokens, k) < 0.4] = -1
    w = torch.rand(tokens, k, dtype=dtype, requires_grad=True)

    def fused(r, w):
        return mytorch.ops.moe_unpermute(r, pos.to(r.device), w)

    def composition(r, w):
        keep = (pos != -1).unsqueeze(-1)
        return (r[pos.clamp(min=0)] * keep * w.unsqueeze(-1)).sum(1)

    assert check(fused, composition, [rows, w], f"moe_unpermute masked {dtype}") == 2


@EMU
def test_moe_bad_input_raises():
    logits = torch.randn(4, 8, device=DEV)
    with pytest.raises(RuntimeError, match="k <="):
        mytorch.ops.moe_topk(logits, 9)
    with pytest.raises(RuntimeError, match="n_group"):
        mytorch.ops.moe_topk(logits, 2, n_group=3)
    with pytest.raises(ValueError, match="score"):
        mytorch.ops.moe_topk(logits, 2, score="relu")
    with pytest.raises(RuntimeError, match="experts"):
        mytorch.ops.moe_topk(torch.randn(2, 600, device=DEV), 2)
    rows = torch.randn(6, 4, device=DEV)
    with pytest.raises(IndexError, match="out of bounds"):
        mytorch.ops.moe_unpermute(rows, torch.tensor([[0, 9]], device=DEV)).cpu()
    with pytest.raises(IndexError, match="out of bounds"):
        mytorch.ops.moe_unpermute(rows, torch.tensor([[0, -2]], device=DEV)).cpu()
    with pytest.raises(ValueError, match="expert_ids"):
        mytorch.ops.moe_permute(rows, torch.zeros(5, 2, dtype=torch.long, device=DEV), 4)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_experts_implementation_mytorch_matches_eager(family, monkeypatch):
    """transformers' experts_implementation="mytorch" (registered, no model code patched) against "eager"."""
    import transformers
    from transformers.integrations.moe import ExpertsInterface

    calls = []
    registered = ExpertsInterface._global_mapping["mytorch"]
    assert registered is mytorch.ops.experts_forward
    monkeypatch.setitem(
        ExpertsInterface._global_mapping, "mytorch", lambda *a, **k: calls.append(1) or registered(*a, **k)
    )

    torch.manual_seed(8)
    if family == "qwen3_moe":
        cfg = transformers.Qwen3MoeConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            moe_intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_experts=8,
            num_experts_per_tok=2,
            head_dim=8,
        )
        cls = transformers.Qwen3MoeForCausalLM
    else:
        cfg = transformers.MixtralConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            head_dim=8,
        )
        cls = transformers.MixtralForCausalLM
    model = cls(cfg).to(DEV)
    ids = torch.randint(0, 64, (2, 7), device=DEV)
    results = {}
    for impl in ("eager", "mytorch"):
        model.set_experts_implementation(impl)
        model.zero_grad()
        out = model(ids, labels=ids)
        out.loss.backward()
        grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters() if p.grad is not None}
        results[impl] = (out.logits.detach().cpu(), grads)
    assert len(calls) == cfg.num_hidden_layers, calls  # the layers' experts ran the registered implementation
    assert_aligned(results["mytorch"][0], results["eager"][0], what=f"{family} logits")
    for name, g in results["eager"][1].items():
        assert_aligned(results["mytorch"][1][name], g, what=f"{family} grad {name}")
