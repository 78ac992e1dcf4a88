"""Fuzzer worker: runs one case per request (fuzz.py makes them; the protocol is in _pool.py) and answers its
verdict. A case is an OpInfo sample at a dtype in one variant: as given, with a non-contiguous, reshaped, expanded,
promoted or wrong-dtype out=, with one argument on the CPU or on another mytorch device, or one of the OpInfo's error
inputs. The CPU is the reference: the same exception class, or the same values (where they differ at the sample's
dtype, judged against the result at float64 by the alignment suite's tolerance rule). A bystander tensor on the
device and the case's own inputs are checksummed around the call."""

import importlib
import json
import os
import sys
import warnings

VERDICTS = ("ok", "differs", "corruption", "mixed_device", "skipped", "harness")
# OpInfos that fill their input in place (their names lack the trailing underscore)
RANDOM_FILLS = {"bernoulli", "cauchy", "exponential", "geometric", "log_normal", "normal", "uniform"}
RANDOM_OPS = {
    "normal",
    "multinomial",
    "bernoulli",
    "nn.functional.dropout",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.rrelu",
    "randint",
    "randperm",
    "poisson",
    "pca_lowrank",
    "svd_lowrank",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
}
CPU_ARGS = {"tensor_split"}
# The promoted_out variant's out= dtype for a result dtype: one step up the promotion lattice.
PROMOTION_STEP = {
    "bool": "uint8",
    "uint8": "int16",
    "int8": "int16",
    "int16": "int32",
    "int32": "int64",
    "int64": "float32",
    "float16": "float32",
    "bfloat16": "float32",
    "float32": "float64",
    "complex64": "complex128",
}
# OpInfos that update running statistics passed as inputs
RUNNING_STATS = {
    "nn.functional.batch_norm",
    "nn.functional.instance_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
}
# OpInfos whose extra tensor argument is only read for its shape, or must be on the CPU: CUDA accepts them too
DEVICE_AGNOSTIC = {
    "broadcast_tensors",
    "broadcast_to",
    "expand_as",
    "reshape_as",
    "view_as",
    "tensor_split",
    "type_as",
    "new_empty",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty_strided",
}


def main() -> None:
    proto = os.fdopen(int(os.environ["MYTORCH_WORKER_FD"]), "w", buffering=1)
    os.dup2(2, 1)
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    import mytorch  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    for name in filter(None, os.environ.get("MYTORCH_FUZZ_PRELOAD", "").split(",")):
        importlib.import_module(name)  # test hooks: deliberately broken kernels (test/fuzz_hooks.py)
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["variant"] == "bad_input":
                verdict, detail = run_bad_input(torch, req["name"])
            elif req["variant"] == "random_edges":
                from ._fuzz_edges import run as run_random_edge

                verdict, detail = run_random_edge(torch, req["name"])
            elif req["variant"] == "factory_out":
                from ._fuzz_edges import run_factory

                verdict, detail = run_factory(torch, req["name"])
            else:
                verdict, detail = run_case(torch, op_db[req["op"]], req)
        except SkipCase as e:
            verdict, detail = "skipped", str(e)
        except Exception as e:  # the harness itself: reported as such, and it fails the run
            import traceback

            where = traceback.extract_tb(e.__traceback__)[-1]
            verdict, detail = "harness", f"{type(e).__name__}: {e} ({where.name}:{where.lineno})"[:300]
        proto.write(json.dumps({"index": req["index"], "verdict": verdict, "detail": detail}) + "\n")


class SkipCase(Exception):
    """A case the fuzzer cannot run (not a failure of the device, nor of the harness)."""


def _tensors(tree):
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _cast(tree, dtype, only):
    """The tree with its `only`-th tensor cast to dtype (the others as they are)."""
    import torch
    from torch.utils._pytree import tree_map

    count = [0]

    def cast(x):
        if not isinstance(x, torch.Tensor):
            return x
        count[0] += 1
        return x.to(dtype) if count[0] - 1 == only else x

    return tree_map(cast, tree)


def _at_dtypes(torch, got, ref):
    """got's floating tensors rounded to the dtypes of ref's, leaf by leaf (got itself when the trees differ)."""
    from torch.utils._pytree import tree_flatten, tree_unflatten

    leaves, spec = tree_flatten(got)
    refs, _ = tree_flatten(ref)
    if len(leaves) != len(refs):
        return got

    def rounded(a, b):
        both = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        return a.to(b.dtype) if both and a.is_floating_point() and b.is_floating_point() else a

    return tree_unflatten([rounded(a, b) for a, b in zip(leaves, refs)], spec)


