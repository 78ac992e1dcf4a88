"""The CUDA reductions' and scans' launch plans (Notes [CUDA reduction plan] and [CUDA scan plan] in
kernels/include/mytorch/reduce.h): every plan (rows, columns, each split over blocks with a second pass; chunked
scans with the look-back, a thread per line) against the CPU, and — on the emulated build — their launch shapes and
traffic against the GPU performance model (Note [GPU performance model], docs/gpu.md).

Marked gpu: on the emulated build (scripts/emu.sh) and on a GPU; skipped on sim."""

import pytest
import torch

from mytorch.testing import gpu_model
from mytorch.testing._compare import assert_aligned, assert_sum_within_bound

pytestmark = pytest.mark.gpu

SMS = 132


def _plan_cases():
    g = torch.Generator().manual_seed(0)
    big = torch.randn(1 << 18, generator=g)  # rows, split: a full reduction over many blocks
    tall = torch.randn(4096, 48, generator=g)  # columns, split: few outputs, many reduced rows
    wide = torch.randn(64, 3000, generator=g)  # rows, split, a tail that is not a multiple of 16 elements
    cols = torch.randn(40, 1100, generator=g)  # columns, one pass (enough outputs)
    return {"big": big, "tall": tall, "wide": wide, "cols": cols}


OPS = {
    "sum": lambda t, d: t.sum(d) if d is not None else t.sum(),
    "mean": lambda t, d: t.mean(d) if d is not None else t.mean(),
    "amax": lambda t, d: t.amax(d) if d is not None else t.amax(),
    "amin": lambda t, d: t.amin(d) if d is not None else t.amin(),
    "argmax": lambda t, d: t.argmax(d) if d is not None else t.argmax(),
    "argmin": lambda t, d: t.argmin(d) if d is not None else t.argmin(),
    "var": lambda t, d: t.var(d) if d is not None else t.var(),
    "std": lambda t, d: t.std(d, correction=0) if d is not None else t.std(correction=0),
    "norm": lambda t, d: t.norm(dim=d) if d is not None else t.norm(),
    "nansum": lambda t, d: t.nansum(d) if d is not None else t.nansum(),
}
SHAPES = [("big", None), ("tall", 0), ("wide", 1), ("cols", 0), ("wide", None)]


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("case,dim", SHAPES, ids=[f"{c}-{d}" for c, d in SHAPES])
def test_reduction_plans_match_the_cpu(op, case, dim):
    x = _plan_cases()[case]
    if op == "nansum":
        x = x.clone()
        x[::7] = float("nan")
    if op in ("argmax", "argmin"):  # ties: the first index, across split chunks too
        x = (x * 4).round()
    mine = OPS[op](x.to("mytorch"), dim).cpu()
    if op in ("sum", "nansum"):
        xs = torch.nan_to_num(x, nan=0.0) if op == "nansum" else x
        assert_sum_within_bound(mine, xs.flatten() if dim is None else xs, 0 if dim is None else dim, op)
    else:
        assert_aligned(mine, OPS[op](x, dim), OPS[op](x.double(), dim) if x.is_floating_point() else None, op)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.bool])
def test_split_plans_of_other_dtypes(dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(3, 70000, generator=g) * 3).to(dtype)
    for d in (None, 1):
        for name in ("sum", "amax") if dtype != torch.bool else ("sum",):
            mine = OPS[name](x.to("mytorch"), d).cpu()
            ref = OPS[name](x, d)
            gold = OPS[name](x.double(), d) if dtype.is_floating_point else None
            assert_aligned(mine, ref, gold, f"{name} {dtype} dim {d}")
    assert torch.equal(x.to("mytorch").any().cpu(), x.any()) and torch.equal(x.to("mytorch").all().cpu(), x.all())


def test_vector_loads_of_an_unaligned_view():
    """A row that starts off a 16-byte boundary takes the scalar loop: the same result."""
    x = torch.randn(1 << 17)
    v = x.to("mytorch")[1:]
    assert_sum_within_bound(v.sum().cpu().reshape(1), x[1:].reshape(1, -1), 1)


