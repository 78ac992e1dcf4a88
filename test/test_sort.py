"""The sort engine on every runtime (Note [Sort engine], Note [Sim sort and top-k]): short slices against the CPU's
stable sort, bit for bit."""

import pytest
import torch

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(17)


def _dev(t):
    return t.to("mytorch")


_SORT_BITS = {
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float64: torch.int64,
}


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.float64,
        torch.int64,
        torch.int32,
        torch.int8,
        torch.uint8,
        torch.bool,
    ],
    ids=str,
)
def test_short_sorts_are_the_stable_cpu_sort(dtype):
    """Note [Sim sort and top-k]: slices under 4096 elements (std::sort of packed (key, index) for keys of 32 bits or
    fewer, of pairs for the 64-bit types) against the CPU's stable sort bit for bit, both directions, with ties, NaN,
    -0.0 and +-inf among them, rows of 1, 60 and 1000; the values' bits (a -0.0 stays where the stable order puts it)
    and the indices."""
    for n in (1, 60, 1000):
        if dtype.is_floating_point:
            x = (torch.randn(7, n, generator=g) * 4).round().to(dtype)
            x[:, ::13] = float("nan")
            x[:, 1::11] = -0.0
            x[:, 2::7] = 0.0
            x[:, 3::17] = float("inf")
            x[:, 5::19] = -float("inf")
        elif dtype == torch.bool:
            x = torch.randint(0, 2, (7, n), generator=g).bool()
        else:
            x = torch.randint(0 if dtype == torch.uint8 else -100, 100, (7, n), generator=g).to(dtype)
        for descending in (False, True):
            mine = _dev(x).sort(dim=-1, descending=descending, stable=True)
            ref = x.sort(dim=-1, descending=descending, stable=True)
            bits = _SORT_BITS.get(dtype)
            got, want = mine.values.cpu(), ref.values
            assert torch.equal(got.view(bits), want.view(bits)) if bits else torch.equal(got, want), (n, descending)
            assert torch.equal(mine.indices.cpu(), ref.indices), (n, descending)
