"""Multi-tensor ops and fused optimizers (kernels/cuda/optim.cu, Note [Multi-tensor apply]) on every runtime against
the CPU: lists that mix 16-byte aligned tensors (the vector path) with offset views and odd lengths (the element
path and the tails), more tensors than one launch or one norm pass holds; and, on the emulated build, the launch
shape under the GPU performance model."""

from __future__ import annotations

import pytest
import torch

import mytorch  # noqa: F401
from mytorch.testing import gpu_model
from mytorch.testing._compare import assert_aligned

pytestmark = pytest.mark.every_runtime

LENGTHS = [1, 7, 4099, 40000, 0, 1024, 3]


def _list(dtype, seed, offset_every=3):
    """Tensors of LENGTHS; every `offset_every`-th one a view one element into a buffer (not 16-byte aligned)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, n in enumerate(LENGTHS):
        t = torch.randn(n + 1, generator=g).to(dtype)
        out.append(t[1:] if i % offset_every == 1 else t[:n].clone())
    return out


def _to_device(ts):
    out = []
    for t in ts:
        if t.storage_offset():  # keep the misalignment on the device
            base = torch.empty(t.numel() + 1, dtype=t.dtype, device="mytorch")
            base[1:].copy_(t)
            out.append(base[1:])
        else:
            out.append(t.to("mytorch"))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("opt", ["Adam", "AdamW"])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_adam_matches_the_cpu(dtype, opt, amsgrad):
    def run(device, dt):
        ps = [t.to(dt) for t in _list(dtype, 0)]
        ps = _to_device(ps) if device == "mytorch" else ps
        ps = [p.requires_grad_() for p in ps]
        o = getattr(torch.optim, opt)(ps, lr=1e-2, weight_decay=0.1, amsgrad=amsgrad, fused=True)
        g = torch.Generator().manual_seed(1)
        for _ in range(3):
            for p in ps:
                p.grad = (torch.randn(p.shape, generator=g) * 0.1).to(dt).to(p.device)
            o.step()
        return [p.detach().cpu() for p in ps]

    mine, ref, gold = run("mytorch", dtype), run("cpu", dtype), run("cpu", torch.float64)
    for i, (a, b, c) in enumerate(zip(mine, ref, gold)):
        assert_aligned(a, b, c, f"{opt} param {i}")


def test_fused_adamw_with_grad_scale_unscales_the_gradients():
    """With a grad scale (the AMP path) the step unscales the gradients in place, as ATen's fused kernel does."""

    def run(device):
        ps = _list(torch.float32, 2)
        ps = [p.requires_grad_() for p in (_to_device(ps) if device == "mytorch" else ps)]
        for p in ps:
            p.grad = torch.full_like(p, 4.0)
        scale = torch.tensor(2.0, device=device)
        torch._fused_adamw_(
            ps,
            [p.grad for p in ps],
            [torch.zeros_like(p) for p in ps],
            [torch.zeros_like(p) for p in ps],
            [],
            [torch.tensor(1.0, device=device) for _ in ps],
            lr=1e-2,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.01,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
            grad_scale=scale,
            found_inf=torch.tensor(0.0, device=device),
        )
        return [p.detach().cpu() for p in ps], [p.grad.cpu() for p in ps]

    (mp, mg), (rp, rg) = run("mytorch"), run("cpu")
    for a, b in zip(mp + mg, rp + rg):
        assert_aligned(a, b, None, "adamw grad_scale")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_foreach_ops_on_mixed_alignment(dtype):
    xs, ys, zs = _list(dtype, 3), _list(dtype, 4, offset_every=2), _list(dtype, 5)
    dx, dy, dz = _to_device(xs), _to_device(ys), _to_device(zs)
    gold = [[t.double() for t in ts] for ts in (xs, ys, zs)]
    scalars = [0.5 + i for i in range(len(xs))]
    cases = {
        "add_list": lambda a, b, c: torch._foreach_add(a, b, alpha=0.3),
        "mul_scalar": lambda a, b, c: torch._foreach_mul(a, 1.5),
        "mul_scalarlist": lambda a, b, c: torch._foreach_mul(a, scalars),
        "addcmul_scalarlist": lambda a, b, c: torch._foreach_addcmul(a, b, c, scalars),
        "lerp": lambda a, b, c: torch._foreach_lerp(a, b, 0.25),
        "sqrt": lambda a, b, c: torch._foreach_sqrt([t.abs() for t in a]),
    }
    for name, f in cases.items():
        for i, (m, r, g) in enumerate(zip(f(dx, dy, dz), f(xs, ys, zs), f(*gold))):
            assert_aligned(m, r, g, f"{name} {i}")
    # in place, aligned and not
    torch._foreach_add_(dx, dy)
    torch._foreach_add_(xs, ys)
    for i, (m, r) in enumerate(zip(dx, xs)):
        assert_aligned(m, r, None, f"add_ {i}")


@pytest.mark.parametrize("ord", [1, 2, float("inf")])
def test_foreach_norm_of_many_tensors(ord):
    """More tensors than one launch packs and one finishing launch holds (64), lengths across chunk boundaries."""
    g = torch.Generator().manual_seed(6)
    xs = [torch.randn(n, generator=g) for n in [3, 70000, 1] + [17 * k + 1 for k in range(80)]]
    mine = torch._foreach_norm([x.to("mytorch") for x in xs], ord)
    ref = torch._foreach_norm(xs, ord)
    gold = torch._foreach_norm([x.double() for x in xs], ord)
    for i, (a, b, c) in enumerate(zip(mine, ref, gold)):
        assert_aligned(a, b, c, f"norm {i}")


@pytest.mark.gpu
@pytest.mark.skipif(
    torch.mytorch.runtime() != "emu" or not gpu_model.available(), reason="the GPU performance model: emu build only"
)
def test_fused_adamw_fills_the_gpu_with_16_byte_accesses():
    n, size = 16, 16384
    ps = [torch.randn(size, device="mytorch", requires_grad=True) for _ in range(n)]
    for p in ps:
        p.grad = torch.randn(size, device="mytorch")
    opt = torch.optim.AdamW(ps, lr=1e-3, fused=True)
    opt.step()  # the state exists
    launches = gpu_model.trace(opt.step)
    main = [r for r in launches if r["bytes_read"] > 1024]  # the step (a second tiny launch counts the steps)
    assert len(main) == 1 and main[0]["kernel"].startswith("mt_kernel"), gpu_model.summarize(launches)
    r = main[0]
    assert r["grid"][0] >= 132, r  # a 16 x 16k list spread over the SMs, not a block per tensor
    # param, grad, exp_avg, exp_avg_sq read once (and each thread reads its tensor's step count); the model does
    # not see in-place writes of a basic block that loaded the same address (docs/gpu.md)
    assert 16 * n * size <= r["bytes_read"] <= 1.1 * 16 * n * size, r
    # 16-byte accesses: 16 sectors a request (4-byte ones would give 4); the step count each thread reads (a sector)
    # lowers the average, by more in the plain emulated flavour, whose instrumentation sees a few more such reads
    assert r["ideal_sectors_per_request"] >= 12 and gpu_model.coalescing(r) >= 0.95, r
    assert gpu_model.fraction_of_peak(main, min_bytes=28.0 * n * size) >= 0.5, r
