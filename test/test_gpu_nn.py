"""GPU-only checks of the NN kernel families (marked `gpu`; they skip unless the cuda runtime is live): the
CUDA kernels (cuBLASLt, cuDNN and our own) against their sim twins on the same inputs, and against stock
torch.cuda."""

import pytest
import torch
import torch.nn.functional as F

from conftest import run_in_threads, run_python
from mytorch.testing._compare import assert_aligned, compare_tensor

pytestmark = pytest.mark.gpu

NN_BATTERY = """
import torch, torch.nn.functional as F, mytorch, mytorch.ops
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
g = torch.Generator().manual_seed(0)
x = torch.randn(64, 96, generator=g)
w = torch.randn(96, 80, generator=g)
img = torch.randn(4, 6, 17, 19, generator=g)
cw = torch.randn(8, 3, 3, 3, generator=g)
t = torch.randint(0, 96, (64,), generator=g)
idx = torch.randint(0, 50, (7, 33), generator=g)
def grads(f, *ins, gold=False):
    # gold: the same inputs, cotangent and function in float64 on the CPU (the golden value of the shared rule)
    dt = ins[0].dtype
    ins = [(i.double() if gold else i).detach().requires_grad_() for i in ins]
    y = f(*ins)
    # a fixed random cotangent: with ones, sums of normalised outputs have gradients that are zero up to
    # rounding, and two runs would be compared on their noise
    y.backward(torch.randn(y.shape, generator=torch.Generator().manual_seed(7)).to(dt).to(y.dtype).to(y.device))
    return [y.detach().cpu()] + [i.grad.cpu() for i in ins]
def put(out, k, f, *ins):
    # a family's output and gradients as out[k_j]; on the CPU also their float64 values, as out[k_j@gold]
    for j, v in enumerate(grads(f, *ins)):
        out[f"{k}_{j}"] = v
    if ins[0].device.type == "cpu":
        for j, v in enumerate(grads(f, *ins, gold=True)):
            out[f"{k}_{j}@gold"] = v
def run(dev):
    X, W, I, CW = x.to(dev), w.to(dev), img.to(dev), cw.to(dev)
    out = {}
    out["mm"] = (X @ W).cpu()
    out["mm_bf16"] = (X.bfloat16() @ W.bfloat16()).float().cpu()
    out["addmm_gelu"] = torch._addmm_activation(W[0], X, W, use_gelu=True).cpu()
    out["bmm_t"] = torch.bmm(X.view(4, 16, 96), W.t().reshape(4, 20, 96).transpose(1, 2)).cpu()
    # complex GEMMs (Note [Complex GEMM]: four real GEMMs on cuda): conjugate views, complex alpha and beta
    XC, WC = torch.complex(X, X.flip(0)), torch.complex(W, -W)
    out["mm_complex"] = (XC @ WC).cpu()
    out["addmm_complex"] = torch.addmm(XC[:, :80], XC.conj(), WC, beta=0.5j, alpha=1 - 1j).cpu()
    out["bmm_complex_adjoint"] = torch.bmm(XC.view(4, 16, 96), WC.t().reshape(4, 20, 96).mH).cpu()
    for k, f in {"softmax": lambda a: F.softmax(a, -1), "log_softmax0": lambda a: F.log_softmax(a, 0),
                 "gelu": F.gelu, "silu": F.silu, "layer_norm": lambda a: F.layer_norm(a, (96,)),
                 "ce": lambda a: F.cross_entropy(a, t.to(dev), label_smoothing=0.1)}.items():
        put(out, k, f, X)
    for k, f in {"conv": lambda a, b: F.conv2d(a, b, stride=2, padding=1, groups=2),
                 "bn": lambda a, b: F.batch_norm(a, None, None, training=True) * b.sum(),
                 "gn": lambda a, b: F.group_norm(a, 3) * b.sum(),
                 "maxpool": lambda a, b: F.max_pool2d(a, 3, 2, 1) * b.sum(),
                 "adaptive_maxpool": lambda a, b: F.adaptive_max_pool2d(a, (5, 7)) * b.sum(),
                 "bilinear": lambda a, b: F.interpolate(a, scale_factor=1.5, mode="bilinear") * b.sum()}.items():
        put(out, k, f, I, CW)
    # grid_sample (Note [Grid sampler]): points inside and outside, both gradients (the input's through atomics)
    gr2 = (torch.rand(4, 5, 7, 2, generator=g) * 2.4 - 1.2).to(dev)
    vol = torch.randn(2, 3, 4, 5, 6, generator=g).to(dev)
    gr3 = (torch.rand(2, 3, 4, 5, 3, generator=g) * 2.4 - 1.2).to(dev)
    for k, (a_, b_, kw) in {"grid_bilinear": (I, gr2, {}),
                            "grid_bicubic_border": (I, gr2, {"mode": "bicubic", "padding_mode": "border"}),
                            "grid_nearest_reflection": (I, gr2, {"mode": "nearest", "padding_mode": "reflection"}),
                            "grid3_reflection_aligned": (vol, gr3, {"padding_mode": "reflection",
                                                                    "align_corners": True})}.items():
        f = lambda a, b: F.grid_sample(a, b, **{"align_corners": False, **kw})
        put(out, k, f, a_, b_)
    for k, f in {"maxpool3d": lambda a: F.max_pool3d(a, 3, 2, 1),
                 "avgpool3d": lambda a: F.avg_pool3d(a, (2, 3, 2), 2, 1, ceil_mode=True, count_include_pad=False),
                 "adaptive_maxpool3d": lambda a: F.adaptive_max_pool3d(a, (3, 2, 4))}.items():
        put(out, k, f, vol)
    vol_int = (vol * 1000).long()  # integer average pooling and convolutions: exact (torch.cuda has neither)
    if dev != "cuda":
        out["avgpool3d_int64"] = F.avg_pool3d(vol_int, 3, 2, 1, divisor_override=-2).cpu()
        out["avgpool2d_int64"] = F.avg_pool2d(vol_int[:, :, 0], 2, 1, 1, True, False).cpu()
    # unfold / fold (im2col / col2im, each the other's gradient): dilated, padded, strided, overlapping windows
    for k, f in {"unfold": lambda a: F.unfold(a, (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
                 "fold": lambda a: F.fold(F.unfold(a, 3, padding=1) * 0.5, (17, 19), 3, padding=1)}.items():
        put(out, k, f, I)
    out["unfold_bool"] = F.unfold(I > 0, (2, 3), padding=1).cpu()
    out["fold_bool"] = F.fold(F.unfold(I > 0, 3, padding=1), (17, 19), 3, padding=1).cpu()
    # 3-D convolutions (vol2col + GEMM where cuDNN is absent), plain and transposed with output padding, and
    # integer ones (im2col + the integer GEMM)
    cw3 = torch.randn(4, 3, 2, 3, 2, generator=g).to(dev)
    for k, f in {"conv3d": lambda a, b: F.conv3d(a, b, stride=(1, 2, 1), padding=1, dilation=(2, 1, 1)),
                 "conv_transpose3d": lambda a, b: F.conv_transpose3d(a, b.transpose(0, 1), stride=2, padding=1,
                                                                     output_padding=1)}.items():
        put(out, k, f, vol, cw3)
    if dev != "cuda":
        out["conv3d_int64"] = F.conv3d(vol_int, (cw3 * 10).long(), padding=(0, 1, 2), stride=2).cpu()
        out["conv2d_int32"] = F.conv2d(vol_int[:, :, 0].int(), (cw3[:, :, 0] * 10).int(), padding=1).cpu()
    emb = torch.randn(50, 16, device=dev, requires_grad=True)
    F.embedding(idx.to(dev), emb, padding_idx=3, scale_grad_by_freq=True).sum().backward()
    out["embedding_grad"] = emb.grad.cpu()
    ps = [p.to(dev).requires_grad_() for p in (x.clone(), w.clone())]
    opt = torch.optim.AdamW(ps, lr=1e-2, fused=True)
    for _ in range(3):
        for p in ps:
            p.grad = torch.ones_like(p) * 0.1
        opt.step()
    out["adamw_fused"] = ps[0].detach().cpu()
    out["foreach_norm"] = torch.stack(torch._foreach_norm([X, W])).cpu()
    # fused LayerNorm / RMSNorm: each width class (warp per row, block per row in registers, wider rows),
    # vectorised and not (odd widths), bf16 with float32 parameters, and the fused residual add
    for width in (7, 96, 1000, 4097, 20000, 65536):
        for dt in (torch.float32, torch.bfloat16):
            xs = torch.randn(6, width, generator=g).to(dt).to(dev)
            ws = (torch.rand(width, generator=g) + 0.5).to(dev)
            bs = torch.randn(width, generator=g).to(dev)
            for k, f in {"ln": lambda a, w_, b_: F.layer_norm(a, (width,), w_, b_),
                         "rms": lambda a, w_, b_: F.rms_norm(a, (width,), w_) + 0 * b_.sum()}.items():
                put(out, f"{k}{width}_{dt}", f, xs, ws.to(dt), bs.to(dt))
            if dev == "mytorch":
                y = mytorch.ops.add_layer_norm(xs, xs * 0.5, (width,), ws, bs)[0]
            else:
                y = F.layer_norm(xs + xs * 0.5, (width,), ws, bs)
            out[f"addln{width}_{dt}"] = y.cpu()
    # fused attention: odd lengths, causal, GQA, head dims, bf16/fp16 (torch.cuda picks its own backend)
    for (bb, hq, hk, lq, lk, d, causal, dt) in [(2, 4, 4, 37, 53, 64, False, torch.bfloat16),
                                               (1, 8, 2, 128, 128, 128, True, torch.float16),
                                               (1, 2, 2, 1, 300, 64, False, torch.bfloat16)]:
        qs = torch.randn(bb, hq, lq, d, generator=g).to(dt).to(dev)
        ks = torch.randn(bb, hk, lk, d, generator=g).to(dt).to(dev)
        vs = torch.randn(bb, hk, lk, d, generator=g).to(dt).to(dev)
        f = lambda a, b_, c: F.scaled_dot_product_attention(a, b_, c, is_causal=causal, enable_gqa=hq != hk)
        put(out, f"sdpa{lq}x{lk}_{d}", f, qs, ks, vs)
    # triangular solve (Note [Triangular solve]): lower and upper, a batch
    tri = (torch.randn(3, 17, 17, generator=g) + 6 * torch.eye(17)).to(dev)
    rhs = torch.randn(3, 17, 5, generator=g).to(dev)
    out["trsm_lower"] = torch.linalg.solve_triangular(tri.tril(), rhs, upper=False).cpu()
    out["trsm_upper_right"] = torch.linalg.solve_triangular(tri.triu(), rhs.mT, upper=True, left=False).cpu()
    # CTC (Note [CTC]): loss and gradient, padded targets, an empty target
    lp = torch.randn(40, 3, 20, generator=g).log_softmax(-1).to(dev).requires_grad_()
    tg = torch.randint(1, 20, (3, 12), generator=g).to(dev)
    ctc = F.ctc_loss(lp, tg, torch.tensor([40, 33, 20]), torch.tensor([12, 0, 9]), reduction="sum")
    out["ctc"] = ctc.detach().cpu()
    out["ctc_grad"] = torch.autograd.grad(ctc, lp)[0].cpu()
    # fully masked query rows (Note [Fused attention]: output 0, finite gradients): a boolean mask with an empty
    # row, and a decoding row whose every key is masked (the split path)
    keep = torch.rand(9, 33, generator=g) > 0.3
    keep[2] = False
    for lq, lk, mask in [(9, 33, keep), (1, 300, torch.zeros(1, 300, dtype=torch.bool))]:
        qs, ks, vs = (torch.randn(1, 2, n, 64, generator=g).to(torch.bfloat16).to(dev) for n in (lq, lk, lk))
        f = lambda a, b_, c: F.scaled_dot_product_attention(a, b_, c, attn_mask=mask.to(dev))
        put(out, f"sdpa_masked{lq}x{lk}", f, qs, ks, vs)
    # fused LSTM and GRU cells (Note [Fused RNN cells]) through torch.lstm_cell / torch.gru_cell, with biases
    for k, chunks in (("lstm_cell", 4), ("gru_cell", 3)):
        ins = [torch.randn(*s, generator=g).to(dev) for s in ((6, 16), (6, 32), (6, 32), (chunks * 32, 16),
                                                              (chunks * 32, 32), (chunks * 32,), (chunks * 32,))]
        if k == "lstm_cell":
            f = lambda a, h_, c_, w1, w2, b1, b2: torch.cat(torch.lstm_cell(a, (h_, c_), w1, w2, b1, b2), 1)
        else:
            f = lambda a, h_, c_, w1, w2, b1, b2: torch.gru_cell(a, h_, w1, w2, b1, b2) + 0 * c_.sum()
        put(out, k, f, *ins)
    return out
"""


