"""The fuzzer's aten_out variant: out= for every aten operator an OpInfo sample reaches, not only for the OpInfos
that have out= samples. The sample runs on the device, forward and backward, under a dispatch mode that records
the aten calls that have an out= overload (elu has elu.out, max.dim has max.dim_max, elu_backward has
elu_backward.grad_input); each recorded call is replayed through
that overload on the CPU and on the device, with an out= of another dtype and with a non-contiguous out= of the
right dtype. Expected: the CPU's refusal or its values, and the view's gaps untouched."""

from __future__ import annotations

MAX_CALLS = 3
# Outputs that are workspaces, whose contents each device's kernel defines for its own backward (CUDA's
# log_sigmoid buffer is empty; its CTC log_alpha is laid out differently): compared by shape and dtype only.
WORKSPACES = {"aten::log_sigmoid_forward": {1}, "aten::_ctc_loss": {1}}
# Sorts whose indices may order tied elements differently (the CPU's sort is not stable; mytorch's is).
TIES = {"aten::sort", "aten::topk"}
# Selections whose index among equal values is implementation-defined (select_equivalent in _compare.py).
SELECTS = {"aten::median", "aten::nanmedian", "aten::kthvalue", "aten::mode"}


def _out_overload(func):
    """The out= overload of a functional aten overload (same arguments, then the outs), or None."""
    schema = func._schema
    if any(a.is_out for a in schema.arguments) or any(a.alias_info is not None for a in schema.arguments):
        return None
    sig = [(a.name, str(a.type)) for a in schema.arguments]
    packet = func.overloadpacket
    for name in packet.overloads():
        o = getattr(packet, name)
        args = o._schema.arguments
        outs = [a.name for a in args if a.is_out]
        if (
            outs
            and [(a.name, str(a.type)) for a in args if not a.is_out] == sig
            and len(outs) == len(o._schema.returns)
        ):
            return o, outs
    return None


