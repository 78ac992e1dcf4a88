"""Streams and events: torch.Stream / torch.Event specialised to the mytorch device."""

from __future__ import annotations

from typing import Any

import torch

from .. import _C
from ._device import _BACKEND, _checked_index, _lazy_init


class Stream(torch.Stream):
    """A mytorch stream (from the device's pool, as torch.cuda.Stream). priority < 0 asks for high priority."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        _lazy_init()
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        idx = _checked_index(device)
        return super().__new__(cls, device=torch.device(_BACKEND, idx), priority=priority)

    def __repr__(self) -> str:
        return f"<torch.mytorch.Stream device={self.device} stream_id={self.stream_id}>"

    @property
    def native_handle(self) -> int:
        """The runtime's handle of this stream as an integer (a cudaStream_t on the cuda runtime, as
        torch.cuda.Stream.cuda_stream; 0 for the default stream): what Triton kernels are launched on."""
        return _C._raw_stream(self.stream_id, self.device_index)


class _EventMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == _BACKEND


class Event(metaclass=_EventMeta):
    """A mytorch event; enable_timing=True lets elapsed_time() measure between two recorded events.

    Instances are plain torch.Event objects on the mytorch device (torch.Event.elapsed_time accepts only
    exact torch.Event arguments, so a subclass would not compose); isinstance(e, torch.mytorch.Event)
    holds for any torch.Event of this device.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        _lazy_init()
        return torch.Event(device=_BACKEND, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def _wrap(t: tuple[int, int, int]) -> Stream:
    sid, idx, dtype = t
    return Stream(stream_id=sid, device_index=idx, device_type=dtype)


def current_stream(device: Any = None) -> Stream:
    _lazy_init()
    return _wrap(_C._current_stream(_checked_index(device)))


def default_stream(device: Any = None) -> Stream:
    _lazy_init()
    return _wrap(_C._default_stream(_checked_index(device)))


def set_stream(s: torch.Stream) -> None:
    if s is None:
        return
    if s.device.type != _BACKEND:
        raise ValueError(f"expected a mytorch stream, but got a stream on {s.device}")
    _C._set_stream(s.stream_id, s.device_index)


class StreamContext:
    """Makes `stream` current on its device (and that device current) inside the block."""

    def __init__(self, s: torch.Stream | None):
        self.stream = s
        self.prev_stream = None
        self.prev_device = None

    def __enter__(self):
        if self.stream is None:
            return self
        from ._device import current_device, set_device

        self.prev_device = current_device()
        if self.stream.device_index != self.prev_device:
            set_device(self.stream.device_index)
        self.prev_stream = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        from ._device import set_device

        set_stream(self.prev_stream)
        set_device(self.prev_device)
        return False


def stream(s: torch.Stream | None) -> StreamContext:
    return StreamContext(s)
