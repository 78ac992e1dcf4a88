"""The per-device Philox generator: seeding, state, reproducibility across seeds and devices, distributions."""

import math

import pytest
import torch


def draw(n=1000, device="mytorch", dtype=torch.float32):
    return torch.randn(n, device=device, dtype=dtype).cpu()


def test_manual_seed_reproducible():
    torch.mytorch.manual_seed(123)
    a = draw()
    torch.mytorch.manual_seed(123)
    b = draw()
    torch.mytorch.manual_seed(124)
    c = draw()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert torch.mytorch.initial_seed() == 124


def test_torch_manual_seed_seeds_mytorch():
    torch.manual_seed(7)
    a = draw()
    torch.manual_seed(7)
    assert torch.equal(a, draw())


def test_consecutive_draws_differ_and_state_round_trip():
    torch.mytorch.manual_seed(0)
    state = torch.mytorch.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    a, b = draw(), draw()
    assert not torch.equal(a, b)
    torch.mytorch.set_rng_state(state)
    assert torch.equal(draw(), a)
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.mytorch.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="uint8"):
        torch.mytorch.set_rng_state(torch.zeros(16))


def test_devices_have_their_own_generators(two_devices):
    torch.mytorch.manual_seed_all(5)
    a0 = draw(device="mytorch:0")
    a1 = draw(device="mytorch:1")
    assert torch.equal(a0, a1)  # same seed, same stream of numbers
    torch.mytorch.manual_seed_all(5)
    with torch.mytorch.device(1):
        torch.mytorch.manual_seed(6)
    assert torch.equal(draw(device="mytorch:0"), a0)
    assert not torch.equal(draw(device="mytorch:1"), a1)
    assert len(torch.mytorch.get_rng_state_all()) == torch.mytorch.device_count()


def test_explicit_generator():
    g = torch.Generator(device="mytorch").manual_seed(99)
    a = torch.rand(100, device="mytorch", generator=g).cpu()
    g.manual_seed(99)
    assert torch.equal(torch.rand(100, device="mytorch", generator=g).cpu(), a)
    assert g.device.type == "mytorch"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_distribution_moments(dtype):
    torch.mytorch.manual_seed(0)
    n = 200_000
    z = torch.randn(n, device="mytorch", dtype=dtype).cpu().double()
    tol = 5 / math.sqrt(n)
    assert abs(z.mean().item()) < tol and abs(z.std().item() - 1) < tol + (
        0.01 if dtype in (torch.float16, torch.bfloat16) else 0
    )
    u = torch.empty(n, device="mytorch", dtype=dtype).uniform_(-2, 3).cpu().double()
    assert u.min() >= -2 and u.max() <= 3
    assert abs(u.mean().item() - 0.5) < 5 * 5 / math.sqrt(12 * n) + 0.01
    m = torch.empty(n, device="mytorch", dtype=dtype).normal_(10, 2).cpu().double()
    assert abs(m.mean().item() - 10) < 0.05 and abs(m.std().item() - 2) < 0.05
    e = torch.empty(n, device="mytorch", dtype=dtype).exponential_(2.0).cpu().double()  # mean 1/2, std 1/2
    assert e.min() >= 0 and torch.isfinite(e).all()
    assert abs(e.mean().item() - 0.5) < 5 * 0.5 / math.sqrt(n) + (
        0.01 if dtype in (torch.float16, torch.bfloat16) else 0
    )
    assert abs(e.std().item() - 0.5) < 0.01


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8, torch.float32])
def test_integer_ranges(dtype):
    t = torch.randint(-3 if dtype != torch.uint8 else 0, 7, (50_000,), device="mytorch", dtype=dtype).cpu()
    lo = -3 if dtype != torch.uint8 else 0
    assert t.min().item() == lo and t.max().item() == 6
    counts = torch.bincount((t.long() - lo))
    assert counts.min().item() > 50_000 / (7 - lo) * 0.9
    r = torch.empty(10_000, device="mytorch", dtype=dtype).random_().cpu()
    assert r.min().item() >= 0


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_random_fills(dtype):
    # The CPU fills these from a range; random_() (the whole type) is what CUDA does, and the CPU lacks.
    t = torch.empty(30_000, device="mytorch", dtype=dtype).random_(3, 10)
    assert t.dtype == dtype
    t = t.cpu().long()  # the CPU has few kernels for these dtypes
    assert t.min().item() == 3 and t.max().item() == 9
    assert torch.bincount(t - 3).min().item() > 30_000 / 7 * 0.9
    s = torch.zeros(60, 40, device="mytorch", dtype=dtype)[:, ::2]
    s.random_(7)
    base = s._base.cpu().long()
    assert base[:, 1::2].eq(0).all() and base[:, ::2].lt(7).all() and base[:, ::2].ne(0).any()
    full = torch.empty(20_000, device="mytorch", dtype=dtype).random_().cpu()
    top = {torch.uint16: 2**16, torch.uint32: 2**32, torch.uint64: 2**64}[dtype]
    vals = [v % top for v in full.tolist()]  # uint64 tolist() gives Python ints in [0, 2**64)
    assert max(vals) > top * 0.99 and min(vals) < top * 0.01
    with pytest.raises(RuntimeError, match="not implemented for"):
        torch.empty(3, device="mytorch", dtype=dtype).bernoulli_(0.5)


