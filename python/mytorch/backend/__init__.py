"""torch.mytorch: the device module of the mytorch backend, named like torch.cuda."""

from ._device import (  # noqa: F401
    device,
    device_count,
    device_of,
    current_device,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_initialized,
    runtime,
    sim_threads,
    set_launch_blocking,
    set_sync_debug_mode,
    get_sync_debug_mode,
    launch_blocking,
    set_device,
    synchronize,
    _is_in_bad_fork,
    _lazy_init,
    _get_device_index,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream  # noqa: F401
from .memory import (  # noqa: F401
    empty_cache,
    host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_stats_as_nested_dict,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    empty_host_cache,
    memory_summary,
)
from . import memory  # noqa: F401,E402  (torch.mytorch.memory._record_memory_history, _snapshot, ...)
from .random import (  # noqa: F401
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .fallback import (  # noqa: F401
    fallback_stats,
    get_fallback_mode,
    host_route_stats,
    reset_fallback_stats,
    reset_host_route_stats,
    set_fallback_mode,
)
from .amp import get_amp_supported_dtype  # noqa: F401,E402
from .graphs import (  # noqa: F401,E402
    CUDAGraph,
    MytorchGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from .storage_types import STORAGE_CLASSES as _STORAGE_CLASSES  # noqa: E402
from .ipc import ipc_collect, register as _register_ipc  # noqa: E402,F401

_register_ipc()  # torch.multiprocessing shares mytorch tensors (ipc.py)

globals().update(_STORAGE_CLASSES)  # torch.mytorch.FloatStorage, ... (Tensor.storage_type())


def __getattr__(name: str):
    """Inductor's code generators for the device, resolved on first compile (Note [Inductor on mytorch] in
    inductor.py), so that importing mytorch imports neither Inductor nor Dynamo."""
    if name in ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"):
        from .inductor import register

        return register()[name]
    raise AttributeError(f"module 'torch.mytorch' has no attribute {name!r}")