def _to(tree, device, only=None, memo=None):
    """The tree's tensors on `device` (only the `only`-th one if given), keeping which tensors share memory:
    each storage moves once and every tensor is rebuilt as the same view of it (error inputs that alias an
    out= with an input stay aliased)."""
    import torch
    from torch.utils._pytree import tree_map

    memo = {} if memo is None else memo
    count = [0]

    def move(x):
        if not isinstance(x, torch.Tensor):
            return x
        if x.layout != torch.strided:
            raise SkipCase(f"a {x.layout} sample: sparse layouts are not supported on mytorch")
        k = count[0]
        count[0] += 1
        if only is not None and k != only:
            return x
        src = x.untyped_storage()
        key = (src.data_ptr(), src.device, src.nbytes())
        if key not in memo:
            raw = torch.empty(src.nbytes(), dtype=torch.uint8, device=src.device).set_(src)
            memo[key] = raw.to(device).untyped_storage()
        y = torch.empty(0, dtype=x.dtype, device=device).set_(memo[key], x.storage_offset(), x.size(), x.stride())
        if x.is_conj():  # the bytes moved as they are: the lazy conjugation and negation bits go with them
            y = y.conj()
        if x.is_neg():
            y = torch._neg_view(y)
        return y.requires_grad_(x.requires_grad) if x.is_leaf and x.requires_grad else y

    return tree_map(move, tree)


def _call(op, args, kwargs):
    """The op's result or its exception; the device synchronised inside, so that an error its kernels recorded on
    the device (Note [Device-side errors]: raised at the next synchronisation on cuda and emu) is this op's."""
    import torch

    try:
        out = op(*args, **kwargs)
        torch.mytorch.synchronize()
        return out, None
    except Exception as e:  # noqa: BLE001 - the outcome under test
        return None, e


def _gold(torch, op, args, kwargs):
    """The op's result with floating inputs at float64 and complex ones at complex128 (None if it fails)."""
    from torch.utils._pytree import tree_map

    def up(x):
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_complex():
            return x.detach().to(torch.complex128)
        return x.detach().to(torch.float64) if x.is_floating_point() else x.detach().clone()

    got, err = _call(op, tree_map(up, args), tree_map(up, kwargs))
    return None if err is not None else got


def _difference(torch, got, want, gold=None) -> str:
    """How the device's result differs from the CPU's at the same dtype, by the alignment suite's rule ("" if it
    does not). Where the values differ, `gold()` (the result at float64) judges: within the tolerance of PyTorch's
    own error at the dtype is the same."""
    from mytorch.testing._compare import compare_tensor

    g, w = _tensors(got), _tensors(want)
    if len(g) != len(w):
        return f"{len(g)} tensors where the CPU gives {len(w)}"
    golds = None
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i} is {a.dtype} {tuple(a.shape)} where the CPU gives {b.dtype} {tuple(b.shape)}"
        if compare_tensor(a, b, None).ok:
            continue
        if gold is not None and (a.is_floating_point() or a.is_complex()):
            golds = _tensors(gold()) if golds is None else golds
            if len(golds) == len(w) and compare_tensor(a, b, golds[i]).ok:
                continue
            return f"output {i}'s values differ from the CPU's beyond the tolerance against float64"
        return f"output {i}'s values differ from the CPU's"
    return ""


# Sorts whose order of tied elements is unspecified (the CPU's and CUDA's are not stable; mytorch's is)
TIES = {"sort": 1, "argsort": 1, "topk": 2, "msort": None}


def _same_up_to_ties(torch, op, got, want, args, kwargs) -> bool:
    """Whether the device's indices pick the same values as the CPU's, each position once (a tie's order aside)."""
    x = args[0]
    pos = TIES[op.name]
    dim = kwargs.get(
        "dim",
        args[pos]
        if pos is not None and len(args) > pos and type(args[pos]) is int
        else (0 if op.name == "msort" else -1),
    )
    g, w = _tensors(got), _tensors(want)
    if x.dim() == 0 or len(g) != len(w):
        return False
    for a, b in zip(g, w):
        a = a.cpu()
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype == torch.int64 and b.dtype == torch.int64 and not torch.equal(a, b):
            picked, ref = x.take_along_dim(a, dim), x.take_along_dim(b, dim)
            unique = bool((a.sort(dim).values.diff(dim=dim) != 0).all()) if a.size(dim) > 1 else True
            if not (unique and torch.equal(picked, ref)):
                return False
        elif not torch.equal(a, b) and not (a.is_floating_point() and torch.equal(a.nan_to_num(), b.nan_to_num())):
            return False
    return True