@pytest.mark.parametrize(
    "dtype,args,message",
    [
        (torch.uint16, (0, 70_000), "to - 1 is out of bounds for short unsigned int"),
        (torch.uint16, (-1, 5), "from is out of bounds for short unsigned int"),
        (torch.int16, (0, 70_000), "to - 1 is out of bounds for short int"),
        (torch.uint8, (0, 300), "to - 1 is out of bounds for unsigned char"),
    ],
)
def test_random_range_outside_dtype_raises_like_cpu(dtype, args, message):
    for device in ("cpu", "mytorch"):
        with pytest.raises(RuntimeError, match=message):
            torch.empty(3, dtype=dtype, device=device).random_(*args)


def test_bernoulli_and_dropout():
    torch.mytorch.manual_seed(1)
    b = torch.empty(100_000, device="mytorch").bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 0.01
    x = torch.ones(10_000, device="mytorch")
    torch.mytorch.manual_seed(2)
    y1 = torch.nn.functional.dropout(x, 0.25, training=True).cpu()
    torch.mytorch.manual_seed(2)
    y2 = torch.nn.functional.dropout(x, 0.25, training=True).cpu()
    assert torch.equal(y1, y2)
    assert set(y1.unique().tolist()) <= {0.0, torch.tensor(1 / 0.75, dtype=torch.float32).item()}
    assert abs((y1 == 0).float().mean().item() - 0.25) < 0.02
    assert torch.equal(torch.nn.functional.dropout(x, 0.25, training=False).cpu(), x.cpu())


def test_non_contiguous_random_fill():
    torch.mytorch.manual_seed(3)
    t = torch.zeros(40, 30, device="mytorch").t()
    t.uniform_()
    c = t.cpu()
    assert (c > 0).float().mean() > 0.99 and c.max() < 1


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        torch.empty(3, device="mytorch").exponential_(-1.0)
    with pytest.raises(RuntimeError, match="from=3 > to=1"):
        torch.empty(3, device="mytorch").uniform_(3, 1)
    with pytest.raises(RuntimeError, match="std >= 0"):
        torch.empty(3, device="mytorch").normal_(0, -1)
    with pytest.raises(RuntimeError, match="less than 'to'"):
        torch.empty(3, device="mytorch").random_(5, 2)
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        torch.empty(3, device="mytorch").bernoulli_(1.5)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):  # the CPU kernel's refusal
        torch.empty(3, dtype=torch.int64, device="mytorch").normal_()


def test_complex_normal_and_unsupported_dtype():
    torch.mytorch.manual_seed(4)
    z = torch.randn(100_000, dtype=torch.complex64, device="mytorch").cpu()
    assert abs(z.real.std().item() - 2**-0.5) < 0.01 and abs(z.imag.std().item() - 2**-0.5) < 0.01
    with pytest.raises(RuntimeError, match="Float8_e4m3fn"):
        torch.empty(3, dtype=torch.float8_e4m3fn, device="mytorch").normal_()


def _philox_normals(seed: int, offset: int, n: int):
    """random_value's float normals from first principles (Note [Philox layout], Note [Vectorised normals]): element
    i takes Philox4x32-10 of block (offset + i) // 2 in the NormalFloat lane (3), Box-Muller on its first two words,
    cos for an even i, sin for an odd one; in float64 but for the float32 angle the kernel computes."""
    import numpy as np

    from mytorch.testing._philox import philox_blocks

    c = philox_blocks(seed, 3, (np.uint64(offset) + np.arange(n, dtype=np.uint64)) // np.uint64(2))
    u1 = 1 - (c[0] >> np.uint64(8)).astype(np.float64) / 2**24
    u2 = ((c[1] >> np.uint64(8)).astype(np.float64) / 2**24).astype(np.float32)
    angle = (np.float32(6.2831853) * u2).astype(np.float64)
    rad = np.sqrt(-2 * np.log(u1))
    return torch.from_numpy(np.where(np.arange(n) % 2 == 1, rad * np.sin(angle), rad * np.cos(angle)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normals_are_box_muller_of_their_philox_block(dtype):
    """Note [Vectorised normals] (sim/random.cpp): randn's values against Box-Muller of a Philox stream computed here,
    at an offset whose first block is not a multiple of the kernel's 64-block chunks, with a length that ends inside
    one; the same bits at 1 and 2 threads (an element's value depends on its index alone)."""
    from mytorch.testing._compare import assert_aligned

    torch.mytorch.manual_seed(2024)
    torch.randn(148, device="mytorch")  # offset 148: block 74
    seed, offset = (int(v) for v in torch.mytorch.get_rng_state().view(torch.int64))
    state = torch.mytorch.get_rng_state()
    n = 64 * 2 * 20 + 37  # 21 chunks: more than one grain of par::parallel_for
    got = torch.randn(n, device="mytorch", dtype=dtype).cpu()
    gold = _philox_normals(seed, offset, n)
    assert_aligned(got, gold.to(dtype), gold, what=f"randn {dtype}")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        torch.mytorch.set_rng_state(state)
        one = torch.randn(n, device="mytorch", dtype=dtype).cpu()
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, got)
    with pytest.raises(AssertionError):  # negative control: the neighbouring block's normals
        assert_aligned(got, _philox_normals(seed, offset + 2, n).to(dtype), _philox_normals(seed, offset + 2, n))
