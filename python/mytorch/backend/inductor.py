"""torch.compile's default backend (Inductor) on the mytorch device (docs/compile.md).

Note [Inductor on mytorch]
Inductor finds an out-of-tree device's code generators through the device module's attributes `Scheduling`,
`PythonWrapperCodegen`, `CppWrapperCodegen` and `WrapperFxCodegen` (torch._inductor.codegen.common.
init_backend_registration reads all four when it first compiles, and registers none if one is missing).
torch.mytorch resolves them lazily (backend/__init__.py, module __getattr__), so `import mytorch` never imports
Inductor or Dynamo; the first compile calls `register()`, which picks the path (`path()`): C++ on the sim
runtime, Triton on the cuda runtime or when asked on sim (Note [Triton on mytorch], inductor_triton.py).

On the sim runtime device memory is host memory, so Inductor's C++ backend (CppScheduling: vectorised loops
over raw pointers) generates the kernels and they read and write mytorch buffers directly; sim streams run
work at submission, so everything queued before a compiled call has happened when its kernels run. The C++
path is never selected on the cuda runtime, where device pointers are not host memory. Buffers come from the
caching allocator through `_empty_strided_mytorch` (csrc/python/Inductor.cpp) with the graph's device index.

Two places in torch 2.13 assume a C++-scheduled device is the CPU and offer no hook (the upstream discussion
is open: pytorch/pytorch#189138 and #189137; torch_openreg, upstream's reference PrivateUse1 backend,
compiles pointwise graphs only and never meets them):
- `BaseSchedulerNode.is_cpu()` is `device.type == "cpu"`, so GPU-only fusion code runs on C++ nodes and fails
  on the first reduction fused with a pointwise node (softmax);
- `get_current_backend()` answers `config.cuda_backend` ("triton") for unknown devices, so the C++ code
  generator believes Triton handles dtypes it must handle itself (cross-entropy's backward fails on iota).
`_adapt()` replaces both, for "mytorch" only, in the modules that hold them, together with the two the C++
wrapper needs (below); it is guarded by the torch version, and test/test_compile.py fails loudly if torch
changes them.

Note [Inductor's C++ wrapper on mytorch]
In cpp_wrapper mode and in AOTInductor the wrapper is C++. It includes torch/csrc/inductor/cpp_wrapper/
mytorch.h (aoti_include/mytorch.h for AOTInductor), which this package ships in backend/include/ and puts on
the compiler's include path (CPLUS_INCLUDE_PATH: Inductor has no hook for include directories; searched after
torch's own -I directories, so it shadows nothing), and Inductor's device-to-ATen table gets the entry
"mytorch" -> at::kPrivateUse1. Torch generates C shims (aoti_torch_<device>_<op>) for its own devices only: the
header defines mytorch's for the ops Inductor calls by shim name (GEMMs, convolution) and for the fused
attention (whose integer outputs the run-time lookup cannot return), through the dispatcher; every other ATen
op on the device is looked up at run time, as Inductor does for ops without a shim.
"""

from __future__ import annotations

import importlib
import os
import re
import threading

import torch

_BACKEND = "mytorch"
_SUPPORTED_TORCH = ((2, 11), (2, 13))
_lock = threading.Lock()
_ORIGINALS: dict = {}  # torch's own functions that _adapt() replaced (test_compile checks they still need it)


def _torch_minor() -> tuple[int, int]:
    major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    return major, minor


def _check_torch() -> None:
    if not (_SUPPORTED_TORCH[0] <= _torch_minor() <= _SUPPORTED_TORCH[1]):
        raise RuntimeError(f"mytorch's Inductor backend is written for torch 2.11-2.13, not {torch.__version__}")


def _adapt() -> None:
    """Note [Inductor on mytorch]: the C++ path's adaptations (the two CPU assumptions, the C++ wrapper's table
    entry and include path)."""
    from torch._inductor import scheduler, utils

    original_is_cpu = scheduler.BaseSchedulerNode.is_cpu
    if not getattr(original_is_cpu, "_mytorch", False):
        _ORIGINALS["is_cpu"] = original_is_cpu

        def is_cpu(self) -> bool:
            device = self.get_device()
            return device is not None and device.type in ("cpu", _BACKEND)

        is_cpu._mytorch = True
        scheduler.BaseSchedulerNode.is_cpu = is_cpu

    from torch._inductor.codegen import cpp_utils

    cpp_utils.DEVICE_TO_ATEN.setdefault(_BACKEND, "at::kPrivateUse1")
    include_path = os.environ.get("CPLUS_INCLUDE_PATH", "")
    if _INCLUDE not in include_path.split(os.pathsep):
        os.environ["CPLUS_INCLUDE_PATH"] = os.pathsep.join(p for p in (include_path, _INCLUDE) if p)

    original_backend = utils.get_current_backend
    if not getattr(original_backend, "_mytorch", False):
        _ORIGINALS["get_current_backend"] = original_backend

        def get_current_backend(device_type: str | None = None) -> str:
            if device_type is None:
                from torch._inductor.virtualized import V

                device_type = V.graph.get_current_device_or_throw().type
            return original_backend("cpu" if device_type == _BACKEND else device_type)

        get_current_backend._mytorch = True
        for name in (
            "torch._inductor.utils",
            "torch._inductor.codegen.common",
            "torch._inductor.scheduler",
            "torch._inductor.kernel.mm_common",
        ):
            module = importlib.import_module(name)
            if getattr(module, "get_current_backend", None) is original_backend:
                module.get_current_backend = get_current_backend