# Ops selecting one element per slice, whose index among equal values is implementation-defined
SELECTS = {"median", "nanmedian", "kthvalue", "mode"}


def _same_selection(torch, got, want, args) -> bool:
    """Same values as the CPU's, and indices pointing at equal elements (select_equivalent)."""
    from mytorch.testing._compare import select_equivalent

    g, w = _tensors(got), _tensors(want)
    if len(g) != 2 or len(w) != 2 or not isinstance(args[0], torch.Tensor):
        return False
    values, ref = g[0].cpu(), w[0]
    same = torch.equal(values, ref) or (
        values.is_floating_point() and torch.equal(values.nan_to_num(), ref.nan_to_num())
    )
    return same and select_equivalent(args[0], g[1], w[1])


def _judge(torch, op, got, want, args, kwargs):
    diff = _difference(torch, got, want, lambda: _gold(torch, op, args, kwargs))
    if diff and op.name in TIES and _same_up_to_ties(torch, op, got, want, args, kwargs):
        return "ok", ""
    if diff and op.name in SELECTS and _same_selection(torch, got, want, args):
        return "ok", ""
    return ("differs", diff) if diff else ("ok", "")


def reshaped_out(torch, n: int, dtype, device):
    """An out= of n elements, not contiguous, in a shape no op's result has by chance: a transposed 2-D tensor, or
    for a prime n a (1, n) row taken every other element of a wider one."""
    rows = next((r for r in range(2, n) if n % r == 0), None)
    if rows is None:
        return torch.zeros(1, 2 * n, dtype=dtype, device=device)[:, ::2]
    return torch.zeros(n // rows, rows, dtype=dtype, device=device).t()


def _draws(op, kwargs) -> bool:
    """Whether the op's result is uninitialized memory or draws from the device's own generator: then only its
    shapes and dtypes are comparable with the CPU's."""
    if op.name == "nn.functional.multi_head_attention_forward":  # dropout on the attention weights
        return bool(kwargs.get("training"))
    return "empty" in op.name or op.name in RANDOM_FILLS or op.name.startswith("rand") or op.name in RANDOM_OPS


def _same_metadata(torch, got, want):
    same = all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(_tensors(got), _tensors(want)))
    return ("ok", "") if same else ("differs", "shapes or dtypes differ from the CPU's")


def run_bad_input(torch, name):
    """One hand-written bad input (_fuzz_bad.py) on the CPU and on mytorch: the same exception class, or the same
    values; a bystander tensor on the device must not change."""
    from ._fuzz_bad import BAD_INPUTS, DRAWS, MIXED

    f = BAD_INPUTS[name.removeprefix("bad:")]
    torch.manual_seed(0)
    want, cpu_err = _call(f, ("cpu",), {})
    bystander = torch.full((4096,), 3.25, device="mytorch")
    got, dev_err = _call(f, ("mytorch",), {})
    torch.mytorch.synchronize()
    if not bool((bystander == 3.25).all()):
        return "corruption", "a bystander tensor changed"
    if name.removeprefix("bad:") in MIXED:
        return ("ok", "") if dev_err is not None else ("mixed_device", "a CPU storage or tensor accepted")
    if (cpu_err is None) != (dev_err is None):
        return (
            "differs",
            f"CPU {type(cpu_err).__name__ + ': ' + str(cpu_err)[:80] if cpu_err else 'ok'}, mytorch "
            f"{type(dev_err).__name__ + ': ' + str(dev_err)[:80] if dev_err else 'ok'}",
        )
    if cpu_err is not None:
        return (
            ("ok", "")
            if isinstance(dev_err, type(cpu_err))
            else ("differs", f"{type(dev_err).__name__} where the CPU raises {type(cpu_err).__name__}")
        )
    if name.removeprefix("bad:") in DRAWS:
        return _same_metadata(torch, got, want)
    diff = _difference(torch, got, want)
    return ("differs", diff) if diff else ("ok", "")


