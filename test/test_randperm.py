"""randperm (Note [Random permutation] in kernels/include/mytorch/random.h): random buckets, a stable grouping by
bucket, Fisher-Yates within each bucket. The permutation is checked bit for bit against the algorithm written here
in numpy from a Philox stream computed here (so the sim twin and the cuda kernels, run on the emulated build, give
the same result for a generator state), at 1 and 2 threads; its uniformity by chi-square on positions, with a
negative control that keeps the buckets in place."""

import numpy as np
import pytest
import torch

from mytorch.testing._philox import philox_words

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

BUCKET = 256  # kPermBucket
LANE_BUCKET, LANE_SWAP = 6, 7  # PhiloxLane::PermBucket, PermSwap


def _reference(seed, offset, n, buckets_of=None):
    """The permutation of Note [Random permutation]; buckets_of overrides the bucket draw (negative control)."""
    nb = (n + BUCKET - 1) // BUCKET
    ids = (philox_words(seed, LANE_BUCKET, offset, n) * np.uint64(nb)) >> np.uint64(32)
    if buckets_of is not None:
        ids = buckets_of(n)
    out = np.argsort(ids, kind="stable").astype(np.int64)
    swaps = philox_words(seed, LANE_SWAP, offset, n)
    starts = np.searchsorted(np.sort(ids), np.arange(nb + 1))
    for b in range(nb):
        s, e = int(starts[b]), int(starts[b + 1])
        for k in range(e - s - 1, 0, -1):
            j = (int(swaps[s + k]) * (k + 1)) >> 32
            out[s + k], out[s + j] = out[s + j], out[s + k]
    return torch.from_numpy(out)


def _state():
    seed, offset = (int(v) for v in torch.mytorch.get_rng_state().view(torch.int64))
    return seed, offset


@pytest.mark.parametrize("n", [1, 2, 255, 257, 1000, 40000])
def test_randperm_is_the_reference_permutation(n):
    torch.mytorch.manual_seed(77)
    torch.rand(6, device="mytorch")  # offset 8: not the stream's start
    state = torch.mytorch.get_rng_state()
    seed, offset = _state()
    got = torch.randperm(n, device="mytorch").cpu()
    assert torch.equal(got, _reference(seed, offset, n))
    assert _state()[1] == offset + (n + 3) // 4 * 4  # the generator advanced by n, rounded up to 4
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        torch.mytorch.set_rng_state(state)
        assert torch.equal(torch.randperm(n, device="mytorch").cpu(), got)
    finally:
        torch.set_num_threads(threads)
    torch.mytorch.set_rng_state(state)  # out= of another dtype: the same permutation, converted
    out = torch.empty(3, dtype=torch.float64, device="mytorch")
    torch.randperm(n, out=out)
    assert torch.equal(out.cpu(), got.double())
    if n > 2:  # negative controls: the stream 4 words on; one bucket for all (where there are several)
        assert not torch.equal(got, _reference(seed, offset + 4, n))
    if n > BUCKET:
        assert not torch.equal(got, _reference(seed, offset, n, lambda m: np.zeros(m, np.uint64)))


def _chi2_positions(perms, element, bins=10):
    n = perms.shape[1]
    pos = (perms == element).nonzero()[:, 1].numpy()
    counts = np.bincount(pos * bins // n, minlength=bins)
    expected = len(pos) / bins
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.skipif(
    torch.mytorch.runtime() != "sim",
    reason="a property of the algorithm, checked once: the reference test above shows every runtime computes it",
)
def test_randperm_is_uniform_across_buckets():
    """Positions of the first and last elements over 2,000 permutations of 600 (3 buckets), in 10 bins that straddle
    the buckets' boundaries: chi-square below 27.9 (9 degrees of freedom, p = 0.001; the draws are seeded). Negative
    control: buckets by position (element i in bucket i // 256) leave element 0 in the first 256 places."""
    torch.mytorch.manual_seed(5)
    perms = torch.stack([torch.randperm(600, device="mytorch").cpu() for _ in range(2000)])
    for element in (0, 599):
        assert _chi2_positions(perms, element) < 27.9, element
    before = (perms.argsort(1)[:, 0] < perms.argsort(1)[:, 1]).float().mean().item()
    assert abs(before - 0.5) < 4 * 0.5 / 2000**0.5  # element 0 before element 1 half the time
    seed, offset = _state()
    fixed = torch.stack([_reference(seed, offset + 600 * k, 600, lambda m: np.arange(m) // BUCKET) for k in range(200)])
    assert _chi2_positions(fixed, 0) > 27.9
