"""Sparse COO tensors on mytorch (csrc/aten/tensor/Sparse.cpp): ATen's device-generic sparse functions registered for the
device, and coalesce composed from native ops, with the fallback forbidden, against the CPU."""

import pytest
import torch

from mytorch.testing._compare import compare_tensor

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(7)


def _problems(dev, ref, what):
    if dev.device.type != "mytorch" or dev.layout != ref.layout:
        return [f"{what}: {dev.device} {dev.layout}, the CPU gives {ref.layout}"]
    e = compare_tensor(dev, ref, None)
    return [f"{what}: {e.bad} of {e.total} differ {e.problems}"] if (e.bad or e.problems) else []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool])
def test_to_sparse_and_back_match_the_cpu(dtype):
    x = (torch.randn(4, 5, 3, generator=g) * 3).to(dtype)
    x[1] = 0
    x[:, 2] = 0
    problems = []
    for sparse_dim in (None, 1, 2, 3):
        ref = x.to_sparse() if sparse_dim is None else x.to_sparse(sparse_dim)
        dev = x.to("mytorch").to_sparse() if sparse_dim is None else x.to("mytorch").to_sparse(sparse_dim)
        problems += _problems(dev, ref, f"to_sparse({sparse_dim})")
        assert dev.is_coalesced() and dev._nnz() == ref._nnz()
        assert torch.equal(dev.to_dense().cpu(), x)
        assert dev.indices().device.type == "mytorch" and dev.values().device.type == "mytorch"
    assert not problems, problems


def test_coalesce_sums_duplicates_as_the_cpu():
    indices = torch.tensor([[0, 2, 0, 1, 2, 0], [1, 0, 1, 3, 0, 2]])
    values = torch.randn(6, 2, generator=g)
    ref = torch.sparse_coo_tensor(indices, values, (3, 4, 2))
    dev = torch.sparse_coo_tensor(indices.to("mytorch"), values.to("mytorch"), (3, 4, 2))
    assert not dev.is_coalesced()
    problems = _problems(dev.coalesce(), ref.coalesce(), "coalesce")
    assert dev.coalesce().is_coalesced()
    assert torch.allclose(dev.to_dense().cpu(), ref.to_dense())
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (3, 4))
    problems += _problems(empty.to("mytorch").coalesce(), empty.coalesce(), "coalesce of nothing")
    assert not problems, problems


def test_clone_zero_copy_and_device_moves():
    x = torch.randn(3, 4, generator=g)
    x[0] = 0
    dev = x.to("mytorch").to_sparse()
    c = dev.clone()
    dev.zero_()
    assert dev._nnz() == 0 and torch.equal(c.to_dense().cpu(), x)
    back = c.to("cpu")
    assert back.layout == torch.sparse_coo and torch.equal(back.to_dense(), x)
    assert torch.equal(back.to("mytorch").to_dense().cpu(), x)
