"""The fuzzer's generated cases (issue 49): classes of calls made from dtype limits and shapes rather than from
OpInfo samples, each run on the CPU and on mytorch.

random_edges: every random fill and draw at the edges of its dtype's range and of its distribution's parameters.

The edges are generated from each dtype's limits (torch.finfo / torch.iinfo, the 2^digits beyond which a floating
dtype holds no more integers) and the parameters' own edges (0, negative, NaN, infinities, reversed ranges), so a
new op or dtype in the lists gets its edges without a hand-written case. The CPU is the reference: the same
exception class (or none), the same warnings (ATen's TORCH_WARN is a UserWarning: count and category), and the
result's dtype and shape; the values are draws from different generators and are not compared, but they must lie in
the range the call asked for (random_'s [from, to), uniform_'s [from, to]).

factory_out: every factory function that takes out= (arange, range, linspace, logspace, eye, full, zeros, ones,
empty, rand, randn, randint, randperm) with an out= of the right number of elements in another shape, not
contiguous; of the result's shape with gaps; with elements sharing memory; and of another number of elements. The
out= must end with the CPU's sizes, strides and values (draws: sizes and strides), and the call raise and warn as
the CPU's. With them, every like factory over inputs whose elements share memory or have gaps, in every order of
their dimensions (the inputs of PyTorch's like-factory stride test, made by filling overlapping strides): the
result's sizes and strides as the CPU's.
"""

from __future__ import annotations

import math
import warnings

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("uint8", "int8", "int16", "int32", "int64", "bool")
# 2^digits: the largest range of integers a floating dtype holds exactly (random_'s bound for it)
_DIGITS = {"float32": 24, "float64": 53, "float16": 11, "bfloat16": 8}
_INF, _NAN = math.inf, math.nan


def _fmt(a) -> str:
    return repr(a) if not isinstance(a, tuple) else "x".join(map(str, a)) or "0d"


def edges() -> dict[str, tuple]:
    """name -> (op, dtype, args): every case of the variant."""
    import torch

    out: dict[str, tuple] = {}

    def add(op, dtype, *args):
        out[f"random:{op}/{dtype}/{','.join(map(_fmt, args))}"] = (op, dtype, args)

    for d in FLOATS:
        fi = torch.finfo(getattr(torch, d))
        big = 2 ** _DIGITS[d]
        for a, b in [(0.0, 1.0), (1.0, 0.0), (1.0, 1.0), (-_INF, 0.0), (0.0, _INF), (_NAN, 1.0), (fi.min, fi.max),
                     (-fi.max / 2, fi.max / 2), (0.0, fi.max), (fi.max, fi.max)]:  # fmt: skip
            add("uniform_", d, a, b)
        for a, b in [(0, big), (-big, big + 1), (-big - 1, 0), (0, big + 2), (5, 5), (6, 5), (-3, None), (0, None),
                     (big, None), (big + 1, None), (int(fi.max) * 2 if d != "float64" else 2**62, None)]:  # fmt: skip
            add("random_", d, a, b)
        for t in (big, big + 2, 0, -1):
            add("random_to", d, t)
        for m, s in [(0.0, 1.0), (0.0, 0.0), (0.0, -1.0), (0.0, _NAN), (0.0, _INF), (_INF, 1.0), (_NAN, 1.0)]:
            add("normal_", d, m, s)
        for p in (0.0, 1.0, -0.1, 1.1, _NAN):
            add("bernoulli_", d, p)
        for lam in (1.0, 0.0, -1.0, _INF, _NAN):
            add("exponential_", d, lam)
        for p in (0.5, 1.0, 0.0, -0.1, 1.5):
            add("geometric_", d, p)
        for m, s in [(0.0, 1.0), (0.0, 0.0), (0.0, -1.0)]:
            add("log_normal_", d, m, s)
            add("cauchy_", d, m, s)
    for d in INTS:
        if d == "bool":
            lo, hi = 0, 1
        else:
            ii = torch.iinfo(getattr(torch, d))
            lo, hi = ii.min, ii.max
        cases = [(lo, hi + 1), (0, hi + 2), (lo, lo), (hi, lo), (0, None), (hi, None), (hi + 1, None)]
        if d != "int64":  # Python ints past int64 do not reach the op on either side
            cases += [(lo - 1, 0), (lo - 1, None)]
        for a, b in cases:
            add("random_", d, a, b)
        for t in (hi + 1, hi + 2, 0):
            if t <= 2**63 - 1:
                add("random_to", d, t)
        for p in (0.5, -1.0):
            add("bernoulli_", d, p)
        add("uniform_", d, 0.0, 1.0)
        add("normal_", d, 0.0, 1.0)
        add("exponential_", d, 1.0)
    # torch.normal's tensor forms: mean and std shapes (broadcastable or not), a negative std
    for ms, ss in [((3,), (4,)), ((2, 3), (3, 2)), ((6,), (2, 3)), ((3,), (1,)), ((2, 1), (1, 3)), ((), (3,)),
                   ((3,), ())]:  # fmt: skip
        add("normal_tensors", "float32", ms, ss)
    add("normal_tensors_negative_std", "float32", (3,), (3,))
    add("normal_tensor_mean", "float32", (3,), -1.0)
    add("normal_tensor_std", "float32", 0.0, (3,))
    return out