SCANS = {
    "cumsum": lambda t, d: t.cumsum(d),
    "cumprod": lambda t, d: t.cumprod(d),
    "logcumsumexp": lambda t, d: t.logcumsumexp(d),
}


@pytest.mark.parametrize("op", sorted(SCANS))
@pytest.mark.parametrize(
    "shape,dim",
    [((65,), 0), ((3, 2048), 1), ((2, 2049), 1), ((4, 9000), 1), ((70001,), 0), ((300, 5), 0), ((7, 100), 1)],
)
def test_scan_plans_match_the_cpu(op, shape, dim):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(*shape, generator=g)
    if op == "cumprod":
        # powers of two, mostly 1: every product exact in float32, so the chunks' look-back is checked exactly
        # (products of arbitrary floats err by the association, as torch.cuda's do: about 2e-5 over 70k factors)
        x = torch.where(x.abs() < 2.3, torch.ones_like(x), torch.where(x > 0, 2.0, 0.5))
    mine = SCANS[op](x.to("mytorch"), dim).cpu()
    # The CPU accumulates float scans in double; torch.cuda, like these kernels, in float. numpy's float32
    # cumsum/cumprod is that float accumulation, and bounds the error as a second reference.
    extra = ()
    if op != "logcumsumexp":
        extra = (torch.from_numpy(getattr(x.numpy(), op)(axis=dim)),)
    assert_aligned(mine, SCANS[op](x, dim), SCANS[op](x.double(), dim), f"{op} {shape}", extra_refs=extra)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("shape,dim", [((65,), 0), ((3, 2049), 1), ((2, 9000), 1), ((300, 5), 0), ((7, 100), 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16, torch.bool])
def test_cummax_cummin_values_and_indices(op, shape, dim, dtype):
    """Values and the index of each running extreme, ties and NaNs taking the latest index (as ATen), across
    chunk edges."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(*shape, generator=g) * 3).round().to(dtype)  # many ties
    if dtype.is_floating_point:
        x.view(-1)[::97] = float("nan")
    mine, ref = getattr(x.to("mytorch"), op)(dim), getattr(x, op)(dim)
    assert torch.equal(mine.values.cpu().nan_to_num(), ref.values.nan_to_num()), op
    assert torch.equal(mine.indices.cpu(), ref.indices), op


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32])
def test_chunked_scans_of_other_dtypes(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(2, 5000, generator=g) * 4).to(dtype)
    mine = x.to("mytorch").cumsum(1).cpu()
    gold = x.double().cumsum(1) if dtype.is_floating_point else None
    assert_aligned(mine, x.cumsum(1), gold, f"cumsum {dtype}")


def test_logcumsumexp_special_values_and_determinism():
    x = torch.randn(3, 6000)
    x[0, 10] = float("inf")
    x[1, 4000] = float("-inf")
    x[2, 100:] = float("-inf")
    x[2, 5000] = float("nan")
    d = x.to("mytorch")
    a, b = d.logcumsumexp(1).cpu(), d.logcumsumexp(1).cpu()
    assert torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.isnan(), b.isnan())
    assert_aligned(a, x.logcumsumexp(1), x.double().logcumsumexp(1), "logcumsumexp")


# ---- the GPU performance model (emulated build only) ----------------------------------------------------------
needs_model = pytest.mark.skipif(
    torch.mytorch.runtime() != "emu" or not gpu_model.available(), reason="the GPU performance model: emu build only"
)


def assert_uses_the_gpu(launches, main, min_bytes):
    """The battery's bar for a large input: the main launch over at least two waves, coalesced, the launches'
    traffic within 1.25x of the op's minimum and at least half the H100's bandwidth (the model's estimate)."""
    assert main["waves"] >= 2, main
    assert gpu_model.traffic(launches) <= 1.25 * min_bytes, launches
    assert gpu_model.coalescing(main) >= 0.95, main
    assert gpu_model.fraction_of_peak(launches, min_bytes=min_bytes) >= 0.5, launches


@needs_model
def test_full_sum_uses_the_whole_gpu():
    """x.sum() of 4M floats: before, one 256-thread block (0.1% of the bandwidth); now blocks over every SM for
    at least two waves, reading each byte once, coalesced, then a small second pass."""
    n = 1 << 22
    x = torch.randn(n, device="mytorch")
    x.sum()
    launches = gpu_model.trace(lambda: x.sum())
    assert len(launches) == 2, launches
    assert_uses_the_gpu(launches, launches[0], 4 * n)


@needs_model
def test_leading_dim_sum_is_coalesced():
    """sum over dim 0 of a [rows, cols] tensor (bias gradients): a thread per column, adjacent threads on
    adjacent columns, the rows split over blocks when the columns are few."""
    r, c = 65536, 256
    x = torch.randn(r, c, device="mytorch")
    x.sum(0)
    launches = gpu_model.trace(lambda: x.sum(0))
    assert_uses_the_gpu(launches, launches[0], 4 * r * c)


@needs_model
def test_model_sees_uncoalesced_access():
    """Negative control of the coalescing metric: a transposed operand reads a sector per lane."""
    x = torch.randn(1024, 1024, device="mytorch")
    y = torch.randn(1024, 1024, device="mytorch")
    (x.t() + y)
    launches = gpu_model.trace(lambda: x.t() + y)
    assert gpu_model.coalescing(launches[0]) < 0.5, launches


@needs_model
def test_long_scans_use_the_whole_gpu():
    """cumsum of long lines: before, a thread per line (0.03% of the bandwidth); now blocks of 2,048-element chunks
    with a decoupled look-back: every element read and written once, coalesced, over at least two waves."""
    lines, n = 5, 1 << 20
    x = torch.randn(lines, n, device="mytorch")
    x.cumsum(1)
    launches = gpu_model.trace(lambda: x.cumsum(1))
    assert_uses_the_gpu(launches, launches[-1], 8 * lines * n)


@needs_model
def test_model_sees_a_single_block():
    """Negative control of the wave and fraction checks: a scan of two strided lines runs a thread per line (the
    plan keeps that for strided lines) and the model says it uses a sliver of the device."""
    x = torch.randn(1 << 14, 2, device="mytorch")
    launches = gpu_model.trace(lambda: x.cumsum(0))
    assert launches[0]["waves"] == 1 and gpu_model.fraction_of_peak(launches, min_bytes=8 * 2 << 14) < 0.01, launches


@pytest.mark.tensor_cores
@needs_model
def test_model_counts_shared_memory_bank_conflicts():
    """A shared-memory access pattern with known conflicts (the deterministic attention backward's unpadded tiles)
    shows extra wavefronts; a conflict-free kernel (elementwise) shows none."""
    x = torch.randn(1 << 16, device="mytorch")
    plain = gpu_model.trace(lambda: x + 1)
    assert sum(r["bank_conflicts"] for r in plain) == 0, plain
    # the deterministic attention backward reads its tiles down columns of unpadded shared memory: conflicts
    q = torch.randn(1, 2, 128, 64, device="mytorch", dtype=torch.bfloat16, requires_grad=True)
    o = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    torch.use_deterministic_algorithms(True)
    try:
        attn = gpu_model.trace(lambda: torch.autograd.grad(o, q, torch.ones_like(o)))
    finally:
        torch.use_deterministic_algorithms(False)
    assert sum(r["bank_conflicts"] for r in attn) > 0, attn
    assert all(r["est_us"] > 0 for r in attn), attn


# ---- softmax rows longer than shared memory: one online pass for the maximum and the sum ----------------------
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_long_softmax_rows_match_the_cpu(log, dtype):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(6, 20000, generator=g) * 4).to(dtype)
    x[1, :7000] = float("-inf")  # the row's first elements -inf: the running sums must not turn NaN
    x[2, 12345] = float("inf")
    x[3, 999] = float("nan")
    x[4] = float("-inf")  # a row of -inf only: NaN, as on the CPU
    fn = torch.log_softmax if log else torch.softmax
    mine = fn(x.to("mytorch"), -1).cpu()
    assert_aligned(mine, fn(x, -1), fn(x.double(), -1), f"{'log_' if log else ''}softmax {dtype}")


@needs_model
def test_long_softmax_rows_read_once_from_memory():
    """log_softmax of rows too long for shared memory (the LM head's): before, three passes over each row; now the
    maximum and the sum in one online pass, then the write pass, which finds the row in L2 (the model counts each
    sector of a launch once: DRAM traffic is the minimum)."""
    rows, n = 64, 20000
    x = torch.randn(rows, n, device="mytorch")
    torch.log_softmax(x, -1)
    launches = gpu_model.trace(lambda: torch.log_softmax(x, -1))
    (k,) = launches
    assert gpu_model.dram_bytes(launches) <= 1.05 * 8 * rows * n, k
    assert gpu_model.traffic(launches) <= 1.55 * 8 * rows * n, k  # two reads and a write requested
    assert gpu_model.coalescing(k) >= 0.95, k


@needs_model
def test_amp_unscale_is_one_launch_per_list():
    """GradScaler's unscale of 16 gradients: before, a launch per tensor (16 launches of 64 blocks, 13% of peak at
    scale in the model); now one launch, a block row per tensor."""
    grads = [torch.randn(1 << 14, device="mytorch") for _ in range(16)]
    found, inv = torch.zeros(1, device="mytorch"), torch.ones(1, device="mytorch")
    launches = gpu_model.trace(lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv))
    assert len(launches) == 1 and launches[0]["grid"][1] == 16, launches
    assert gpu_model.coalescing(launches[0]) >= 0.95, launches
    # (its stores are not counted: the instrumentation elides a store's check right after a load of the same
    # address, so the model cannot see in-place writes; docs/gpu.md, "Its limits")