def battery(source, dev):
    """Runs a battery on `dev` from a fresh namespace, so every run draws the same inputs from its generator."""
    ns = {}
    exec(source, ns)
    return ns["run"](dev)


def assert_like_reference(mine, ref, cpu, name, gold=None):
    """mytorch's result against another implementation's (its sim twin, or torch.cuda) by the shared rule. With
    the float64 `gold`: within twice the larger error of that reference and of the CPU at the same dtype from
    it, or the dtype's floor; without: within twice the CPU's distance from that reference, or the floor (two
    float32 results both near the CPU's leave no room to a third that is as accurate by a different order)."""
    extra = (cpu,) if cpu.dtype == ref.dtype else ()
    assert_aligned(mine, ref, gold if gold is not None and gold.shape == ref.shape else None, name, extra_refs=extra)


def test_nn_families_match_sim_twins(tmp_path):
    ns = {}
    exec(NN_BATTERY, ns)
    mine = ns["run"]("mytorch")
    path = tmp_path / "sim.pt"
    r = run_python(
        NN_BATTERY + f"\ntorch.save(run('mytorch'), {str(path)!r})\n", env={"MYTORCH_RUNTIME": "sim"}, timeout=600
    )
    assert r.returncode == 0, r.stderr
    sim = torch.load(path)
    cpu = battery(NN_BATTERY, "cpu")
    # cuBLASLt's GELU epilogue is the tanh approximation (so is torch.cuda's _addmm_activation); torch's CPU
    # kernel, which the sim twin calls, uses erf. Each is checked against its own definition in float64.
    x, w = ns["x"], ns["w"]
    pre, pre32 = torch.addmm(w[0].double(), x.double(), w.double()), torch.addmm(w[0], x, w)
    assert_aligned(
        mine.pop("addmm_gelu"), F.gelu(pre32, approximate="tanh"), F.gelu(pre, approximate="tanh"), "addmm_gelu (tanh)"
    )
    assert_aligned(sim.pop("addmm_gelu"), F.gelu(pre32), F.gelu(pre), "addmm_gelu (erf, sim)")
    cpu.pop("addmm_gelu")
    for k, v in sim.items():
        assert_like_reference(mine[k], v, cpu[k], k, cpu.get(f"{k}@gold"))


