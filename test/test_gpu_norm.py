"""BatchNorm and GroupNorm (kernels/cuda/norm.cu, Note [Normalisation family]) on every runtime against the CPU, at
shapes whose groups or channels are too few to fill a GPU, so that the cuda runtime splits each over blocks (partial
sums per range combined in order, dx elementwise), and at shapes that keep a block per group; on the emulated build
the launch shape under the GPU performance model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import mytorch  # noqa: F401
from mytorch.testing import gpu_model
from mytorch.testing._compare import assert_aligned

pytestmark = pytest.mark.every_runtime


def _grads(f, *xs, seed=0):
    """f's output and the gradients of every input, on mytorch, the CPU and in float64."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for dev, dt in (("mytorch", None), ("cpu", None), ("gold", torch.float64)):
        ins = [(x.to(dt) if dt else x).to("cpu" if dev == "gold" else dev).requires_grad_() for x in xs]
        y = f(*ins)
        gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(y.dtype).to(y.device)
        grads = torch.autograd.grad(y, ins, gy)
        out[dev] = [y.detach().cpu()] + [t.cpu() for t in grads]
    del g
    return out


@pytest.mark.parametrize(
    "shape",
    [(8, 4, 64, 64), (2, 3, 5, 7), (64, 2, 300), (4, 16, 1, 1)],
    ids=["split", "small", "3d", "1x1"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_training_matches_the_cpu(shape, dtype):
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
    c = shape[1]
    w, b = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    out = _grads(lambda x_, w_, b_: F.batch_norm(x_, None, None, w_.to(x_.dtype), b_.to(x_.dtype), True), x, w, b)
    for i, (m, r, gd) in enumerate(zip(out["mytorch"], out["cpu"], out["gold"])):
        assert_aligned(m, r.to(m.dtype), gd, f"batch_norm {i}")
    # the running statistics' update (momentum 0.1, unbiased variance)
    stats = {}
    for dev, dt in (("mytorch", dtype), ("cpu", dtype), ("gold", torch.float64)):
        d = "cpu" if dev == "gold" else dev
        rm, rv = torch.zeros(c, device=d, dtype=torch.float32), torch.ones(c, device=d, dtype=torch.float32)
        if dev == "gold":
            rm, rv = rm.double(), rv.double()
        F.batch_norm(x.to(dt).to(d), rm, rv, None, None, True)
        stats[dev] = (rm.cpu(), rv.cpu())
    for i in range(2):
        assert_aligned(stats["mytorch"][i], stats["cpu"][i], stats["gold"][i].float(), "running stats")


@pytest.mark.parametrize(
    "shape,groups",
    [((1, 4, 128, 128), 2), ((2, 6, 9, 11), 3), ((3, 32, 64), 8)],
    ids=["split", "small", "3d"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_matches_the_cpu(shape, groups, dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(shape, generator=g) * 2 - 1).to(dtype)
    c = shape[1]
    w, b = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    out = _grads(lambda x_, w_, b_: F.group_norm(x_, groups, w_.to(x_.dtype), b_.to(x_.dtype)), x, w, b)
    for i, (m, r, gd) in enumerate(zip(out["mytorch"], out["cpu"], out["gold"])):
        assert_aligned(m, r.to(m.dtype), gd, f"group_norm {i}")


def test_batch_norm_eval_matches_the_cpu():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(8, 4, 64, 64, generator=g)
    rm, rv = torch.randn(4, generator=g), torch.rand(4, generator=g) + 0.5
    w, b = torch.rand(4, generator=g) + 0.5, torch.randn(4, generator=g)
    out = _grads(
        lambda x_, w_, b_: F.batch_norm(x_, rm.to(x_.device, x_.dtype), rv.to(x_.device, x_.dtype), w_, b_), x, w, b
    )
    for i, (m, r, gd) in enumerate(zip(out["mytorch"], out["cpu"], out["gold"])):
        assert_aligned(m, r, gd, f"batch_norm eval {i}")


@pytest.mark.gpu
@pytest.mark.skipif(
    torch.mytorch.runtime() != "emu" or not gpu_model.available(), reason="the GPU performance model: emu build only"
)
def test_batch_norm_statistics_fill_the_gpu():
    """64 channels of 32k elements: split over blocks (64 blocks were a sliver of the SMs), each element read once
    for the statistics and once for the apply."""
    x = torch.randn(8, 64, 64, 64, device="mytorch")
    launches = gpu_model.trace(lambda: F.batch_norm(x, None, None, training=True))
    stats = [r for r in launches if r["kernel"].startswith("stats_partial_kernel")]
    assert len(stats) == 1 and stats[0]["grid"][0] * stats[0]["grid"][1] >= 2 * 132, gpu_model.summarize(launches)
    n = x.numel()
    assert gpu_model.dram_bytes(launches) <= 1.1 * 12 * n, gpu_model.summarize(launches)  # read twice, write once
    assert gpu_model.fraction_of_peak(launches, min_bytes=8.0 * n) >= 0.3, gpu_model.summarize(launches)


@pytest.mark.gpu
@pytest.mark.skipif(
    torch.mytorch.runtime() != "emu" or not gpu_model.available(), reason="the GPU performance model: emu build only"
)
def test_batch_norm_backward_is_one_sums_pass_and_an_elementwise_dx():
    """The weight/bias sums of batch norm give its dx sums too (its groups are its channels): x and dy are read once
    for the sums and once for dx, split over blocks."""
    x = torch.randn(8, 64, 64, 64, device="mytorch", requires_grad=True)
    w = torch.ones(64, device="mytorch", requires_grad=True)
    y = F.batch_norm(x, None, None, w, None, training=True)
    gy = torch.randn_like(y)
    launches = gpu_model.trace(lambda: torch.autograd.grad(y, (x, w), gy))
    names = [r["kernel"].split("<")[0] for r in launches]
    assert names == ["sums_partial_kernel", "sums_finish_kernel", "dx_apply_kernel"], gpu_model.summarize(launches)
    assert launches[0]["grid"][0] * launches[0]["grid"][1] >= 2 * 132, launches[0]
    n = x.numel()
    assert gpu_model.dram_bytes(launches) <= 1.1 * 20 * n, gpu_model.summarize(launches)
