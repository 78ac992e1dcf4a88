"""searchsorted and bucketize on the sort family's binary search (SearchArgs in kernels/include/mytorch/sort.h):
equal to the CPU for 1-D and batched boundaries, both sides, a sorter, NaN, mixed dtypes, int32 results, the scalar
overloads and a strided out=; ATen's refusals. With the fallback forbidden; on the emulated build the CUDA kernel."""

import pytest
import torch

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(11)


def _both(fn, *tensors):
    ref = fn(*tensors)
    dev = fn(*(t.to("mytorch") if isinstance(t, torch.Tensor) else t for t in tensors))
    assert dev.device.type == "mytorch"
    assert dev.dtype == ref.dtype and torch.equal(dev.cpu(), ref)
    return ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32])
def test_searchsorted_matches_the_cpu(dtype):
    bd = torch.randint(-20, 20, (4, 9), generator=g).sort(-1).values.to(dtype)  # repeated boundaries
    v = torch.randint(-25, 25, (4, 13), generator=g).to(dtype)
    for right in (False, True):
        r = _both(lambda b, x: torch.searchsorted(b, x, right=right), bd, v)
        _both(lambda b, x: torch.searchsorted(b[0], x, right=right), bd, v)  # one row for every value
        _both(lambda b, x: torch.searchsorted(b, x, side="right" if right else "left", out_int32=True), bd, v)
        _both(lambda x, b: torch.bucketize(x, b[1], right=right), v, bd)
    assert r.min() == 0 and r.max() == bd.shape[-1]  # values below and above every boundary: not vacuous
    perm = torch.stack([torch.randperm(9, generator=g) for _ in range(4)])
    shuffled = bd.gather(1, perm)
    _both(lambda b, x, s: torch.searchsorted(b, x, sorter=s), shuffled, v, perm.argsort(-1))


def test_searchsorted_nan_mixed_dtypes_scalars_and_out():
    bd = torch.tensor([-1.0, 0.5, 2.0, float("nan")])
    v = torch.tensor([[float("nan"), 0.5, -3.0], [2.0, 9.0, 0.0]])
    _both(lambda b, x: torch.searchsorted(b, x), bd, v)
    _both(lambda b, x: torch.searchsorted(b, x, right=True), bd, v)
    _both(lambda b, x: torch.searchsorted(b, x), torch.tensor([1, 3, 5]), torch.tensor([2.5, 5.0]))  # promoted
    _both(lambda b: torch.searchsorted(b, 0.7), bd)
    _both(lambda b: torch.bucketize(3, b, right=True), torch.tensor([1, 3, 5]))
    out = torch.zeros(3, 2, dtype=torch.long, device="mytorch").t()
    torch.searchsorted(bd.to("mytorch"), v.to("mytorch"), out=out)
    assert torch.equal(out.cpu(), torch.searchsorted(bd, v))


def test_searchsorted_refuses_as_the_cpu():
    bd, v = torch.arange(6.0).view(2, 3), torch.ones(3, 4)
    for fn in [
        lambda b, x: torch.searchsorted(b, x),  # leading dims differ
        lambda b, x: torch.searchsorted(b, x[:2], side="middle"),
        lambda b, x: torch.searchsorted(b, x[:2], side="left", right=True),
        lambda b, x: torch.searchsorted(b, x[:2], sorter=b),
        lambda b, x: torch.searchsorted(b, x[:2], sorter=torch.full((2, 3), 5, device=b.device)),
        lambda b, x: torch.bucketize(x, b),
        lambda b, x: torch.searchsorted(b, x[:2], out=torch.empty(0, device=b.device)),
    ]:
        with pytest.raises(RuntimeError) as ref:
            fn(bd, v)
        with pytest.raises(RuntimeError) as dev:
            fn(bd.to("mytorch"), v.to("mytorch"))
        assert str(dev.value).split("\n")[0] == str(ref.value).split("\n")[0]