def record(torch, op, dev_args, dev_kwargs):
    """The first MAX_CALLS distinct aten calls with an out= overload that the sample makes on the device, then as
    many from its backward (the gradient kernels' grad_input overloads), with their arguments copied to the CPU."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves, tree_map

    calls, seen = [], set()
    limit = [MAX_CALLS]

    def to_cpu(x):
        return x.detach().cpu().clone() if isinstance(x, torch.Tensor) else x

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if len(calls) < limit[0] and func not in seen:
                found = _out_overload(func)
                if found is not None:
                    seen.add(func)
                    calls.append((func, found[0], found[1], tree_map(to_cpu, args), tree_map(to_cpu, kwargs)))
            return func(*args, **kwargs)

    def leaf(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.detach().clone().requires_grad_()
        return x

    try:
        with Log():
            op(*dev_args, **dev_kwargs)
    except Exception:  # noqa: BLE001 - the functional variant judges the call itself
        pass
    limit[0] = len(calls) + MAX_CALLS
    try:
        out = op(*tree_map(leaf, dev_args), **tree_map(leaf, dev_kwargs))
        grads = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
        if grads:
            with Log():
                torch.autograd.backward([t.sum() for t in grads])
    except Exception:  # noqa: BLE001 - not differentiable, or not here
        pass
    return calls


def _argument(func, args, kwargs, name, default):
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return kwargs.get(name, args[i] if i < len(args) else default)
    return default


def _judged(torch, func, got, want, args, kwargs, difference, gold):
    """difference() for a recorded call, with its workspaces and tied indices set aside."""
    name = func._schema.name
    keep = [i for i in range(len(want)) if i not in WORKSPACES.get(name, ())]
    for i in set(range(len(want))) - set(keep):
        if got[i].dtype != want[i].dtype:
            return f"output {i} is {got[i].dtype} where the CPU gives {want[i].dtype}"
    if name in TIES and len(want) == 2:
        x, dim = args[0], _argument(func, args, kwargs, "dim", -1)
        idx = got[1].cpu()
        if x.dim() > 0 and torch.equal(x.take_along_dim(idx, dim), x.take_along_dim(want[1], dim)):
            keep = [0]
    if name in SELECTS and len(want) == 2 and isinstance(args[0], torch.Tensor):
        from mytorch.testing._compare import select_equivalent

        if select_equivalent(args[0], got[1], want[1]):
            keep = [0]
    return difference([got[i] for i in keep], [want[i] for i in keep], lambda: _pick(gold(), keep))


def _pick(result, keep):
    if result is None:
        return None
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    return [result[i] for i in keep] if len(result) > max(keep) else None


def replay(torch, calls, to_device, difference, gold):
    """Replays each recorded call through its out= overload; returns (verdict, detail). difference(got, want,
    gold) judges values as the functional variant does; gold(func, args, kwargs) is the call at float64."""
    results = []
    for func, out_op, out_names, args, kwargs in calls:
        try:  # a call the device made that the CPU cannot make (a dtype its kernel lacks): nothing to compare
            want = func(*args, **kwargs)
        except Exception:  # noqa: BLE001
            continue
        wants = list(want) if isinstance(want, (tuple, list)) else [want]
        if len(wants) != len(out_names) or not all(isinstance(w, torch.Tensor) for w in wants):
            continue
        if any(w.layout != torch.strided for w in wants):  # a sparse result: the strided outs below do not apply
            continue
        name = f"{out_op._schema.name}.{out_op._overloadname}"
        dev_args, dev_kwargs = to_device(args), to_device(kwargs)
        bystander = torch.full((4096,), 3.25, device="mytorch")
        # an out= of another dtype (the first one; the rest of the right dtype)
        other = torch.float64 if wants[0].dtype != torch.float64 else torch.float32
        cpu_outs = [torch.empty(0, dtype=other if i == 0 else w.dtype) for i, w in enumerate(wants)]
        dev_outs = [torch.empty(0, dtype=o.dtype, device="mytorch") for o in cpu_outs]
        cpu_err = dev_err = None
        try:
            out_op(*args, **kwargs, **dict(zip(out_names, cpu_outs)))
        except Exception as e:  # noqa: BLE001
            cpu_err = e
        try:
            out_op(*dev_args, **dev_kwargs, **dict(zip(out_names, dev_outs)))
        except Exception as e:  # noqa: BLE001
            dev_err = e
        if cpu_err is not None and dev_err is None:
            # Refused by the CPU, accepted here: wrong whatever the values (the class 1), and corruption
            # unless the out= holds the result cast to its dtype (then a difference KNOWN_DIFFERENCES must list).
            cast = [w.to(o.dtype) for w, o in zip(wants, dev_outs)]
            verdict = (
                "differs"
                if not _judged(torch, func, dev_outs, cast, args, kwargs, difference, lambda: gold(func, args, kwargs))
                else "corruption"
            )
            return (
                verdict,
                f"{name}: an out= of dtype {other} accepted where the CPU raises "
                f"{type(cpu_err).__name__}: {str(cpu_err)[:100]}",
            )
        if cpu_err is None and dev_err is not None:
            return (
                "differs",
                f"{name}: an out= of dtype {other} refused where the CPU accepts it: "
                f"{type(dev_err).__name__}: {str(dev_err)[:80]}",
            )
        if cpu_err is None:
            # Both hold a result computed at the natural dtype and cast: judged at the narrower of the two dtypes
            # (sinh of int64 into a float64 out= is float32 arithmetic on both sides, not float64's).
            narrow = [other if torch.promote_types(w.dtype, other) == w.dtype else w.dtype for w in wants[:1]] + [
                w.dtype for w in wants[1:]
            ]
            diff = _judged(
                torch,
                func,
                [o.to(d) for o, d in zip(dev_outs, narrow)],
                [o.to(d) for o, d in zip(cpu_outs, narrow)],
                args,
                kwargs,
                difference,
                lambda: gold(func, args, kwargs),
            )
            if diff:
                return "differs", f"{name} with an out= of dtype {other}: {diff}"
        # a non-contiguous out= of the right dtype: written through its strides, the gaps untouched
        if all(w.dim() > 0 and w.numel() > 1 for w in wants):
            mark = [True if w.dtype == torch.bool else 7 for w in wants]
            bases = [
                torch.full(list(w.shape[:-1]) + [w.shape[-1] * 2], m, dtype=w.dtype, device="mytorch")
                for w, m in zip(wants, mark)
            ]
            try:
                out_op(*dev_args, **dev_kwargs, **dict(zip(out_names, [b[..., ::2] for b in bases])))
            except Exception as e:  # noqa: BLE001
                return "differs", f"{name}: a non-contiguous out= refused: {type(e).__name__}: {str(e)[:80]}"
            if not all(bool((b[..., 1::2] == m).all()) for b, m in zip(bases, mark)):
                return "corruption", f"{name}: wrote into the gaps of a non-contiguous out="
            diff = _judged(
                torch,
                func,
                [b[..., ::2] for b in bases],
                wants,
                args,
                kwargs,
                difference,
                lambda: gold(func, args, kwargs),
            )
            if diff:
                return "differs", f"{name} with a non-contiguous out=: {diff}"
        if not bool((bystander == 3.25).all()):
            return "corruption", f"{name}: a bystander tensor changed"
        results.append(name)
    return ("ok", ", ".join(results)) if results else ("skipped", "no aten call with an out= overload")