def cuda_reference(source, tmp_path):
    """A battery's torch.cuda results, computed in a process that never imports mytorch: since PyTorch 2.8 a
    registered PrivateUse1 backend is the process's accelerator, and the autograd engine then fails every CUDA
    backward ("opt_ready_stream && opt_parent_stream", pytorch/pytorch#161129; docs/gpu.md)."""
    path = tmp_path / "cuda.pt"
    code = source.replace(", mytorch.ops", "").replace(", mytorch\n", "\n")
    r = run_python(
        code + f"\ntorch.save(run('cuda'), {str(path)!r})\n", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return torch.load(path)


def test_nn_families_match_torch_cuda(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA PyTorch for the reference")
    ns = {}
    exec(NN_BATTERY, ns)
    torch.mytorch.set_fallback_mode("error")
    mine = ns["run"]("mytorch")
    torch.mytorch.set_fallback_mode("silent")
    ref = cuda_reference(NN_BATTERY, tmp_path)
    cpu = battery(NN_BATTERY, "cpu")
    for k, v in ref.items():
        assert_like_reference(mine[k], v, cpu[k], k, cpu.get(f"{k}@gold"))


@pytest.mark.hardware
def test_cudnn_and_cublaslt_are_used():
    """The library paths load on a GPU machine (else conv silently takes im2col and GEMM would raise)."""
    x = torch.randn(2, 3, 8, 8, device="mytorch")
    torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3, device="mytorch"))
    torch.mytorch.synchronize()
    with torch.profiler.profile() as prof:
        torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3, device="mytorch"))
        torch.mytorch.synchronize()
    names = " ".join(e.name for e in prof.events())
    assert "bmm" not in names, "convolution took the im2col + GEMM path: cuDNN did not load"