def _call(torch, op, dtype, args, device):
    t = torch.zeros(8, dtype=getattr(torch, dtype), device=device)
    if op == "random_":
        a, b = args
        return t.random_(a, b) if b is not None else t.random_(a)
    if op == "random_to":
        return t.random_(args[0])
    if op.startswith("normal_tensor"):
        mean, std = args

        def make(x, fill):
            return torch.full(x, fill, device=device) if isinstance(x, tuple) else x

        if op == "normal_tensors_negative_std":
            return torch.normal(make(mean, 0.0), make(std, -1.0))
        return torch.normal(make(mean, 0.0), make(std, 1.0) if isinstance(std, tuple) else std)
    return getattr(t, op)(*args)


def _run(torch, op, dtype, args, device):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result, err = _call(torch, op, dtype, args, device), None
        except Exception as e:  # the op's own error: what the CPU's is compared with
            result, err = None, e
    return result, err, [type(w.message).__name__ for w in seen]


def _outside(torch, op, args, result) -> str:
    """Where mytorch's draws leave the range the call asked for ("" when they do not)."""
    if result is None or result.numel() == 0 or result.dtype == torch.bool:
        return ""
    v = result.detach().cpu().double()
    if op == "random_" and args[1] is not None:
        lo, hi = args
        bad = (v < lo) | (v >= hi)
    elif op == "random_to":
        bad = (v < 0) | (v >= args[0])
    elif op == "uniform_" and all(math.isfinite(a) for a in args) and args[0] <= args[1]:
        bad = (v < args[0]) | (v > args[1])
    else:
        return ""
    return f"a draw outside the asked range: {float(v[bad][0])}" if bool(bad.any()) else ""


def _on_both(torch, call):
    """call(device) -> (result, error, warning categories) on the CPU, then on mytorch beside a bystander tensor:
    (want, got, the CPU warned, verdict), the verdict already decided when the two differ (a bystander changed,
    one raised, another exception class, other warnings) or both raised alike, else None."""
    torch.manual_seed(0)
    want, cpu_err, cpu_warns = call("cpu")
    bystander = torch.full((4096,), 3.25, device="mytorch")
    got, dev_err, dev_warns = call("mytorch")
    torch.mytorch.synchronize()
    verdict = None
    if not bool((bystander == 3.25).all()):
        verdict = "corruption", "a bystander tensor changed"
    elif (cpu_err is None) != (dev_err is None):
        cpu = type(cpu_err).__name__ + ": " + str(cpu_err)[:80] if cpu_err else "ok"
        dev = type(dev_err).__name__ + ": " + str(dev_err)[:80] if dev_err else "ok"
        verdict = "differs", f"CPU {cpu}, mytorch {dev}"
    elif cpu_err is not None and not isinstance(dev_err, type(cpu_err)):
        verdict = "differs", f"{type(dev_err).__name__} where the CPU raises {type(cpu_err).__name__}"
    elif sorted(cpu_warns) != sorted(dev_warns):
        verdict = "differs", f"warnings: the CPU {sorted(cpu_warns) or 'none'}, mytorch {sorted(dev_warns) or 'none'}"
    elif cpu_err is not None:
        verdict = "ok", ""
    return want, got, bool(cpu_warns), verdict


def run(torch, name: str):
    """One case: (verdict, detail)."""
    op, dtype, args = edges()[name]
    want, got, warned, verdict = _on_both(torch, lambda device: _run(torch, op, dtype, args, device))
    if verdict is not None:
        return verdict
    if got.shape != want.shape or got.dtype != want.dtype:
        return "differs", f"{tuple(got.shape)} {got.dtype} where the CPU gives {tuple(want.shape)} {want.dtype}"
    outside = "" if warned else _outside(torch, op, args, got)  # (a warned range rounds at the dtype)
    return ("corruption", outside) if outside else ("ok", "")


