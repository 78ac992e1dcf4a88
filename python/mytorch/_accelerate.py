"""Hugging Face accelerate (and so transformers' Trainer) picks mytorch by itself (issue 30; docs/ecosystem.md).

accelerate 1.15 chooses a single process's device in `PartialState.set_device`: the CPU when `cpu=True`
(`TrainingArguments(use_cpu=True)`), else `PartialState.default_device`, which knows a fixed list of device types
and answers "cpu" for a PrivateUse1 device. The adaptation wraps that one property: where the original finds no
accelerator it knows, mytorch answers when it is available. So `Trainer(model.to("mytorch"), args)` trains on
mytorch with default arguments, `use_cpu=True` still gets the CPU (default_device is not consulted then), and
another accelerator accelerate knows (CUDA, XPU, ...) keeps precedence. `ACCELERATE_TORCH_DEVICE` still
overrides everything, as accelerate documents.

transformers' TrainingArguments makes the same choice again for the device it moves batches to
(`_setup_devices`: "cuda:0" if available, else ACCELERATE_TORCH_DEVICE or "cpu", without asking accelerate), so
the model would train on mytorch and the batches stay on the CPU: its single-process answer is wrapped the same
way (where it answers "cpu" while accelerate's state, which did honour use_cpu, chose mytorch).

Multi-process launches (`accelerate launch`, torchrun) take the other branch of set_device (a distributed type
from a fixed list: MULTI_CPU for mytorch), which this does not change: they keep `ACCELERATE_TORCH_DEVICE`.

Applied when accelerate.state and transformers.training_args are imported (mytorch/_after_import.py), never by
importing mytorch. Written against accelerate 1.15 and transformers 5.23: another version, or a class without
the member read here, is left alone with a warning saying how to name the device instead, and
test_trainer_picks_mytorch fails on it (the loud failure a version bump needs, as the Inductor adaptations'
checks are).
"""

from __future__ import annotations

import importlib.metadata
import warnings

import torch

import functools

# the versions read for these adaptations: accelerate's state.py (PartialState.set_device, default_device) and
# transformers' training_args.py (TrainingArguments._setup_devices)
TESTED = {"accelerate": "1.15.", "transformers": "5.23."}


def _refuse(why: str) -> None:
    warnings.warn(
        f"mytorch: {why}; Trainer and accelerate will not pick mytorch by themselves. "
        f"Set ACCELERATE_TORCH_DEVICE=mytorch to name the device (docs/ecosystem.md)",
        stacklevel=3,
    )


def _tested(package: str) -> bool:
    version = importlib.metadata.version(package)
    if version.startswith(TESTED[package]):
        return True
    _refuse(f"the {package} adaptation is written for {package} {TESTED[package]}x, not {version}")
    return False


def adapt(state) -> bool:
    """Wraps accelerate.state.PartialState.default_device; True when applied (idempotent)."""
    if not _tested("accelerate"):
        return False
    cls = getattr(state, "PartialState", None)
    original = None if cls is None else cls.__dict__.get("default_device")
    if not isinstance(original, property):
        _refuse("accelerate's PartialState has no default_device property any more")
        return False
    if getattr(original.fget, "_mytorch", False):
        return True

    def default_device(self) -> torch.device:
        device = original.fget(self)
        if device.type == "cpu" and torch.mytorch.is_available():
            return torch.device("mytorch")
        return device

    default_device._mytorch = True
    default_device.__doc__ = (
        original.__doc__ or ""
    ) + "\n        - mytorch if it is available (mytorch/_accelerate.py)"
    cls.default_device = property(default_device)
    return True


def adapt_training_args(training_args) -> bool:
    """Wraps transformers' TrainingArguments._setup_devices (a cached property); True when applied (idempotent)."""
    if not _tested("transformers"):
        return False
    cls = getattr(training_args, "TrainingArguments", None)
    original = None if cls is None else cls.__dict__.get("_setup_devices")
    if not isinstance(original, functools.cached_property):
        _refuse("transformers' TrainingArguments has no _setup_devices cached property any more")
        return False
    if getattr(original.func, "_mytorch", False):
        return True

    def _setup_devices(self) -> torch.device:
        device = original.func(self)
        state = getattr(self, "distributed_state", None)
        chosen = getattr(state, "device", None)
        if device.type == "cpu" and not self.use_cpu and chosen is not None and chosen.type == "mytorch":
            return chosen
        return device

    _setup_devices._mytorch = True
    _setup_devices.__doc__ = original.__doc__
    wrapped = functools.cached_property(_setup_devices)
    wrapped.__set_name__(cls, "_setup_devices")
    cls._setup_devices = wrapped
    return True
