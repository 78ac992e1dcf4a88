"""Errors kernels find in their data (Note [Device-side errors] in csrc/core/DeviceErrors.h): an index out of bounds
or a target out of range is recorded on the device; the op does not synchronise (cuda, emu) and the error is raised
at the next synchronisation point naming the op, or at the op with launch blocking on (and always on sim), with the
CPU's exception type and message."""

import pytest
import torch
import torch.nn.functional as F

DEV = "mytorch"
deferred_runtime = pytest.mark.skipif(torch.mytorch.runtime() == "sim", reason="the sim runtime raises at the op")


def _launch_blocking(on):
    prev = torch.mytorch.launch_blocking()
    torch.mytorch.set_launch_blocking(on)
    yield
    torch.mytorch.set_launch_blocking(prev)


@pytest.fixture
def blocking():
    yield from _launch_blocking(True)


@pytest.fixture
def deferred():
    yield from _launch_blocking(False)


CASES = {  # the op, the CPU's exception type, our message
    "gather": (lambda x, i: x.gather(0, i), RuntimeError, "index 9 is out of bounds for dimension 0 with size 4"),
    "index_select": (lambda x, i: x.index_select(0, i[1]), IndexError, "index 9 is out of bounds for dimension 0"),
    "scatter_add": (lambda x, i: x.scatter_add(0, i, torch.ones_like(x)), RuntimeError, "index 9 is out of bounds"),
    "nll_loss": (lambda x, i: F.nll_loss(x, i[1]), IndexError, "Target 9 is out of bounds."),
}


def _inputs():
    x = torch.randn(4, 4)
    i = torch.zeros(4, 4, dtype=torch.long)
    i[1, 2] = 9
    return x, i


@pytest.mark.every_runtime
@pytest.mark.parametrize("name", sorted(CASES))
def test_raised_at_the_op_when_blocking(name, blocking):
    fn, exc, msg = CASES[name]
    x, i = _inputs()
    with pytest.raises(exc):
        fn(x, i)
    with pytest.raises(exc, match=msg) as mine:
        fn(x.to(DEV), i.to(DEV))
    assert "recorded on the device" not in str(mine.value)
    torch.mytorch.synchronize()  # raised once: nothing left behind
    assert torch.equal(x.to(DEV).cpu(), x)


@deferred_runtime
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_raised_at_the_next_synchronisation_naming_the_op(name, deferred):
    fn, exc, msg = CASES[name]
    x, i = _inputs()
    xd, idx = x.to(DEV), i.to(DEV)
    fn(xd, idx)  # no synchronisation, no exception yet
    with pytest.raises(exc, match=msg) as e:
        torch.mytorch.synchronize()
    op = "scatter" if name == "scatter_add" else name
    assert f"recorded on the device by {op}" in str(e.value) and "MYTORCH_LAUNCH_BLOCKING" in str(e.value)
    torch.mytorch.synchronize()  # cleared: the device stays usable
    assert torch.equal((xd + 1).cpu(), x + 1)


@deferred_runtime
@pytest.mark.gpu
def test_a_copy_to_the_host_is_a_synchronisation_point(deferred):
    x, i = _inputs()
    y = x.to(DEV).gather(0, i.to(DEV))
    with pytest.raises(RuntimeError, match="recorded on the device by gather"):
        y.cpu()
    with pytest.raises(IndexError, match="recorded on the device by embedding_dense_backward"):
        w = torch.randn(5, 3, device=DEV, requires_grad=True)
        # the forward is a gather (its own error first); the backward alone sees 7 here
        g = torch.ops.aten.embedding_dense_backward(
            torch.ones(2, 3, device=DEV), torch.tensor([1, 7], device=DEV), 5, -1, False
        )
        g.sum().item()
    del w


@deferred_runtime
@pytest.mark.gpu
def test_the_op_does_not_wait_for_the_stream(deferred):
    """Before, every gather copied an error flag to the host: a synchronisation, so the stream was idle after it.
    Now it returns while earlier work is still queued. Negative control: with launch blocking the stream is idle
    after the op."""
    x = torch.randn(1 << 18, device=DEV)
    idx = torch.zeros(8, dtype=torch.long, device=DEV)
    src = torch.randn(16, device=DEV)
    torch.mytorch.synchronize()
    s = torch.sort(x)  # seconds of emulated work queued on the stream (results held: a free records an event)
    y = src.gather(0, idx)
    assert not torch.mytorch.current_stream().query()
    del s, y
    torch.mytorch.synchronize()
    torch.mytorch.set_launch_blocking(True)
    s = torch.sort(x)
    y = src.gather(0, idx)
    assert torch.mytorch.current_stream().query()
    del s, y
