"""torch.mytorch.set_sync_debug_mode: torch.cuda's API and semantics (what flags, what does not)."""

import warnings

import pytest
import torch

import mytorch  # noqa: F401

SYNCING = {
    "item": lambda x: x.sum().item(),
    "cpu": lambda x: x.cpu(),
    "tolist": lambda x: x.tolist(),
    "nonzero": lambda x: x.nonzero(),
    "boolean mask": lambda x: x[x > 3],
    "host to device (pageable)": lambda x: torch.ones(4).to("mytorch"),
    "stream synchronize": lambda x: torch.mytorch.current_stream().synchronize(),
}
FREE = {
    "add": lambda x: x + 1,
    "sort": lambda x: x.sort(),
    "index_select": lambda x: x.index_select(0, torch.arange(2, device="mytorch")),
    "device synchronize": lambda x: torch.mytorch.synchronize(),
}


@pytest.fixture
def mode():
    yield torch.mytorch.set_sync_debug_mode
    torch.mytorch.set_sync_debug_mode("default")


@pytest.mark.parametrize("name", sorted(SYNCING))
def test_error_and_warn_on_sync(mode, name):
    x = torch.arange(10.0, device="mytorch")
    mode("error")
    assert torch.mytorch.get_sync_debug_mode() == 2
    with pytest.raises(RuntimeError, match="synchronizing mytorch operation"):
        SYNCING[name](x)
    mode(1)
    with pytest.warns(UserWarning, match="synchronizing mytorch operation"):
        SYNCING[name](x)
    mode(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SYNCING[name](x)


@pytest.mark.parametrize("name", sorted(FREE))
def test_no_flag_without_sync(mode, name):
    x = torch.arange(10.0, device="mytorch")
    mode("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FREE[name](x)
    assert not [w for w in caught if "synchronizing" in str(w.message)], [str(w.message) for w in caught]
    mode("error")
    FREE[name](x)  # (raises if the op synchronises)
    assert torch.mytorch.get_sync_debug_mode() == 2


def test_bad_mode(mode):
    with pytest.raises(ValueError, match="expected one of"):
        mode("loud")
    with pytest.raises(ValueError, match="expected 0"):
        mode(3)
    assert torch.mytorch.get_sync_debug_mode() == 0