def _interface(triton: bool):
    from torch._dynamo.device_interface import DeviceInterface
    from mytorch import _C

    mt = torch.mytorch

    class MytorchInterface(DeviceInterface):
        """Dynamo's view of torch.mytorch (current device and stream, synchronize, events, properties)."""

        device = mt.device
        Event = mt.Event
        Stream = mt.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                mt.set_device(device)

            @staticmethod
            def current_device() -> int:
                return mt.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return mt.get_device_properties(device)

        current_device = staticmethod(mt.current_device)
        set_device = staticmethod(mt.set_device)
        device_count = staticmethod(mt.device_count)
        is_available = staticmethod(mt.is_available)
        current_stream = staticmethod(mt.current_stream)
        set_stream = staticmethod(mt.set_stream)
        stream = staticmethod(mt.stream)
        synchronize = staticmethod(mt.synchronize)

        @staticmethod
        def get_device_properties(device=None):
            return mt.get_device_properties(device)

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            previous = mt.current_device()
            if device != previous:
                mt.set_device(device)
            return previous

        exchange_device = maybe_exchange_device

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:  # the runtime's handle (a cudaStream_t on the cuda runtime)
            return _C._current_raw_stream(device_idx)

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def get_compute_capability(device=None):
            return mt.runtime()

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return triton

    return MytorchInterface


