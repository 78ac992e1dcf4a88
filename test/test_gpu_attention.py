"""The tensor-core attention (kernels/cuda/attention_mma*.cu) under the GPU performance model: the launch shape, the
traffic and the tensor-core work of the forward and of the 5-GEMM backward, against what their tiling must do
(docs/gpu.md). Correctness against the sim twin is test_gpu_nn.py's battery; the emulation's negative controls
(mma.sync, ldmatrix, cp.async) are in test_emu.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import mytorch  # noqa: F401
from mytorch.testing import gpu_model
from mytorch.testing._compare import assert_aligned

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        torch.mytorch.runtime() != "emu" or not gpu_model.available(),
        reason="the GPU performance model: emu build only",
    ),
]

TILE = 64  # query and key tile of both kernels


def _qkv(b, h, s, d, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, s, d, generator=g).to(dtype).to("mytorch") for _ in range(3)]


def _tile_pairs(h, s, causal):
    t = (s + TILE - 1) // TILE
    return h * (t * (t + 1) // 2 if causal else t * t)


@pytest.mark.tensor_cores
@pytest.mark.parametrize("d", [64, 128])
def test_forward_is_one_conflict_free_coalesced_launch(d):
    h, s = 4, 256
    q, k, v = _qkv(1, h, s, d)
    launches = gpu_model.trace(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert [r["kernel"] for r in launches] == ["forward_mma<T, D>"], gpu_model.summarize(launches)
    r = launches[0]
    pairs = _tile_pairs(h, s, True)
    # per (query tile, key tile) and warp: S = Q K^T is 8 n-tiles x d/16 k-steps, O += P V 4 k-steps x d/8 n-tiles
    assert r["mma"] == pairs * 4 * d, r
    assert r["bank_conflicts"] == 0, r  # swizzled tiles, ldmatrix phases on distinct banks
    assert gpu_model.coalescing(r) >= 0.9, r  # 16-byte cp.async and 16-byte output rows
    # Q and the output once, K and V once per tile pair (the algorithm's minimum), the logsumexp once
    qo = h * s * d * 2
    assert r["bytes_read"] <= 1.02 * (qo + pairs * 2 * TILE * d * 2), r
    assert r["bytes_written"] == qo + h * s * 4, r
    assert r["smem"] == 5 * TILE * d * 2, r  # Q and two stages of K and V


@pytest.mark.tensor_cores
def test_backward_is_five_gemms_with_atomic_dq():
    h, s, d = 4, 256, 64
    q, k, v = (t.requires_grad_() for t in _qkv(1, h, s, d))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    go = torch.randn_like(o)
    launches = gpu_model.trace(lambda: torch.autograd.grad(o, (q, k, v), go))
    names = [r["kernel"] for r in launches]
    assert names == ["delta_kernel<T>", "bwd_kernel<T, D>", "dq_convert_kernel<T>"], gpu_model.summarize(launches)
    r = launches[1]
    # five 64 x 64 x d GEMMs per tile pair (S^T, dP^T, dV, dK, dQ), each 64 * 64 * d / (16 * 8 * 16) mma.sync
    assert r["mma"] == _tile_pairs(h, s, True) * 5 * TILE * TILE * d // 2048, r
    assert r["bank_conflicts"] == 0, r
    assert gpu_model.coalescing(r) >= 0.8, r  # the dQ atomics are 8-byte pairs on 4 lanes of a row


@pytest.mark.tensor_cores
def test_deterministic_backward_takes_the_kernels_without_atomics():
    """Under torch.use_deterministic_algorithms the 7-GEMM kernels run (no atomics), and agree with the default."""
    h, s, d = 2, 192, 64
    q, k, v = (t.requires_grad_() for t in _qkv(1, h, s, d, seed=1))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    go = torch.randn_like(o)
    fast = torch.autograd.grad(o, (q, k, v), go, retain_graph=True)
    torch.use_deterministic_algorithms(True)
    try:
        launches = gpu_model.trace(lambda: torch.autograd.grad(o, (q, k, v), go, retain_graph=True))
        det = torch.autograd.grad(o, (q, k, v), go)
    finally:
        torch.use_deterministic_algorithms(False)
    assert [r["kernel"] for r in launches] == ["delta_kernel<T>", "dkdv_kernel<T, D>", "dq_kernel<T, D>"], launches
    for got, ref, name in zip(fast, det, ("dq", "dk", "dv")):
        assert_aligned(got.cpu(), ref.cpu(), None, name)


@pytest.mark.parametrize(
    "case",
    ["d80", "float32", "bias", "misaligned"],
)
def test_other_shapes_take_the_cuda_core_kernels(case):
    """What the tensor-core kernels do not take runs the CUDA-core kernels, still matching the CPU."""
    d, dtype = (80, torch.bfloat16) if case == "d80" else (64, torch.float32 if case == "float32" else torch.bfloat16)
    q, k, v = _qkv(1, 2, 96, d, dtype=dtype, seed=2)
    mask = None
    if case == "bias":
        mask = torch.randn(96, 96).to(dtype).to("mytorch")
    if case == "misaligned":  # rows of 16-byte alignment broken by a one-element offset
        q = torch.empty(1 * 2 * 96 * d + 1, dtype=dtype, device="mytorch")[1:].view(1, 2, 96, d).copy_(q)
    launches = gpu_model.trace(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert [r["kernel"].split("<")[0] for r in launches] == ["forward_tiled_kernel"], gpu_model.summarize(launches)
    go = torch.randn(1, 2, 96, d, generator=torch.Generator().manual_seed(3)).to(dtype)
    mc = mask.cpu() if mask is not None else None
    results = {}
    for name, (qq, kk, vv, gg, mm) in {
        "mytorch": (q, k, v, go.to("mytorch"), mask),
        "cpu": (q.cpu(), k.cpu(), v.cpu(), go, mc),
        "gold": (
            q.cpu().double(),
            k.cpu().double(),
            v.cpu().double(),
            go.double(),
            None if mc is None else mc.double(),
        ),
    }.items():
        ins = [t.detach().requires_grad_() for t in (qq, kk, vv)]
        y = F.scaled_dot_product_attention(*ins, attn_mask=mm)
        results[name] = [y.detach().cpu()] + [t.cpu() for t in torch.autograd.grad(y, ins, gg)]
    for i, (m, r, g) in enumerate(zip(results["mytorch"], results["cpu"], results["gold"])):
        assert_aligned(m, r, g, f"{case} {['out', 'dq', 'dk', 'dv'][i]}")


def test_cuda_core_forward_shares_key_tiles_between_rows():
    """The CUDA-core forward stages each key/value tile once per block of 8 query rows (a warp per row used to read
    every key of its row from global memory)."""
    h, s, d = 2, 256, 64
    q, k, v = _qkv(1, h, s, d, dtype=torch.float32, seed=4)
    launches = gpu_model.trace(lambda: F.scaled_dot_product_attention(q, k, v))
    r = launches[0]
    assert r["kernel"].startswith("forward_tiled_kernel") and len(launches) == 1, gpu_model.summarize(launches)
    blocks = h * s // 8
    assert r["grid"][0] == blocks, r
    assert r["bytes_read"] <= 1.05 * (h * s * d * 4 + blocks * 2 * s * d * 4), r  # Q once, K and V once a block
    assert r["bank_conflicts"] <= 0.05 * r["shared_requests"], r


CUDA_CORE_BATTERY = """
import torch, torch.nn.functional as F, mytorch
def run(dev):
    g = torch.Generator().manual_seed(11)
    out = {}
    cases = [  # (b, hq, hk, lq, lk, d, dv, causal, dropout, mask, dtype): none of them the tensor-core kernels'
        (2, 4, 2, 45, 77, 32, 32, True, 0.0, False, torch.float32),
        (1, 2, 2, 70, 33, 80, 48, False, 0.2, False, torch.float32),
        (1, 3, 1, 9, 130, 256, 256, False, 0.0, True, torch.bfloat16),
        (2, 2, 2, 40, 40, 64, 64, True, 0.0, False, torch.float64),
        (1, 2, 2, 33, 65, 64, 64, False, 0.3, True, torch.float16),
    ]
    for n, (b, hq, hk, lq, lk, d, dv, causal, p, masked, dt) in enumerate(cases):
        q = torch.randn(b, hq, lq, d, generator=g).to(dt).to(dev).requires_grad_()
        k = torch.randn(b, hk, lk, d, generator=g).to(dt).to(dev).requires_grad_()
        v = torch.randn(b, hk, lk, dv, generator=g).to(dt).to(dev).requires_grad_()
        mask = (torch.randn(lq, lk, generator=g) > -1.0).to(dev) if masked else None
        torch.mytorch.manual_seed(5) if dev == "mytorch" else None
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal,
                                           enable_gqa=hq != hk)
        gy = torch.randn(y.shape, generator=g).to(dt).to(dev)
        grads = torch.autograd.grad(y, (q, k, v), gy)
        out[f"{n}_out"] = y.detach().cpu()
        for name, t in zip(("dq", "dk", "dv"), grads):
            out[f"{n}_{name}"] = t.cpu()
    return out
"""


def test_cuda_core_kernels_match_the_sim_twin(tmp_path):
    """The CUDA-core forward, dQ and dK/dV (tiled in shared memory) against the sim reference on the shapes the
    tensor-core kernels do not take: odd head dims, dv != d, GQA, causal with lq != lk, masks, dropout (the same
    Philox mask on both runtimes), float32 / float64 / half / bfloat16."""
    from conftest import run_python

    paths = {}
    for name, env in (("emu", {}), ("sim", {"MYTORCH_RUNTIME": "sim"})):
        paths[name] = tmp_path / f"{name}.pt"
        r = run_python(
            CUDA_CORE_BATTERY + f"\ntorch.save(run('mytorch'), {str(paths[name])!r})\n", env=env, timeout=600
        )
        assert r.returncode == 0, r.stderr
    mine, sim = torch.load(paths["emu"]), torch.load(paths["sim"])
    for key, ref in sim.items():
        assert_aligned(mine[key], ref, None, key)