def run_case(torch, op, req):
    dtype = getattr(torch, req["dtype"])
    torch.manual_seed(req["seed"])
    variant = req["variant"]
    dev = "mytorch"
    if variant == "error_inputs":
        if getattr(op, "error_inputs_func", None) is None:
            return "skipped", "no error inputs"
        errs = list(op.error_inputs("cpu"))
        if not errs:
            return "skipped", "no error inputs"
        ei = errs[req["sample"] % len(errs)]
        s = ei.sample_input
        args, kwargs = (s.input, *s.args), dict(s.kwargs)
        _, cpu_err = _call(op, args, kwargs)
        bystander = torch.full((4096,), 3.25, device=dev)
        shared = {}
        _, dev_err = _call(op, _to(args, dev, memo=shared), _to(kwargs, dev, memo=shared))
        if not bool((bystander == 3.25).all()):
            return "corruption", "a bystander tensor changed"
        if cpu_err is None:
            return "skipped", "the CPU accepts this error input"
        if dev_err is None:
            return "differs", f"accepted where the CPU raises {type(cpu_err).__name__}: {str(cpu_err)[:120]}"
        if type(dev_err) is not type(cpu_err) and not isinstance(dev_err, type(cpu_err)):
            return "differs", f"{type(dev_err).__name__} where the CPU raises {type(cpu_err).__name__}"
        return "ok", ""
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
    if not samples:
        return "skipped", "no samples"
    s = samples[req["sample"] % len(samples)]
    args, kwargs = (s.input, *s.args), dict(s.kwargs)
    want, cpu_err = _call(op, args, kwargs)
    shared = {}
    dev_args, dev_kwargs = _to(args, dev, memo=shared), _to(kwargs, dev, memo=shared)
    if op.name in CPU_ARGS:  # the op wants its extra tensor arguments on the CPU, on every device
        dev_args = (_to(args[0], dev),) + tuple(args[1:])
    if "device" in dev_kwargs:  # factories: the samples name the CPU
        dev_kwargs["device"] = dev
    inputs_before = [t.detach().cpu().clone() for t in _tensors((dev_args, dev_kwargs))]
    bystander = torch.full((4096,), 3.25, device=dev)

    mutates = (
        op.name.endswith("_")
        or "in_place" in (op.variant_test_name or "")
        or "update" in op.name
        or op.name in RANDOM_FILLS
        or op.name in RUNNING_STATS
    )

    def untouched():
        if not bool((bystander == 3.25).all()):
            return "a bystander tensor changed"
        if mutates:  # an in-place op writes its inputs by design
            return ""
        after = [t.detach().cpu() for t in _tensors((dev_args, dev_kwargs))]
        for b, a in zip(inputs_before, after):
            if not torch.equal(a, b) and not (
                a.is_floating_point()
                and torch.equal(a.isnan(), b.isnan())
                and torch.equal(a.nan_to_num(), b.nan_to_num())
            ):
                return "an input changed"
        return ""

    if variant == "functional":
        got, dev_err = _call(op, dev_args, dev_kwargs)
        bad = untouched()
        if bad:
            return "corruption", bad
        if (cpu_err is None) != (dev_err is None):
            return (
                "differs",
                f"CPU {type(cpu_err).__name__ if cpu_err else 'ok'}, mytorch "
                f"{type(dev_err).__name__ + ': ' + str(dev_err)[:100] if dev_err else 'ok'}",
            )
        if cpu_err is not None:
            return (
                ("ok", "")
                if type(dev_err) is type(cpu_err)
                else ("differs", f"{type(dev_err).__name__} where the CPU raises {type(cpu_err).__name__}")
            )
        if _draws(op, kwargs):
            return _same_metadata(torch, got, want)
        return _judge(torch, op, got, want, args, kwargs)
    if variant in ("cpu_arg", "other_device"):
        tensors = _tensors(args)
        movable = [k for k, t in enumerate(tensors) if k > 0 and t.dim() > 0]
        if cpu_err is not None or not movable or op.name in DEVICE_AGNOSTIC:
            return "skipped", "no second tensor argument that CUDA would refuse"
        k = movable[req["sample"] % len(movable)]
        if variant == "other_device":
            if torch.mytorch.device_count() < 2:
                return "skipped", "one device"
            mixed = _to(dev_args, "mytorch:1", only=k)
        else:
            mixed = _to(dev_args, "cpu", only=k)
        got, dev_err = _call(op, mixed, dev_kwargs)
        if dev_err is None:
            # Ops that only read the argument's shape or dtype (reshape_as, broadcast_tensors, new_*), or move it
            # to the device themselves (index_put_'s indices), accept it on CUDA too: acceptance is wrong only
            # where the result is not the all-on-device result (judged against float64: accumulation order on a
            # GPU may differ between the two runs).
            ref, ref_err = _call(op, dev_args, dev_kwargs)
            on_device = all(t.device.type == "mytorch" for t in _tensors(got))
            gold = lambda: _gold(torch, op, args, kwargs)  # noqa: E731
            if ref_err is not None or not on_device or _difference(torch, got, ref, gold):
                return "mixed_device", f"argument {k} on {'the CPU' if variant == 'cpu_arg' else 'mytorch:1'} accepted"
        return "ok", ""
    if variant == "promoted_arg":
        # A tensor argument after the first one promotion step up (an index int64 -> float32, a source float32 ->
        # float64): ops that require an argument's dtype (index_put_'s values, put_'s source, an index) refuse it,
        # the others promote; refused or computed as on the CPU.
        tensors = _tensors(args)
        steps = [k for k, t in enumerate(tensors) if k > 0 and str(t.dtype).removeprefix("torch.") in PROMOTION_STEP]
        if not steps:
            return "skipped", "no second tensor argument with a promotion step"
        k = steps[req["sample"] % len(steps)]
        up = getattr(torch, PROMOTION_STEP[str(tensors[k].dtype).removeprefix("torch.")])
        cpu_promoted = _cast(args, up, k)
        dev_promoted = _cast(dev_args, up, k)
        want2, cpu_err2 = _call(op, cpu_promoted, kwargs)
        got2, dev_err2 = _call(op, dev_promoted, dev_kwargs)
        bad = untouched()
        if bad:
            return "corruption", bad
        if cpu_err2 is not None and dev_err2 is None:
            return "corruption", f"argument {k} as {up} accepted where the CPU raises {type(cpu_err2).__name__}"
        if cpu_err2 is None and dev_err2 is not None:
            return "differs", f"argument {k} as {up} refused where the CPU accepts it: {str(dev_err2)[:100]}"
        if cpu_err2 is not None:
            if not isinstance(dev_err2, type(cpu_err2)):
                return "differs", f"{type(dev_err2).__name__} where the CPU raises {type(cpu_err2).__name__}"
            return "ok", ""
        if _draws(op, kwargs):
            return _same_metadata(torch, got2, want2)
        if cpu_err is None:  # judged at the sample's own result dtypes: a promoted argument adds no precision
            got2, want2 = _at_dtypes(torch, got2, want), _at_dtypes(torch, want2, want)
        return _judge(torch, op, got2, want2, cpu_promoted, kwargs)
    if variant == "aten_out":  # out= of every aten call the sample makes (_fuzz_replay.py)
        if cpu_err is not None or _draws(op, kwargs) or op.name in RUNNING_STATS or mutates:
            return "skipped", "the sample raises, draws, or mutates its inputs"
        from ._fuzz_replay import record, replay

        calls = record(torch, op, dev_args, dev_kwargs)
        return replay(
            torch,
            calls,
            lambda tree: _to(tree, dev),
            lambda got, want, gold: _difference(torch, got, want, gold),
            lambda func, a, k: _gold(torch, func, a, k),
        )
    # out= variants
    if not op.supports_out or cpu_err is not None or not isinstance(want, torch.Tensor) or want.numel() < 2:
        return "skipped", "no single-tensor out="

    def other_dtype_out(other):
        """An empty out= of dtype `other` on both sides: (verdict, out, cpu_out), the verdict None when both took
        it (accepting one the CPU refuses is a corruption: its bytes would be reinterpreted)."""
        cpu_out = torch.empty(0, dtype=other)
        _, cpu_out_err = _call(op, args, dict(kwargs, out=cpu_out))
        out = torch.empty(0, dtype=other, device=dev)
        _, dev_err = _call(op, dev_args, dict(dev_kwargs, out=out))
        bad = untouched()
        if bad:
            return ("corruption", bad), out, cpu_out
        if cpu_out_err is not None and dev_err is None:
            return ("corruption", f"an out= of dtype {other} accepted where the CPU raises"), out, cpu_out
        if cpu_out_err is None and dev_err is not None:
            refused = f"an out= of dtype {other} refused where the CPU accepts it: {str(dev_err)[:100]}"
            return ("differs", refused), out, cpu_out
        return (("ok", "") if cpu_out_err is not None else None), out, cpu_out

    if variant == "noncontig_out":
        shape = list(want.shape)
        if not shape:
            return "skipped", "0-dim"
        mark = True if want.dtype == torch.bool else 7
        sentinel = torch.full(shape[:-1] + [shape[-1] * 2], mark, dtype=want.dtype, device=dev)
        out = sentinel[..., ::2]
        _, dev_err = _call(op, dev_args, dict(dev_kwargs, out=out))
        cpu_sentinel = torch.full(shape[:-1] + [shape[-1] * 2], mark, dtype=want.dtype)
        _call(op, args, dict(kwargs, out=cpu_sentinel[..., ::2]))
        cpu_gaps_kept = bool((cpu_sentinel[..., 1::2] == mark).all())
        if not bool((sentinel[..., 1::2] == mark).all()):
            if cpu_gaps_kept:
                return "corruption", "wrote into the gaps of a non-contiguous out="
            return "ok", ""  # the CPU resizes this out= too (with its deprecation warning) and writes it whole
        bad = untouched()
        if bad:
            return "corruption", bad
        if dev_err is not None:
            return "differs", f"non-contiguous out= refused: {type(dev_err).__name__}: {str(dev_err)[:100]}"
        if _draws(op, kwargs):
            return _same_metadata(torch, out, want)
        return _judge(torch, op, out, want, args, kwargs)
    if variant == "reshaped_out":
        # An out= with the result's number of elements in another shape, not contiguous (a transposed 2-D tensor):
        # ATen's out= rule keeps an out= of the right size where the op's kernel keeps it (the range factories) and
        # resizes it where the kernel resizes it; its final sizes, strides and values must be the CPU's.
        cpu_out = reshaped_out(torch, want.numel(), want.dtype, "cpu")
        _, cpu_out_err = _call(op, args, dict(kwargs, out=cpu_out))
        out = reshaped_out(torch, want.numel(), want.dtype, dev)
        _, dev_err = _call(op, dev_args, dict(dev_kwargs, out=out))
        bad = untouched()
        if bad:
            return "corruption", bad
        if (cpu_out_err is None) != (dev_err is None):
            return (
                "differs",
                f"the CPU {'raises' if cpu_out_err else 'writes'}, mytorch {'raises' if dev_err else 'writes'}",
            )
        if cpu_out_err is not None:
            return "ok", ""
        if tuple(out.shape) != tuple(cpu_out.shape) or out.stride() != cpu_out.stride():
            return (
                "differs",
                f"the out= ends {tuple(out.shape)} with strides {out.stride()}, the CPU's "
                f"{tuple(cpu_out.shape)} with {cpu_out.stride()}",
            )
        if _draws(op, kwargs):
            return "ok", ""
        return _judge(torch, op, out, cpu_out, args, kwargs)
    if variant == "promoted_out":
        # An out= of the dtype one promotion step up from the result's (float32 -> float64, complex64 ->
        # complex128, int32 -> int64, ...): ops whose out= must have the result's dtype refuse it, the others cast
        # into it; accepted or refused as on the CPU, and the values the CPU's when accepted.
        other = PROMOTION_STEP.get(str(want.dtype).removeprefix("torch."))
        if other is None:
            return "skipped", f"no promotion step from {want.dtype}"
        verdict, out, cpu_out = other_dtype_out(getattr(torch, other))
        if verdict is not None:
            return verdict
        if _draws(op, kwargs):
            return "ok", ""
        # computed at the result's dtype and cast into the out= on both sides: judged at the result's dtype
        return _judge(torch, op, out.to(want.dtype), cpu_out.to(want.dtype), args, kwargs)
    if variant == "expanded_out":
        # No CPU run: some CPU kernels write an expanded out= past its one element (narrow_copy corrupts the CPU
        # heap). On the device an out= whose elements share memory is refused, or holds the CPU's result: ATen
        # gives it a layout of its own where the op resizes its out= before checking it (matmul's), and the fills
        # (zeros, ones, full: one value everywhere) write it as it is.
        out = torch.zeros(1, dtype=want.dtype, device=dev).expand(want.shape)
        _, dev_err = _call(op, dev_args, dict(dev_kwargs, out=out))
        bad = untouched()
        if bad:
            return "corruption", bad
        if dev_err is None and not _draws(op, kwargs):
            wrong = _difference(torch, out, want, lambda: _gold(torch, op, args, kwargs))
            if wrong:
                return "corruption", f"an expanded out= accepted, not holding the CPU's result: {wrong[:100]}"
        elif dev_err is None:
            return "corruption", "an expanded out= accepted for draws"
        return "ok", ""
    if variant == "wrong_dtype_out":
        verdict, _, _ = other_dtype_out(torch.float64 if want.dtype != torch.float64 else torch.float32)
        return verdict or ("ok", "")
    return "skipped", f"unknown variant {variant}"


if __name__ == "__main__":
    main()