MMA_BATTERY = """
import os, torch, torch.nn.functional as F, mytorch
torch.use_deterministic_algorithms(os.environ.get("MMA_DETERMINISTIC") == "1")
g = torch.Generator().manual_seed(3)
CASES = [(2, 4, 4, 100, 130, 64, False, torch.float16),
         (1, 4, 2, 190, 77, 64, True, torch.bfloat16),
         (1, 8, 2, 257, 257, 128, True, torch.bfloat16),
         (1, 2, 2, 64, 33, 128, True, torch.float16)]
CASES = [CASES[i] for i in map(int, os.environ.get("MMA_CASES", "0,1,2,3").split(","))]
def run(dev):
    out = {}
    for (b, hq, hk, lq, lk, d, causal, dt) in CASES:
        q = torch.randn(b, hq, lq, d, generator=g).to(dt).to(dev)
        k = torch.randn(b, hk, lk, d, generator=g).to(dt).to(dev)
        v = torch.randn(b, hk, lk, d, generator=g).to(dt).to(dev)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hk)
        out[f"{lq}x{lk}_{d}"] = y.detach().cpu()
        y.backward(torch.ones_like(y))  # (torch.autograd.grad here made the process abort at exit: see gpu.md)
        gq, gk, gv = q.grad, k.grad, v.grad
        out.update({f"{lq}x{lk}_{d}_dq": gq.cpu(), f"{lq}x{lk}_{d}_dk": gk.cpu(), f"{lq}x{lk}_{d}_dv": gv.cpu()})
    return out
"""


