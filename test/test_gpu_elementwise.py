"""Elementwise-shaped CUDA kernels rewritten for the whole GPU (issue 28): dropout fused into one pass (Note [Fused
dropout] in kernels/include/mytorch/random.h), bit for bit the composition it replaces on every runtime, and — on
the emulated build — one launch reading and writing each byte once (the GPU performance model, docs/gpu.md)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from mytorch.testing import gpu_model

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


@pytest.mark.every_runtime
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 4096, 100003])
@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
def test_fused_dropout_is_the_composition_bit_for_bit(dtype, n, p):
    """The mask is bernoulli_(1 - p) for the same generator state and the output input * mask * scale, as ATen
    composes native_dropout (a dropped NaN or inf stays NaN; p = 1 scales by 0)."""
    x = torch.randn(n).to(dtype)
    x[::13] = float("nan")
    x[1::17] = float("inf")
    xd = x.to("mytorch")
    torch.mytorch.manual_seed(5)
    out, mask = torch.native_dropout(xd, p, True)
    torch.mytorch.manual_seed(5)
    ref_mask = torch.empty(n, dtype=torch.bool, device="mytorch").bernoulli_(1 - p).cpu()
    ref = x * ref_mask * (0.0 if p == 1 else 1 / (1 - p))
    assert torch.equal(mask.cpu(), ref_mask)
    got = out.cpu()
    assert torch.equal(got.isnan(), ref.isnan()) and torch.equal(got[~got.isnan()], ref[~ref.isnan()])
    assert 0 < ref_mask.sum() < n or n < 100 or p == 1  # not vacuous: a mix of kept and dropped elements


@pytest.mark.every_runtime
def test_dropout_of_a_view_and_in_training_modules():
    x = torch.randn(64, 48)
    xd = x.to("mytorch")
    torch.mytorch.manual_seed(1)
    out, mask = torch.native_dropout(xd.t(), 0.3, True)  # not contiguous: the composition
    assert out.shape == (48, 64) and torch.equal(out.cpu(), x.t() * mask.cpu() * (1 / 0.7))
    drop = torch.nn.Dropout(0.25).train()
    y = drop(xd.requires_grad_())
    y.sum().backward()
    kept = (y != 0).cpu()
    assert torch.allclose(xd.grad.cpu()[kept], torch.full_like(x, 1 / 0.75)[kept])


needs_model = pytest.mark.skipif(
    torch.mytorch.runtime() != "emu" or not gpu_model.available(), reason="the GPU performance model: emu build only"
)


@needs_model
@pytest.mark.gpu
def test_dropout_is_one_pass():
    """Before: a Bernoulli fill (each element a whole Philox round, 1 of its 4 words kept), then two multiplies: 3
    launches and 3.25x the minimum bytes. Now one launch, a thread per Philox block of 4 elements, 16-byte loads:
    x read once, out and the mask written once. Negative control: the composition, traced the same way."""
    n = 1 << 20
    x = torch.randn(n, device="mytorch")
    torch.native_dropout(x, 0.1, True)
    fused = gpu_model.trace(lambda: torch.native_dropout(x, 0.1, True))
    assert [r["kernel"] for r in fused] == ["dropout_kernel<T, true>"], gpu_model.summarize(fused)
    minimum = 4 * n + 4 * n + n
    assert gpu_model.traffic(fused) <= 1.05 * minimum and gpu_model.coalescing(fused[0]) >= 0.95, fused
    assert gpu_model.fraction_of_peak(fused, min_bytes=minimum) >= 0.5, gpu_model.summarize(fused)

    def composed():
        m = torch.empty(n, dtype=torch.bool, device="mytorch").bernoulli_(0.9)
        return x * m * (1 / 0.9)

    old = gpu_model.trace(composed)
    assert len(old) >= 3 and gpu_model.traffic(old) > 2 * gpu_model.traffic(fused), gpu_model.summarize(old)


STRIDED_SHAPES = [(3, 7, 31), (33, 65, 5), (1, 257, 9), (127, 2, 129), (2, 65537, 3)]


@pytest.mark.every_runtime
@pytest.mark.parametrize("shape", STRIDED_SHAPES, ids=str)
def test_strided_elementwise_copies_and_fills_index_every_dimension(shape):
    """The strided kernels' 32-bit indices (Note [Fast divmod] in kernels/include/mytorch/strided_index.h): a
    divisor per dimension of awkward sizes (primes, 2^k +- 1), permuted operands, a cast, a fill of a view."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(shape, generator=g)
    y = torch.randn(shape[::-1], generator=g)
    xd, yd = x.to("mytorch"), y.to("mytorch")
    assert torch.equal((xd.permute(2, 1, 0) + yd).cpu(), x.permute(2, 1, 0) + y)
    assert torch.equal(xd.permute(1, 2, 0).contiguous().cpu(), x.permute(1, 2, 0).contiguous())
    assert torch.equal(xd.transpose(0, 2).half().cpu(), x.transpose(0, 2).half())
    zd, z = xd.clone(), x.clone()
    zd[:, ::2].fill_(3.5)
    z[:, ::2].fill_(3.5)
    assert torch.equal(zd.cpu(), z)


@needs_model
@pytest.mark.gpu
def test_the_strided_kernels_ran():
    """Not vacuous: on the emulated build the operations above take the strided kernels (not the contiguous
    paths), so the 32-bit index arithmetic is what the comparison checked."""
    x = torch.randn(33, 65, 5, device="mytorch")
    y = torch.randn(5, 65, 33, device="mytorch")
    names = [r["kernel"] for r in gpu_model.trace(lambda: (x.permute(2, 1, 0) + y, x.transpose(0, 2).half()))]
    assert any(n.startswith("ew_strided") for n in names) and any(n.startswith("cast_kernel") for n in names), names


@needs_model
@pytest.mark.gpu
def test_the_model_names_its_device_and_takes_the_h200():
    """Every record names the device whose constants it uses; MYTORCH_EMU_GPU=h200 takes the H200's 4.8 TB/s. A
    memory-bound launch's estimate (its launch cost aside) then lies between the H100's scaled by 3.35 / 4.8 (all
    DRAM-bound) and the H100's own (the faster memory needs more bytes in flight than the launch's warps keep, and
    the model's latency term binds), exactly the former when the H200 estimate is DRAM-bound; its fraction of
    peak, each device's own bandwidth, is at most the H100's."""
    code = (
        "import json, torch, mytorch; from mytorch.testing import gpu_model\n"
        "x = torch.randn(1 << 20, device='mytorch'); x + 1\n"
        "r = gpu_model.trace(lambda: x + 1)\n"
        "print(json.dumps([r[0]['device'], r[0]['bound'], r[0]['est_us'] - r[0]['launch_us'],"
        " gpu_model.fraction_of_peak(r, min_bytes=8 << 20)]))"
    )
    got = {}
    for gpu in ("h100", "h200"):
        p = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "MYTORCH_EMU_GPU": gpu},
        )
        assert p.returncode == 0, p.stderr[-2000:]
        got[gpu] = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["h100"][0] == "H100 SXM" and got["h200"][0] == "H200 SXM", got
    assert got["h100"][1] == "dram", got  # the control: memory-bound on the H100
    ratio = got["h200"][2] / got["h100"][2]
    assert 3.35 / 4.8 - 0.01 <= ratio < 1.0, got
    if got["h200"][1] == "dram":
        assert abs(ratio - 3.35 / 4.8) < 0.01, got
    assert 0 < got["h200"][3] <= got["h100"][3] + 0.01, got