# ---- factory_out ---------------------------------------------------------------------------------------------------
# name -> (call(torch, out), the result's number of elements, whether the values are draws)
_FACTORIES = {
    "arange": (lambda t, out: t.arange(0, 6, out=out), 6, False),
    "arange_step": (lambda t, out: t.arange(1, 13, 2, out=out), 6, False),
    "range": (lambda t, out: t.range(0, 5, out=out), 6, False),
    "linspace": (lambda t, out: t.linspace(0, 5, 6, out=out), 6, False),
    "logspace": (lambda t, out: t.logspace(0, 2, 6, out=out), 6, False),
    "eye": (lambda t, out: t.eye(2, 3, out=out), 6, False),
    "full": (lambda t, out: t.full((6,), 3, out=out), 6, False),
    "zeros": (lambda t, out: t.zeros((6,), out=out), 6, False),
    "ones": (lambda t, out: t.ones((2, 3), out=out), 6, False),
    "empty": (lambda t, out: t.empty((6,), out=out), 6, True),
    "rand": (lambda t, out: t.rand((6,), out=out), 6, True),
    "randn": (lambda t, out: t.randn((2, 3), out=out), 6, True),
    "randint": (lambda t, out: t.randint(0, 5, (6,), out=out), 6, True),
    "randperm": (lambda t, out: t.randperm(6, out=out), 6, True),
}
_FACTORY_DTYPES = ("float32", "float64", "int64", "bfloat16", "complex64")


def _out(torch, kind: str, dtype, device):
    z = lambda *shape: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
    if kind == "reshaped":  # 6 elements, transposed: (2, 3) with strides (1, 2)
        return z(3, 2).t()
    if kind == "gapped":  # 6 elements with gaps, the 1-D shape
        return z(12)[::2]
    if kind == "overlapping":  # 6 elements sharing one
        return z(1).expand(6)
    return z(3)  # another number of elements: resized


_LIKE = {
    "zeros_like": lambda t, x: t.zeros_like(x),
    "ones_like": lambda t, x: t.ones_like(x),
    "full_like": lambda t, x: t.full_like(x, 7.0),
    "empty_like": lambda t, x: t.empty_like(x),
    "rand_like": lambda t, x: t.rand_like(x),
    "randn_like": lambda t, x: t.randn_like(x),
    "randint_like": lambda t, x: t.randint_like(x, 10, 100),
}
# (sizes, strides) of the like factories' inputs, filled before use: overlapping, gapped, permuted
_LIKE_INPUTS = {
    "dense": ((4, 3, 2), (10, 3, 1)),
    "zero_stride": ((4, 3, 2), (10, 0, 3)),
    "permuted": ((4, 3, 2), (10, 1, 2)),
    "overlapping": ((4, 3, 2), (10, 1, 1)),
    "broadcast": ((4, 1, 1, 2), (10, 0, 0, 2)),
    "overlapping_rows": ((4, 2, 3), (10, 3, 3)),
}


def _like_input(torch, kind: str, order: int, device):
    import itertools

    sizes, strides = _LIKE_INPUTS[kind]
    t = torch.empty_strided(sizes, strides, device=device).fill_(1.0)  # the fill must accept overlapping strides
    return t.permute(list(itertools.permutations(range(t.dim())))[order])


def factory_cases() -> dict[str, tuple]:
    import torch

    out = {}
    for fn in _LIKE:
        for kind, (sizes, _) in _LIKE_INPUTS.items():
            for order in range(math.factorial(len(sizes))):
                out[f"like:{fn}/{kind}/{order}"] = (fn, kind, order)
    for fn in _FACTORIES:
        for d in _FACTORY_DTYPES:
            if d == "complex64" and fn not in ("linspace", "logspace", "full", "zeros", "ones", "empty", "randn"):
                continue
            for kind in ("reshaped", "gapped", "overlapping", "small"):
                out[f"factory:{fn}/{d}/{kind}"] = (fn, d, kind)
    del torch
    return out


def _factory_run(torch, fn, dtype, kind, device):
    call = _FACTORIES[fn][0]
    out = _out(torch, kind, getattr(torch, dtype), device)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            call(torch, out)
            err = None
        except Exception as e:  # the call's own error: compared with the CPU's
            err = e
    return out, err, [type(w.message).__name__ for w in seen]


def _run_like(torch, fn, kind, order):
    results = []
    for device in ("cpu", "mytorch"):
        try:
            r = _LIKE[fn](torch, _like_input(torch, kind, order, device))
            results.append((tuple(r.shape), r.stride()))
        except Exception as e:  # the call's own error (or the input's fill): compared with the CPU's
            results.append(type(e).__name__)
    if results[0] != results[1]:
        return "differs", f"mytorch {results[1]}, the CPU {results[0]}"
    return "ok", ""


def run_factory(torch, name: str):
    if name.startswith("like:"):
        return _run_like(torch, *factory_cases()[name])
    fn, dtype, kind = factory_cases()[name]
    want, got, _, verdict = _on_both(torch, lambda device: _factory_run(torch, fn, dtype, kind, device))
    if verdict is not None:
        return verdict
    if got.shape != want.shape or got.stride() != want.stride():
        return (
            "differs",
            f"the out= ends {tuple(got.shape)} with strides {got.stride()}, the CPU's {tuple(want.shape)} with "
            f"{want.stride()}",
        )
    if _FACTORIES[fn][2]:
        return "ok", ""
    from .._tolerance import misalignment  # the one tolerance rule (the CPU's values as the reference)

    wrong = misalignment(got, want, what="the out='s values")
    return ("differs", wrong) if wrong else ("ok", "")
