"""The CUDA sort family on long slices (Note [CUDA radix sort and select] in kernels/include/mytorch/sort.h): the
segmented radix sort against a stable CPU sort bit for bit (values and indices, every dtype, NaN, signed zeros,
infinities, both directions), the radix-select top-k and what is built on them (multinomial without replacement,
unique, randperm), and — on the emulated build — their launches against the GPU performance model.

Marked gpu: on the emulated build (scripts/emu.sh) and on a GPU; skipped on sim."""

import pytest
import torch

from mytorch.testing import gpu_model

pytestmark = pytest.mark.gpu

RADIX_TILE = 2048  # kRadixTile; slices longer than kSharedSortMax (2048) take the radix sort
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float64: torch.int64}


def _long_rows(dtype, rows=3, n=5000, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = (torch.randn(rows, n, generator=g) * 4).round().to(dtype)  # many ties
        x[:, ::97] = float("nan")
        x[:, 1::89] = -0.0
        x[:, 2::83] = 0.0
        x[:, 3::91] = float("inf")
        x[:, 5::93] = -float("inf")
        return x
    if dtype == torch.bool:
        return torch.randint(0, 2, (rows, n), generator=g).bool()
    lo = 0 if dtype == torch.uint8 else -100
    return torch.randint(lo, 100, (rows, n), generator=g).to(dtype)


def _same_bits(mine, ref):
    """Values equal bit for bit (a -0.0 stays -0.0; torch.equal would not tell)."""
    if mine.dtype in BITS:
        return torch.equal(mine.view(BITS[mine.dtype]), ref.view(BITS[ref.dtype]))
    return torch.equal(mine, ref)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_long_sorts_match_a_stable_cpu_sort(dtype, descending):
    x = _long_rows(dtype, rows=2, n=3000)  # a tile and a partial one a slice
    v, i = torch.sort(x.to("mytorch"), dim=-1, descending=descending, stable=True)
    rv, ri = torch.sort(x, dim=-1, descending=descending, stable=True)
    assert torch.equal(i.cpu(), ri), (i.cpu() != ri).nonzero()[:5]
    assert _same_bits(v.cpu(), rv)
    # not vacuous: the input was far from sorted
    assert (ri != torch.arange(x.shape[-1])).float().mean() > 0.5


def test_long_sort_along_a_leading_dim_and_unstable_flag():
    x = _long_rows(torch.float32, rows=4, n=4100).t().contiguous()  # [4100, 4]: sorted along dim 0
    for stable in (True, False):  # our sort is always stable; ATen's unstable result may order ties differently
        v, i = torch.sort(x.to("mytorch"), dim=0, stable=stable)
        rv, ri = torch.sort(x, dim=0, stable=True)
        assert torch.equal(i.cpu(), ri) and _same_bits(v.cpu(), rv)


TOPK = [(torch.float32, k) for k in (1, 5, 100, 2048, 2500, 9000)] + [
    (dt, k) for dt in (torch.bfloat16, torch.float64, torch.int32, torch.uint8) for k in (1, 300)
]


@pytest.mark.parametrize("dtype,k", TOPK, ids=[f"{d}-{k}" for d, k in TOPK])
def test_topk_of_long_rows_is_the_sorts_prefix(dtype, k):
    """The k first pairs in the sort's order (ties by index, NaN largest), whether the k fit the bitonic kernel or
    take the radix sort."""
    x = _long_rows(dtype, rows=4, n=9000, seed=1)
    for largest in (True, False):
        v, i = torch.topk(x.to("mytorch"), k, largest=largest)
        rv, ri = torch.sort(x, descending=largest, stable=True)
        assert torch.equal(i.cpu(), ri[:, :k]), (k, largest)
        assert _same_bits(v.cpu(), rv[:, :k])


def test_multinomial_without_replacement_on_long_rows():
    g = torch.Generator(device="mytorch").manual_seed(3)
    p = torch.rand(6, 50000)
    p[:, ::3] = 0  # never drawn
    p[0] = 0
    p[0, 4321] = 1.0  # certain
    s = torch.multinomial(p.to("mytorch"), 40, replacement=False, generator=g).cpu()
    assert s.shape == (6, 40)
    assert torch.all(s[0, 0] == 4321)
    assert (s[1:] % 3 != 0).all()
    assert all(len(set(row.tolist())) == 40 for row in s[1:])
    one = torch.multinomial(p.to("mytorch"), 1, generator=g).cpu()
    assert one[0, 0] == 4321 and (one[1:] % 3 != 0).all()


def test_unique_and_randperm_of_long_inputs():
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-3000, 3000, (20000,), generator=g)
    u, inv, cnt = torch.unique(x.to("mytorch"), return_inverse=True, return_counts=True)
    ru, rinv, rcnt = torch.unique(x, return_inverse=True, return_counts=True)
    assert torch.equal(u.cpu(), ru) and torch.equal(inv.cpu(), rinv) and torch.equal(cnt.cpu(), rcnt)
    perm = torch.randperm(10000, device="mytorch").cpu()
    assert torch.equal(perm.sort().values, torch.arange(10000))