@needs_model
def test_layer_norm_weight_gradients_use_the_planner():
    """LayerNorm's backward: dw and db were partial rows per warp (2048 rows of 256: 2048 partial rows, 4 MB each)
    summed by one thread per column over all of them (0.2% of the bandwidth at scale). Now the block's warps combine
    in shared memory first (a partial row per block) and the reduction planner's column plan sums the rows (split
    over blocks, second pass): the partials move an eighth of what they did, and the backward reaches 10% of the
    bandwidth at scale (x and dy are read twice and the weight once a row: 2.6x the minimum bytes)."""
    import torch.nn.functional as F

    T, H = 2048, 256
    x = torch.randn(T, H, device="mytorch", requires_grad=True)
    w = torch.randn(H, device="mytorch", requires_grad=True)
    b = torch.randn(H, device="mytorch", requires_grad=True)
    y = F.layer_norm(x, (H,), w, b)
    g = torch.randn(T, H, device="mytorch")

    def backward():
        torch.autograd.grad(y, (x, w, b), g, retain_graph=True)

    backward()
    launches = gpu_model.trace(backward)
    main = [r for r in launches if r["kernel"].startswith("backward_kernel")]
    sums = [r for r in launches if r["kernel"].startswith("reduce_")]
    assert len(main) == 1 and len(sums) >= 2, gpu_model.summarize(launches)
    partial_rows = main[0]["grid"][0]
    assert sum(r["bytes_read"] for r in sums if "finish" not in r["kernel"]) == 2 * partial_rows * H * 4
    assert partial_rows * 8 <= T, main[0]  # a partial row per block of 8 rows' warps, not per warp
    minimum = 12 * T * H
    assert gpu_model.traffic(launches) <= 3 * minimum, gpu_model.summarize(launches)
    assert gpu_model.fraction_of_peak(launches, min_bytes=minimum) >= 0.1, gpu_model.summarize(launches)
