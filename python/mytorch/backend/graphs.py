"""Graph capture and replay on the mytorch device, spelled as torch.cuda spells it: ``torch.mytorch.MytorchGraph``
(also ``torch.mytorch.CUDAGraph``), ``torch.mytorch.graph``, ``torch.mytorch.graph_pool_handle``,
``torch.mytorch.make_graphed_callables``, ``torch.mytorch.is_current_stream_capturing``.

The graph is torch.accelerator.Graph's implementation for the device (csrc/core/Graph.cpp, Note [Graph capture]
in kernels/runtime/graph.cpp): on sim a recording of the launches, on cuda a CUDA graph. docs/graphs.md."""

from __future__ import annotations

import gc
from typing import Any, Callable

import torch

from .._C import _graph_pool_handle, _is_current_stream_capturing

__all__ = [
    "MytorchGraph",
    "CUDAGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]


def graph_pool_handle() -> tuple[int, int]:
    """A memory pool id graphs can share (``pool=`` of ``capture_begin`` / ``graph``), as torch.cuda's."""
    return _graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """Whether this thread is capturing a graph on the mytorch device."""
    return _is_current_stream_capturing()


_AcceleratorGraph: Any = getattr(torch.accelerator, "Graph", None)
if _AcceleratorGraph is None:  # torch < 2.12 (the lent GPU machines' 2.11): nothing to implement

    class _AcceleratorGraph:  # type: ignore[no-redef]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError(
                "graph capture on mytorch needs torch.accelerator.Graph (torch >= 2.12); this torch is "
                f"{torch.__version__}"
            )


class MytorchGraph(_AcceleratorGraph):
    """torch.cuda.CUDAGraph's interface over torch.accelerator.Graph on the mytorch device: ``capture_begin(pool=None,
    capture_error_mode="global")``, ``capture_end``, ``replay``, ``reset``, ``pool``, ``instantiate``,
    ``enable_debug_mode``, ``debug_dump``."""

    def capture_begin(self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global") -> None:  # type: ignore[override]
        if capture_error_mode not in ("global", "thread_local", "relaxed", "default"):
            raise ValueError(
                f"capture_error_mode: expected 'global', 'thread_local' or 'relaxed', but got {capture_error_mode!r}"
            )
        self.graph_pool = pool if pool is not None else self.graph_pool
        self.capture_error_mode = capture_error_mode
        super().capture_begin()


CUDAGraph = MytorchGraph

_capture_streams: dict[int, torch.Stream] = {}


def _side_stream() -> torch.Stream:
    dev = torch.mytorch.current_device()
    if dev not in _capture_streams:
        _capture_streams[dev] = torch.mytorch.Stream()
    return _capture_streams[dev]


class graph:
    """Context manager that captures the work of its block into ``mytorch_graph`` on a side stream, as
    torch.cuda.graph does: ``with torch.mytorch.graph(g): y = model(x)``, then ``g.replay()``."""

    def __init__(
        self,
        mytorch_graph: MytorchGraph,
        pool: tuple[int, int] | None = None,
        stream: torch.Stream | None = None,
        capture_error_mode: str = "global",
    ):
        self.graph = mytorch_graph
        self.pool = pool
        self.stream = stream if stream is not None else _side_stream()
        self.capture_error_mode = capture_error_mode
        self._ctx = None

    def __enter__(self) -> None:
        torch.mytorch.synchronize()
        gc.collect()
        torch.mytorch.empty_cache()
        self._ctx = torch.mytorch.stream(self.stream)
        self._ctx.__enter__()
        self.graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc: object) -> None:
        try:
            self.graph.capture_end()
        except RuntimeError:
            if exc[0] is None:
                raise  # else the error raised inside the block is the one to see (it invalidated the capture)
        finally:
            self._ctx.__exit__(*exc)


def _flat(xs: Any) -> list:
    return list(xs) if isinstance(xs, (tuple, list)) else [xs]


