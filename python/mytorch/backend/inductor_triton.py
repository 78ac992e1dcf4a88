"""torch.compile's Inductor on mytorch, the Triton path (Note [Triton on mytorch]).

Note [Triton on mytorch]
On the cuda runtime Inductor generates Triton kernels for mytorch graphs (TritonScheduling) and the Python
wrapper launches them on the current mytorch stream: Inductor's `get_raw_stream(index)` is
`mytorch._C._current_raw_stream`, the cudaStream_t of torch.mytorch.current_stream(). Extern kernels (GEMMs,
convolution, attention, mytorch.ops) are mytorch's, as on the C++ path.

Without a GPU the same generated kernels run in Triton's interpreter (TRITON_INTERPRET=1), which executes them
with numpy over host memory, and sim memory is host memory: `MYTORCH_INDUCTOR=triton` with TRITON_INTERPRET=1
selects this path on the sim runtime, so CI tests the Triton code generation, the wrapper and the stream binding
without hardware. Two spots of the interpreter need adapting, for the interpreter only (`interpreter()`):
- the GPU driver lookup: Triton finds no active driver without a GPU, and Inductor's kernels call
  `set_driver_to_gpu()` when loaded; an interpreter driver answers a CUDA target (sm_90) for code generation,
  and the lookup is skipped while it is active;
- libdevice math: Inductor calls `libdevice.<fn>` (extern calls into CUDA's libdevice), which the interpreter
  cannot run; a stand-in module answers tl.math's interpreted function where one exists, and numpy's otherwise.
On either runtime Inductor's autotuner (max-autotune, flex attention's template choices) benchmarks a choice on
the device its inputs are on only when `is_gpu` knows that device type, and otherwise on "cuda": torch.cuda,
absent from the CPU wheel mytorch builds against. `autotuner()` lets its benchmark see mytorch as a GPU (that one
module's lookup only; the rest of Inductor's device logic is unchanged), and registers mytorch's benchmark (the
device-generic GPU benchmark over torch.mytorch's events and synchronisation).
And one bug of the interpreter is worked around (`_bf16_dot`): Triton 3.9's interpreter keeps bfloat16 values as
their uint16 bit patterns and its tl.dot multiplies those integers (compiled flex attention in bfloat16 gave
outputs of 8e8; docs/torchtitan.md has the repro, on plain CPU tensors without mytorch).
"""

from __future__ import annotations

import math
import os

import torch

_BACKEND = "mytorch"


