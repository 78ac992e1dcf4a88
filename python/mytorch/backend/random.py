"""The per-device Philox generators (torch.cuda's random API)."""

from __future__ import annotations

from typing import Any

import torch

from .. import _C
from ._device import _checked_index, _lazy_init, device_count


class _Generators(tuple):
    pass


def _gens() -> tuple[torch.Generator, ...]:
    global _default
    if _default is None:
        _lazy_init()
        _default = tuple(_C._default_generator(i) for i in range(device_count()))
    return _default


_default = None


def __getattr__(name: str):  # default_generators is built on first use (lazy init)
    if name == "default_generators":
        return _gens()
    raise AttributeError(name)


class _DefaultGenerators:
    def __getitem__(self, i):
        return _gens()[i]

    def __len__(self):
        return len(_gens())

    def __iter__(self):
        return iter(_gens())


default_generators = _DefaultGenerators()


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    seed = int(seed)
    _gens()[_checked_index(None)].manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    seed = int(seed)
    for g in _gens():
        g.manual_seed(seed)


def seed() -> None:
    _gens()[_checked_index(None)].seed()


def seed_all() -> None:
    s = _gens()[0].seed() if _gens() else None
    for g in _gens()[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    return _gens()[_checked_index(None)].initial_seed()


def get_rng_state(device: Any = "mytorch") -> torch.Tensor:
    return _gens()[_checked_index(device)].get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "mytorch") -> None:
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(f"new_state must be a torch.ByteTensor, but got {type(new_state).__name__}")
    _gens()[_checked_index(device)].set_state(new_state.cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    return [g.get_state() for g in _gens()]


def set_rng_state_all(states) -> None:
    for i, s in enumerate(states):
        set_rng_state(s, i)