def make_graphed_callables(
    callables: Any,
    sample_args: Any,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: tuple[int, int] | None = None,
) -> Any:
    """Graphed versions of callables (modules or functions), as torch.cuda.make_graphed_callables: each callable's
    forward and backward are captured into two graphs (after ``num_warmup_iters`` eager warm-up iterations on a side
    stream) and replayed on later calls; inputs are copied into the graphs' static inputs. ``sample_args`` is a tuple
    of tensors per callable (a tuple of such tuples when ``callables`` is a tuple). The callables' parameters and
    sample arguments must be on the mytorch device; the graphs share one memory pool."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"expected one sample_args tuple per callable ({len(callables)}), but got {len(sample_args)}")
    pool = pool if pool is not None else graph_pool_handle()
    out = []
    for fn, args in zip(callables, sample_args):
        args = tuple(_flat(args))
        for a in args:
            if not isinstance(a, torch.Tensor) or a.device.type != "mytorch":
                raise TypeError(f"make_graphed_callables: sample arguments must be mytorch tensors, but got {type(a)}")
        if isinstance(fn, torch.nn.Module) and any(h for h in (fn._forward_hooks, fn._forward_pre_hooks)):
            raise RuntimeError("make_graphed_callables: modules with forward hooks cannot be graphed")
        out.append(_graph_one(fn, args, num_warmup_iters, allow_unused_input, pool))
    return out[0] if just_one else tuple(out)


def _graph_one(fn: Callable, sample: tuple, warmup: int, allow_unused: bool, pool: tuple[int, int]) -> Callable:
    params = tuple(p for p in fn.parameters() if p.requires_grad) if isinstance(fn, torch.nn.Module) else ()
    static_in = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in sample)
    needs_grad = tuple(t for t in static_in + params if t.requires_grad)

    def run_backward(outputs: tuple, grads: tuple) -> tuple:
        pairs = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
        if not pairs or not needs_grad:
            return tuple(None for _ in needs_grad)
        return torch.autograd.grad([o for o, _ in pairs], needs_grad, [g for _, g in pairs], allow_unused=allow_unused)

    side = _side_stream()
    side.wait_stream(torch.mytorch.current_stream())
    with torch.mytorch.stream(side):
        for _ in range(warmup):
            outs = tuple(_flat(fn(*static_in)))
            run_backward(outs, tuple(torch.empty_like(o) for o in outs))
        del outs
    torch.mytorch.current_stream().wait_stream(side)

    fwd, bwd = MytorchGraph(), MytorchGraph()
    with graph(fwd, pool=pool, stream=side):
        raw = fn(*static_in)
    single = isinstance(raw, torch.Tensor)
    static_out = tuple(_flat(raw))
    static_grad_out = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_out)
    with graph(bwd, pool=pool, stream=side):
        grads = run_backward(static_out, static_grad_out)
    static_grad_in = tuple(g.detach() if g is not None else None for g in grads)
    n_in = len(static_in)

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):  # inputs: the call's tensors, then the parameters
            for dst, src in zip(static_in, inputs[:n_in]):
                if dst.data_ptr() != src.data_ptr():
                    dst.copy_(src)
            fwd.replay()
            return tuple(o.detach() for o in static_out)

        @staticmethod
        def backward(ctx, *grad_out):
            for dst, src in zip(static_grad_out, grad_out):
                if dst is not None and src is not None:
                    dst.copy_(src)
                elif dst is not None:
                    dst.zero_()
            bwd.replay()
            it = iter(static_grad_in)
            result = []
            for t in static_in + params:
                g = next(it) if t.requires_grad else None
                result.append(g.clone() if g is not None else None)
            return tuple(result)

    def graphed(*args):
        if len(args) != n_in:
            raise TypeError(f"the graphed callable takes {n_in} tensor arguments, but got {len(args)}")
        outs = Graphed.apply(*args, *params)
        return outs[0] if single else outs

    graphed._mytorch_graphs = (fwd, bwd)  # keeps the graphs (and their pool's memory) alive
    if isinstance(fn, torch.nn.Module):
        eager = fn.forward

        def forward(*args):
            return graphed(*args) if fn.training == training_at_capture else eager(*args)

        training_at_capture = fn.training
        fn.forward = forward
        return fn
    return graphed