def requested() -> bool:
    """Whether this process asked for the Triton path (the cuda runtime always does)."""
    return os.environ.get("MYTORCH_INDUCTOR", "").lower() == "triton"


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def unavailable_reason(runtime: str) -> str | None:
    """Why the Triton path cannot run here, or None."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "the Triton path needs the triton package (pip install triton)"
    if runtime == "sim" and not interpreted():
        return (
            "on the sim runtime Triton kernels run only in Triton's interpreter: set TRITON_INTERPRET=1 "
            "(device memory is host memory; there is no GPU to launch them on)"
        )
    if runtime not in ("sim", "cuda"):
        return f"the Triton path runs on the cuda runtime (or interpreted on sim), not on {runtime}"
    return None


def _np_function(name: str):
    """numpy's version of a libdevice function, elementwise over the interpreter's tensors."""
    import numpy as np

    vectorised = lambda f: np.vectorize(f, otypes=[np.float64])  # noqa: E731
    table = {
        "tanh": np.tanh,
        "log1p": np.log1p,
        "expm1": np.expm1,
        "pow": np.power,
        "atan": np.arctan,
        "atan2": np.arctan2,
        "asin": np.arcsin,
        "acos": np.arccos,
        "sinh": np.sinh,
        "cosh": np.cosh,
        "asinh": np.arcsinh,
        "acosh": np.arccosh,
        "atanh": np.arctanh,
        "tan": np.tan,
        "log10": np.log10,
        "nearbyint": np.rint,
        "rint": np.rint,
        "trunc": np.trunc,
        "fmod": np.fmod,
        "copysign": np.copysign,
        "nextafter": np.nextafter,
        "hypot": np.hypot,
        "cbrt": np.cbrt,
        "exp10": lambda x: np.power(10.0, x),
        "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
        "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)),
        "erfc": vectorised(math.erfc),
        "lgamma": vectorised(math.lgamma),
        "tgamma": vectorised(math.gamma),
        "isinf": np.isinf,
        "isnan": np.isnan,
        "signbit": np.signbit,
        "isfinited": np.isfinite,
        "ilogb": lambda x: (np.frexp(x)[1] - 1).astype(np.int32),
    }
    return table.get(name)


class _InterpretedLibdevice:
    """Stands in for triton.language.extra.libdevice inside interpreted kernels (Note [Triton on mytorch])."""

    def __getattr__(self, name: str):
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        if hasattr(tl.math, name):  # patched by the interpreter while a kernel runs: looked up at call time
            return lambda *args, **kwargs: getattr(tl.math, name)(*args, **kwargs)
        fn = _np_function(name)
        if fn is None:
            raise NotImplementedError(
                f"libdevice.{name} has no interpreted version in mytorch's Triton interpreter "
                f"path (python/mytorch/backend/inductor_triton.py)"
            )

        def call(*args, **kwargs):
            tensors = [a for a in args if isinstance(a, tl.tensor)]
            first = tensors[0]
            data = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a) for a in args]
            out = np.asarray(fn(*data))
            if out.dtype == np.bool_:
                dtype = tl.int1
            elif np.issubdtype(out.dtype, np.integer):
                dtype = tl.int32
            else:
                dtype = first.dtype.scalar
                out = out.astype(first.handle.data.dtype)
            shape = list(out.shape)
            return tl.tensor(TensorHandle(out, dtype), tl.block_type(dtype, shape) if shape else dtype)

        return call


_interpreter_ready = False


def interpreter() -> None:
    """The interpreter-only adaptations (Note [Triton on mytorch]); once."""
    global _interpreter_ready
    if _interpreter_ready:
        return
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    from torch._inductor.runtime import triton_compat, triton_helpers

    class InterpreterDriver(DriverBase):
        @classmethod
        def is_active(cls):
            return False

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise NotImplementedError("the interpreter driver launches no compiled kernel")

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self):
            return torch.device(_BACKEND, torch.mytorch.current_device())

        def get_benchmarker(self):
            from triton.testing import do_bench

            return do_bench

        def get_current_device(self):
            return torch.mytorch.current_device()

        def get_current_stream(self, device=None):
            from mytorch import _C

            return _C._current_raw_stream(torch.mytorch.current_device() if device is None else device)

        def get_device_interface(self):
            return torch.mytorch

    driver = InterpreterDriver()
    triton.runtime.driver._default = driver
    triton.runtime.driver._active = driver
    original = triton_helpers.set_driver_to_gpu

    def set_driver_to_gpu():
        if not isinstance(triton.runtime.driver.active, InterpreterDriver):
            original()

    triton_helpers.set_driver_to_gpu = set_driver_to_gpu
    triton_helpers.libdevice = triton_compat.libdevice = _InterpretedLibdevice()
    _bf16_dot()
    _interpreter_ready = True


def autotuner() -> None:
    """Note [Triton on mytorch]: the autotuner benchmarks choices on mytorch, not on torch.cuda. Written against
    torch 2.13's autotune_process (its GPUDeviceBenchmarkMixin.do_bench reads the module's `is_gpu`)."""
    from torch._inductor import autotune_process

    original = autotune_process.is_gpu
    if getattr(original, "_mytorch", False):
        return

    def is_gpu(device) -> bool:
        return device == _BACKEND or original(device)

    is_gpu._mytorch = True
    autotune_process.is_gpu = is_gpu
    from torch._inductor.runtime import benchmarking

    def benchmark(benchmarker, fn, warmup=None, rep=None, **kwargs):
        return benchmarker.benchmark_gpu(fn, device_type=_BACKEND, **kwargs)

    benchmarking.register_benchmarker(_BACKEND, benchmark, override=True)


def _bf16_dot() -> None:
    """tl.dot of bfloat16 operands in the interpreter: the operands widened to float32 first (exact, as the
    tensor cores' products are), then the interpreter's own dot. Written against Triton 3.9's interpreter; another
    version is left alone with a warning, and test_compile_triton's bfloat16 flex check fails on it if the bug
    remains."""
    import numpy as np
    import triton
    import triton.language as tl
    from triton.runtime import interpreter as interp

    original = interp.InterpreterBuilder.create_dot
    if getattr(original, "_mytorch", False):
        return
    if not triton.__version__.startswith("3.9."):
        import warnings

        warnings.warn(
            f"mytorch: the interpreter's bfloat16 tl.dot workaround is written for Triton 3.9, not "
            f"{triton.__version__}; not applied",
            stacklevel=2,
        )
        return

    def widen(h):
        if h.dtype.scalar != tl.bfloat16:
            return h
        data = interp._convert_float(h.data, tl.bfloat16, tl.float32, None).view(np.float32)
        return interp.TensorHandle(data, tl.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._mytorch = True
    interp.InterpreterBuilder.create_dot = create_dot