needs_model = pytest.mark.skipif(
    torch.mytorch.runtime() != "emu" or not gpu_model.available(), reason="the GPU performance model: emu build only"
)


@needs_model
def test_long_sort_is_a_segmented_radix_sort():
    """sort of 2 x 131072 floats: before, a merge sort on one thread per slice (a 4M sort took 22 s on an H100); now
    per 4-bit digit a count, a small scan and a stable scatter over a block per 2,048-element tile of every slice:
    8 passes of 4-byte keys, each moving the pairs once each way, coalesced in each digit's run."""
    rows, n = 2, 1 << 17
    x = torch.randn(rows, n, device="mytorch")
    torch.sort(x)
    launches = gpu_model.trace(lambda: torch.sort(x))
    scatter = [r for r in launches if r["kernel"].startswith("radix_scatter_kernel")]
    count = [r for r in launches if r["kernel"].startswith("radix_count_kernel")]
    assert len(scatter) == len(count) == 8, gpu_model.summarize(launches)
    tiles = rows * n // RADIX_TILE
    assert all(r["grid"][0] == tiles and r["block"][0] == 256 for r in scatter + count), scatter[0]
    # at 8M elements (2 x 4M) the same launches run at least two waves (the model's blocks per SM)
    assert 64 * tiles / (gpu_model.H100_SMS * scatter[0]["blocks_per_sm"]) >= 2, scatter[0]
    e = rows * n
    # count 4 B; scatter: first 4 -> 8, middle 8 -> 8, last 8 -> 12 (values and int64 indices)
    algorithm_bytes = 8 * 4 * e + (12 + 6 * 16 + 20) * e
    assert gpu_model.traffic(launches) <= 1.25 * algorithm_bytes, gpu_model.traffic(launches)
    # a digit's run starts anywhere in a sector: a partial sector at each end of ~128-element runs
    assert min(gpu_model.coalescing(r) for r in scatter + count) >= 0.8, gpu_model.summarize(scatter)
    # a quarter of a wave: the model calls every launch latency-bound here (at 1M elements the same launches reach
    # 0.5 of the bandwidth on the algorithm's bytes: docs/gpu.md); before, the merge sort's estimate was < 0.001
    assert gpu_model.fraction_of_peak(launches, min_bytes=algorithm_bytes) >= 0.1, gpu_model.summarize(launches)


@needs_model
def test_topk_never_sorts_the_row():
    """topk(k=50) of 4 rows of 32k (an LM head's sampling): a radix select, four 8-bit passes reading the keys, then
    a count and a compaction; the 50 pairs sorted alone. Negative control: the model sees the full sort's traffic
    on the same input."""
    rows, n = 4, 1 << 15
    x = torch.randn(rows, n, device="mytorch")
    torch.topk(x, 50)
    top = gpu_model.trace(lambda: torch.topk(x, 50))
    assert not [r for r in top if r["kernel"].startswith("radix_scatter")], gpu_model.summarize(top)
    e = rows * n
    assert gpu_model.traffic(top) <= 1.25 * 6 * 4 * e, gpu_model.traffic(top)  # 4 select passes, count, write
    hist = [r for r in top if r["kernel"].startswith("select_hist")]
    assert len(hist) == 4 and min(gpu_model.coalescing(r) for r in hist) >= 0.9
    full = gpu_model.trace(lambda: torch.sort(x))
    assert gpu_model.traffic(full) > 5 * gpu_model.traffic(top)
    p = torch.softmax(x, -1)
    one = [r["kernel"] for r in gpu_model.trace(lambda: torch.multinomial(p, 1))]  # one draw: an argmax
    assert any(k.startswith("reduce_") for k in one) and not any(
        k.startswith(("radix", "select", "bitonic")) for k in one
    )
    some = [r["kernel"] for r in gpu_model.trace(lambda: torch.multinomial(p, 8))]  # without replacement: a select
    assert any(k.startswith("select_hist") for k in some) and not any(k.startswith("radix_scatter") for k in some)
