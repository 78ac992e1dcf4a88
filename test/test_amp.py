"""Autocast with CUDA's policy on mytorch, and torch.amp.GradScaler with native unscale/update kernels,
checked against the same loop on the CPU under torch.autocast("cpu")."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_policy(dtype):
    a = torch.randn(4, 8, device="mytorch")
    b = torch.randn(8, 8, device="mytorch")
    img = torch.randn(1, 2, 5, 5, device="mytorch")
    w = torch.randn(3, 2, 3, 3, device="mytorch")
    with torch.autocast("mytorch", dtype=dtype):
        assert torch.is_autocast_enabled("mytorch")
        lower = [
            a @ b,
            torch.mm(a, b),
            F.linear(a, b),
            torch.bmm(a[None], b[None]),
            torch.addmm(a, a, b),
            F.conv2d(img, w),
        ]
        fp32 = [
            torch.softmax(a, -1),
            torch.log_softmax(a, -1),
            F.layer_norm(a, (8,)),
            F.mse_loss(a, a),
            torch.exp(a),
            torch.log(a.abs() + 1),
            torch.pow(a, 2),
            torch.sum(a.to(dtype)),
            F.cross_entropy(a, torch.zeros(4, dtype=torch.long, device="mytorch")),
        ]
        half = a.to(dtype)
        promoted = [
            torch.cat([half, a]),
            torch.stack([half, a]),
            torch.addcmul(a, half, half),
            torch.index_copy(a, 0, torch.tensor([0], device="mytorch"), half[:1]),
        ]
    assert all(t.dtype == dtype for t in lower), [t.dtype for t in lower]
    assert all(t.dtype == torch.float32 for t in fp32), [t.dtype for t in fp32]
    assert all(t.dtype == torch.float32 for t in promoted), [t.dtype for t in promoted]
    assert not torch.is_autocast_enabled("mytorch")
    assert torch.mytorch.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]


def test_binary_cross_entropy_is_banned_as_on_cuda():
    p = torch.rand(4, device="mytorch")
    with torch.autocast("mytorch", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)


def run_loop(device, inject_at=3, steps=8):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    losses, scales, skipped = [], [], []
    for step in range(steps):
        x = torch.randn(32, 16, generator=g).to(device)
        y = torch.randn(32, 1, generator=g).to(device)
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        if step == inject_at:
            model[0].weight.grad[0, 0] = float("inf")
        before = model[0].weight.detach().cpu().clone()
        scaler.step(opt)
        scaler.update()
        skipped.append(torch.equal(before, model[0].weight.detach().cpu()))
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales, skipped


def test_gradscaler_loop_matches_cpu_and_skips_injected_inf():
    torch.mytorch.reset_fallback_stats()
    dev = run_loop("mytorch")
    cpu = run_loop("cpu")
    # bf16 tolerance: relative 2^-7 per step
    for a, b in zip(dev[0], cpu[0]):
        assert abs(a - b) <= 1e-2 * max(1.0, abs(b)), (dev[0], cpu[0])
    assert dev[1] == cpu[1]  # identical scale history: grow, back off on the inf, grow again
    assert dev[2] == cpu[2]  # the same steps were skipped
    assert dev[2][3] and not dev[2][2]  # the injected step, and only it, was skipped
    assert not [k for k in torch.mytorch.fallback_stats() if "_amp_" in k]  # GradScaler ops ran natively


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_unscale_kernel_matches_cpu(dtype):
    g = torch.Generator().manual_seed(3)
    grads = [torch.randn(5, 7, generator=g).to(dtype), torch.randn(6, generator=g).to(dtype)]
    grads.append(torch.randn(4, 6, generator=g).to(dtype).t())  # non-contiguous
    for found_expected, poison in ((0.0, None), (1.0, float("nan")), (1.0, float("-inf"))):
        cpu = [t.clone() for t in grads]
        if poison is not None:
            cpu[1][2] = poison
        dev = [t.to("mytorch") for t in cpu]
        inv = torch.tensor([0.25])
        f_cpu, f_dev = torch.zeros(1), torch.zeros(1, device="mytorch")
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, f_cpu, inv)
        torch._amp_foreach_non_finite_check_and_unscale_(dev, f_dev, inv.to("mytorch"))
        assert f_dev.item() == f_cpu.item() == found_expected
        for c, d in zip(cpu, dev):
            torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0, equal_nan=True)


@pytest.mark.every_runtime
def test_unscale_of_long_mixed_lists_matches_cpu():
    """The list goes to the kernels in launches of up to 64 tensors of one dtype (one launch each on cuda: a block
    row per tensor): 150 tensors, dtypes interleaved, empty and non-contiguous ones, an inf in the last launch."""
    g = torch.Generator().manual_seed(4)
    dtypes = [torch.float32, torch.float32, torch.bfloat16, torch.float32, torch.float64]
    grads = [torch.randn(1 + (i * 37) % 300, generator=g).to(dtypes[i % len(dtypes)]) for i in range(150)]
    grads[7] = torch.randn(9, 4, generator=g).t()
    grads[8] = torch.empty(0)
    for found_expected, poison in ((0.0, None), (1.0, float("inf"))):
        cpu = [t.clone() for t in grads]
        if poison is not None:
            cpu[140][0] = poison
        dev = [t.to("mytorch") for t in cpu]
        f_cpu, f_dev = torch.zeros(1), torch.zeros(1, device="mytorch")
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, f_cpu, torch.tensor([0.5]))
        torch._amp_foreach_non_finite_check_and_unscale_(dev, f_dev, torch.tensor([0.5], device="mytorch"))
        assert f_dev.item() == f_cpu.item() == found_expected
        for c, d in zip(cpu, dev):
            torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0, equal_nan=True)


def test_update_scale_kernel_matches_cpu():
    s_cpu, t_cpu = torch.tensor([64.0]), torch.tensor([0], dtype=torch.int32)
    s_dev, t_dev = s_cpu.to("mytorch"), t_cpu.to("mytorch")
    for found in [0, 0, 1, 0, 0, 0, 1, 1, 0]:
        f = torch.tensor([float(found)])
        torch._amp_update_scale_(s_cpu, t_cpu, f, 2.0, 0.5, 2)
        torch._amp_update_scale_(s_dev, t_dev, f.to("mytorch"), 2.0, 0.5, 2)
        assert s_dev.item() == s_cpu.item() and t_dev.item() == t_cpu.item()
    with pytest.raises(RuntimeError, match="growth_tracker must be"):
        torch._amp_update_scale_(s_dev, t_dev.float(), f.to("mytorch"), 2.0, 0.5, 2)