@pytest.mark.tensor_cores
def test_tensor_core_attention_matches_sim_twin(tmp_path):
    """The tensor-core forward and backward (the default for fp16/bf16, head dims 64/128) against the sim reference:
    the 5-GEMM backward with its atomic dQ, and under torch.use_deterministic_algorithms the 7-GEMM kernels."""
    paths = {}
    runs = (("mma", {}), ("mma_deterministic", {"MMA_DETERMINISTIC": "1"}), ("sim", {"MYTORCH_RUNTIME": "sim"}))
    for name, env in runs:
        paths[name] = tmp_path / f"{name}.pt"
        r = run_python(MMA_BATTERY + f"\ntorch.save(run('mytorch'), {str(paths[name])!r})\n", env=env, timeout=600)
        assert r.returncode == 0, r.stderr
    sim = torch.load(paths["sim"])
    cpu = battery(MMA_BATTERY, "cpu")
    for name in ("mma", "mma_deterministic"):
        mine = torch.load(paths[name])
        for k, v in sim.items():
            assert_like_reference(mine[k], v, cpu[k], f"{name} {k}")


@pytest.mark.hardware
def test_cudnn_from_several_threads_on_their_own_streams():
    """One cuDNN handle per (thread, device): with a shared handle, cudnnSetStream and the call of one thread
    interleave with another's, so a convolution runs on the wrong stream and may read its input before the
    producing kernel on its own stream wrote it."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 8, 3, 3, generator=g)
    inputs = [torch.randn(4, 8, 32, 32, generator=g) for _ in range(4)]
    refs = [F.conv2d(x, w, padding=1) for x in inputs]
    errors = []

    def work(i):
        s = torch.mytorch.Stream()
        with torch.mytorch.stream(s):
            wd = w.to("mytorch")
            for _ in range(20):
                xd = inputs[i].to("mytorch") * 1.0  # produced on this thread's stream just before the conv
                y = F.conv2d(xd, wd, padding=1)
            s.synchronize()
            if not torch.allclose(y.cpu(), refs[i], rtol=1e-3, atol=1e-3):
                errors.append(i)

    run_in_threads(work, 4)
    assert not errors, errors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_grouped_mm_kernel_matches_the_cpu(dtype):
    """The grouped GEMM kernel (kernels/cuda/grouped_gemm.cu) in every mode, forward and backward, within the
    tolerance rule of the CPU's result against float64 (its float32 accumulation order is not the CPU's)."""
    from conftest import grouped_mm_cases, grouped_mm_golden, grouped_mm_kernel_cases

    for name, (a, b, offs) in grouped_mm_kernel_cases(dtype).items():
        got = torch._grouped_mm(a.to("mytorch"), b.to("mytorch"), offs.to("mytorch") if offs is not None else None)
        want = torch._grouped_mm(a, b, offs)
        errors = compare_tensor(got, want, grouped_mm_golden(a, b, offs))
        assert errors.ok, (name, errors)
        assert got.stride() == want.stride(), name
    # backward with a fixed cotangent: grad_a is 2-D x 3-D again (b transposed), grad_b is 2-D x 2-D
    a, b, offs = grouped_mm_cases(dtype)["rows"]
    cot = torch.randn(a.shape[0], b.shape[-1], generator=torch.Generator().manual_seed(9)).to(dtype)
    a_d, b_d = a.to("mytorch").requires_grad_(), b.to("mytorch").requires_grad_()
    torch._grouped_mm(a_d, b_d, offs.to("mytorch")).backward(cot.to("mytorch"))
    a_c, b_c = a.clone().requires_grad_(), b.clone().requires_grad_()
    torch._grouped_mm(a_c, b_c, offs).backward(cot)
    assert compare_tensor(a_d.grad, a_c.grad, grouped_mm_golden(cot, b.transpose(-2, -1), offs)).ok
    assert compare_tensor(b_d.grad, b_c.grad, grouped_mm_golden(a.t(), cot, offs)).ok