def _wrapper_codegen():
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
    from torch._inductor.virtualized import V

    class MytorchWrapperCodegen(PythonWrapperCodegen):
        """Python wrapper that calls the C++ kernels of a mytorch graph directly (sim: host memory, streams
        already ordered), as it does for the CPU."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            _refuse_graphs()
            if is_subgraph:
                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return MytorchWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            self.header.writeline("from mytorch._C import _empty_strided_mytorch as empty_strided_mytorch")
            self.header.writeline("from mytorch._C import _refuse_during_capture")

        def codegen_inputs(self) -> None:
            # The compiled C++ kernels run at the call, outside the launchers a capture records: a compiled graph
            # called while a stream captures raises instead of running (Note [Graph capture]).
            self.prefix.writeline("_refuse_during_capture('a torch.compile-d graph (its sim C++ kernels)')")
            super().codegen_inputs()

        def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
            """Buffers through mytorch's C++ helper (csrc/python/Inductor.cpp), as cpu/cuda buffers go through
            theirs, instead of the generic torch.empty_strided(..., device=...) call."""
            if device.type != _BACKEND or torch._inductor.config.test_configs.track_memory_lifecycle:
                return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
            allocation = shape if allocation_shape is None else allocation_shape
            line = (
                f"{name} = empty_strided_mytorch({self.codegen_python_shape_tuple(allocation)}, "
                f"{self.codegen_python_shape_tuple(stride)}, {dtype}, "
                f"{-1 if device.index is None else device.index})"
            )
            if self.codegen_python_shape_tuple(shape) != self.codegen_python_shape_tuple(allocation):
                line += (
                    f".as_strided({self.codegen_python_shape_tuple(shape)}, {self.codegen_python_shape_tuple(stride)})"
                )
            return line

        def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
            device = device or V.graph.get_current_device_or_throw()
            if not triton and device.type == _BACKEND:
                self.writeline(self.wrap_kernel_call(kernel_name, call_args))
                return None
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)

    return MytorchWrapperCodegen


def _refuse_graphs() -> None:
    """mode="reduce-overhead" asks Inductor for CUDA graphs; Inductor's graph trees (torch 2.13) take only "cuda"
    devices and call torch.cuda's graph and allocator-pool APIs, with no hook for another device, so the compiled
    code runs without graphs (Inductor alone would skip them silently, in a debug log): said once, as a warning.
    torch.mytorch.graph / make_graphed_callables capture eager code (docs/graphs.md)."""
    if torch._inductor.config.triton.cudagraphs and not _warned_graphs:
        _warned_graphs.append(True)
        import warnings

        warnings.warn(
            "torch.compile(mode='reduce-overhead'): Inductor's CUDA graph trees take only cuda devices in this "
            "torch, so the compiled code runs without graphs (as with mode='max-autotune-no-cudagraphs'); "
            "torch.mytorch.graph and make_graphed_callables capture eager code",
            UserWarning,
            stacklevel=2,
        )


_warned_graphs: list = []


_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def _shims() -> set[str]:
    """The C shims mytorch defines (one source: the header that defines them)."""
    with open(os.path.join(_INCLUDE, "torch/csrc/inductor/cpp_wrapper/device_internal/mytorch.h")) as f:
        return set(re.findall(r"\bAOTITorchError (aoti_torch_mytorch_\w+)\(", f.read()))


def _cpp_wrapper_codegen():
    from torch._inductor import ir
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    shims = _shims()

    class MytorchCppWrapper(CppWrapperCpu):
        """C++ wrapper (cpp_wrapper mode, AOTInductor) of a mytorch graph (Note [Inductor's C++ wrapper on
        mytorch]): the generated kernels are called as the CPU's are; an ATen op with a mytorch shim calls it, every
        other ATen op is looked up at run time (the dispatcher; AOTInductor's proxy executor), as Inductor does
        for ops that have no C shim."""

        def __init__(self):
            self.device = _BACKEND  # the model's device in AOTInductor; CppWrapperCpu keeps one it finds set
            super().__init__()

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            return MytorchCppWrapper()

        def _generate_extern_kernel_alloc_helper(self, node, args):
            device = node.get_device()
            if (
                isinstance(node, ir.FallbackKernel)
                and isinstance(node.op_overload, torch._ops.OpOverload)
                and device is not None
                and device.type == _BACKEND
                and self.get_c_shim_func_name(node.cpp_kernel_name, _BACKEND) not in shims
            ):
                self.generate_fallback_kernel_with_runtime_lookup(
                    node.get_name(),
                    node.python_kernel_name,
                    lambda: [*node.codegen_args(), *node.codegen_kwargs()],
                    node.op_overload,
                    node.export_extern_kernel_node(),
                    node.outputs if node.outputs else node.mutation_outputs,
                )
                return
            super()._generate_extern_kernel_alloc_helper(node, args)

    return MytorchCppWrapper


def _op_overrides(triton: bool):
    from torch._inductor.codegen.common import DeviceOpOverrides

    class MytorchOpOverrides(DeviceOpOverrides):
        def cpp_kernel_type(self) -> str:  # the generated kernels are C++ functions, as the CPU's
            return "void*"

        def import_get_raw_stream_as(self, name: str) -> str:
            if triton:  # Triton kernels launch on the current mytorch stream (Note [Triton on mytorch])
                return f"from mytorch._C import _current_raw_stream as {name}"
            return f"def {name}(index): return 0"

        def set_device(self, device_idx: int) -> str:
            return f"torch.mytorch.set_device({device_idx})"

        def synchronize(self) -> str:
            return "torch.mytorch.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.mytorch.device({device_idx})"

    return MytorchOpOverrides()


_generators: dict | None = None


def _refusing(what: str, reason: str):
    class Refusing:
        def __init__(self, *args, **kwargs):
            raise RuntimeError(
                f"torch.compile's Inductor backend on mytorch: {what} is not available here: {reason}. "
                f"torch.compile(..., backend='aot_eager') runs without Inductor"
            )

    return Refusing


def path() -> tuple[str, str | None]:
    """Which code generation Inductor uses for mytorch in this process ("cpp" or "triton") and, when it cannot
    run here, why. sim runtime: C++ unless MYTORCH_INDUCTOR=triton (interpreted); cuda runtime: Triton."""
    from mytorch.backend import inductor_triton

    runtime = torch.mytorch.runtime()
    if runtime == "cuda" or (runtime == "sim" and inductor_triton.requested()):
        return "triton", inductor_triton.unavailable_reason(runtime)
    if runtime == "sim":
        return "cpp", None
    return "cpp", (
        f"the {runtime} runtime runs neither the C++ path (device memory is not host memory) nor "
        f"Triton (no GPU to launch on)"
    )


def dynamo_backend(gm, example_inputs, **kwargs):
    """torch.compile(backend="mytorch") (an entry point of torch_dynamo_backends): Inductor, as backend="inductor",
    which generates mytorch's code for the graph's device tensors."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, **kwargs)


def register_interface(device_interface=None) -> None:
    """Dynamo's device interface for mytorch (get_interface_for_device("mytorch")), registered once
    torch._dynamo.device_interface is imported (mytorch/__init__.py, through _after_import) so that it answers
    before the first compile, without importing Inductor."""
    if device_interface is None:
        from torch._dynamo import device_interface
    kind, reason = path()
    device_interface.register_interface_for_device(_BACKEND, _interface(kind == "triton" and reason is None))


def register() -> dict:
    """The code generators Inductor asks torch.mytorch for (Note [Inductor on mytorch], Note [Triton on mytorch]),
    and once, the Dynamo interface, the op overrides and, for the C++ path, the adaptation. Where the path cannot
    run, its scheduling refuses with the reason when Inductor first generates code for the device."""
    global _generators
    with _lock:
        if _generators is not None:
            return _generators
        from torch._inductor.codegen.common import register_device_op_overrides
        from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

        kind, reason = path()
        triton = kind == "triton"
        _check_torch()
        register_interface()
        register_device_op_overrides(_BACKEND, _op_overrides(triton))
        if triton:
            from mytorch.backend import inductor_triton
            from torch._inductor.codegen.triton import TritonScheduling

            if reason is None and inductor_triton.interpreted():
                inductor_triton.interpreter()
            if reason is None:
                inductor_triton.autotuner()
            scheduling = TritonScheduling if reason is None else _refusing("the Triton path", reason)
            cpp_wrapper = _refusing(
                "the C++ wrapper (cpp_wrapper, AOTInductor)", "mytorch builds it for the C++ path (sim) only"
            )
        else:
            from torch._inductor.codegen.cpp import CppScheduling

            if reason is None:
                _adapt()
            scheduling = CppScheduling if reason is None else _refusing("code generation", reason)
            cpp_wrapper = _cpp_wrapper_codegen()
        _generators = {
            "Scheduling": scheduling,
            "PythonWrapperCodegen": _wrapper_codegen(),
            "CppWrapperCodegen": cpp_wrapper,
            "WrapperFxCodegen": WrapperFxCodegen,
            "path": kind,
        }
        return _generators


def kernel_counts(codes: list[str]) -> dict:
    """What the compiled graphs' code runs (the code strings of torch._inductor.utils.run_and_get_code, Python or
    C++ wrapper): `generated`, the number of kernels Inductor generated, and `extern`, "namespace.op" -> the number
    of calls to existing operators (aten.mm/addmm/bmm, aten.convolution, the fused attention, mytorch.ops...),
    which on mytorch dispatch to its native kernels. Counted in the code, once per graph, not per run."""
    import collections

    extern: collections.Counter = collections.Counter()
    generated = 0
    for code in codes:
        generated += len(re.findall(r"^\s*\w+ = async_compile\.\w+\(", code, re.M))  # Python wrapper
        generated += len(set(re.findall(r'^\s*extern "C"\s+void\s+(\w+)\(', code, re.M)))  # C++ wrapper
        extern.update("aten." + op for op in re.findall(r"\bextern_kernels\.(\w+)\(", code))
        extern.update(re.findall(r"\btorch\.ops\.(\w+\.\w+)\.\w+\(", code))
        extern.update("aten." + re.sub(r"_out$", "", op) for op in re.findall(r"\baoti_torch_mytorch_(\w+)\(", code))
        extern.update(ns + "." + op for ns, op in re.findall(r'aoti_torch_call_dispatcher\("(\w+)::(\w+)"', code))
    return {"generated": generated, "extern": dict(extern)}


# AOTInductor on mytorch (csrc/python/AotiRunner.cpp; docs/compile.md): the compiled model's runtime cannot load
# constants of an out-of-tree device, so a mytorch package keeps its weights apart (pickled, on the device) and
# the loader installs them.
AOTI_CONFIGS = {
    "aot_inductor.package_constants_in_so": False,
    "aot_inductor.package_constants_on_disk_format": "pickle_weights",
}


def aoti_compile_and_package(exported, package_path=None, inductor_configs: dict | None = None) -> str:
    """torch._inductor.aoti_compile_and_package for a program exported on mytorch, with its weights packaged apart
    (AOTI_CONFIGS); load it with `aoti_load_package`."""
    configs = dict(inductor_configs or {})
    configs.update(AOTI_CONFIGS)
    return torch._inductor.aoti_compile_and_package(exported, package_path=package_path, inductor_configs=configs)


def aoti_load_package(path, run_single_threaded: bool = False, device_index: int = -1, model_name: str = "model"):
    """Loads a package of `aoti_compile_and_package` (torch._inductor.aoti_load_package, with the weights)."""
    from torch.export.pt2_archive._package import load_pt2

    contents = load_pt2(
        path, run_single_threaded=run_single_threaded, device_index=device_index, load_weights_from_disk=True
    )
    if model_name not in contents.aoti_runners:
        raise RuntimeError(
            f"expected a model named {model_name!r} in {path}, but it holds {sorted(contents.aoti_runners)}"
        )
    return contents.aoti_runners[model_name]
