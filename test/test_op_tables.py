"""The op tables (kernels/include/mytorch/tables/*.def, Note [Op tables] in ew_ops.h): every row is registered for
the aten operator it names and runs on mytorch's kernels on the runtime under test, matching the CPU by the
alignment rule, with the fallback forbidden; the multi-tensor (`_foreach_*`) ops are the rows marked Foreach. The
main suite runs this on sim; scripts/test.sh runs it again on the emulated CUDA build (the `every_runtime` marker),
and scripts/gpu_verify.sh on a GPU, so each row's CUDA kernel runs too. A row without a functor does not compile
(test_build.py has that negative control)."""

import re

import pytest
import torch
import torch.nn.functional as F

import mytorch
from mytorch.testing._compare import assert_aligned

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

ROWS = mytorch._C._op_tables()


def _vjp(fn):
    """The backward row of `fn`, reached through autograd: (grad, x) -> d fn(x) / dx * grad."""

    def call(g, x):
        x = x.detach().requires_grad_()
        return torch.autograd.grad(fn(x), x, g)[0]

    return call


def _vjp_loss(loss):
    """A loss's backward row: (grad, input, target) -> the input's gradient."""

    def call(g, a, b):
        a = a.detach().requires_grad_()
        return torch.autograd.grad(loss(a, b), a, g.sum())[0]

    return call


def _probs(loss):
    return lambda a, b, *_: loss(torch.sigmoid(a), torch.sigmoid(b))


# The call of each row whose glue is Hand (csrc/aten has its own glue, with extra arguments); a Table row is called
# through its aten out= overload with the row's arity. Adding a Hand row adds a line here.
HAND = {
    "Add": lambda a, b: torch.add(a, b, alpha=2),
    "Sub": lambda a, b: torch.sub(a, b, alpha=0.5),
    "Pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
    "DivTrunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "Where": lambda a, b, c: torch.where(a > 0, b, c),
    "Lerp": lambda a, b, c: torch.lerp(a, b, 0.3),
    "Addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
    "Addcdiv": lambda a, b, c: torch.addcdiv(a, b, c.abs() + 0.5, value=0.5),
    "ClampTensor": lambda a, b, c: torch.clamp(a, min=-b.abs(), max=c.abs()),
    "ClampScalar": lambda a: a.clamp(-0.5, 0.5),
    "Neg": torch.neg,
    "NanToNum": lambda a: torch.nan_to_num(a / (a > 0), posinf=3.0),
    "IsNan": lambda a: torch.isnan(a.log()),
    "IsInf": lambda a: torch.isinf(a / (a > 0)),
    "IsFinite": lambda a: torch.isfinite(a / (a > 0)),
    "Angle": torch.angle,
    "FrexpMantissa": lambda a: torch.frexp(a).mantissa,
    "FrexpExponent": lambda a: torch.frexp(a).exponent.to(a.dtype),
    "Signbit": torch.signbit,
    "Polygamma": lambda a: torch.polygamma(2, a),
    "Logit": lambda a: torch.logit(torch.sigmoid(a), eps=0.2),
    "LogitBackward": _vjp(lambda x: torch.logit(x, 0.2)),
    "Heaviside": lambda a, b: torch.heaviside(a.round(), b),
    "Hardshrink": lambda a: F.hardshrink(a, 0.7),
    "Softshrink": lambda a: F.softshrink(a, 0.7),
    "Threshold": lambda a: F.threshold(a, 0.2, -3.0),
    "ThresholdBackward": _vjp(lambda x: F.threshold(x, 0.2, -3.0)),
    "Prelu": lambda a, b: torch.ops.aten._prelu_kernel(a, b),
    "PreluBackwardInput": lambda g, a, b: torch.ops.aten._prelu_kernel_backward(g, a, b)[0],
    "PreluBackwardWeight": lambda g, a: torch.ops.aten._prelu_kernel_backward(g, a, torch.ones_like(a))[1],
    "HardshrinkBackward": _vjp(lambda x: F.hardshrink(x, 0.7)),
    "SoftshrinkBackward": _vjp(lambda x: F.softshrink(x, 0.7)),
    "Gelu": F.gelu,
    "GeluTanh": lambda a: F.gelu(a, approximate="tanh"),
    "Softplus": lambda a: F.softplus(a, beta=2, threshold=1),
    "Elu": lambda a: F.elu(a, 0.7),
    "LeakyRelu": lambda a: F.leaky_relu(a, 0.1),
    "LogSigmoid": F.logsigmoid,
    "GeluBackward": _vjp(F.gelu),
    "GeluTanhBackward": _vjp(lambda x: F.gelu(x, approximate="tanh")),
    "MishBackward": _vjp(F.mish),
    "SoftplusBackward": _vjp(lambda x: F.softplus(x, beta=2, threshold=1)),
    "EluBackward": _vjp(lambda x: F.elu(x, 0.7)),
    "LeakyReluBackward": _vjp(lambda x: F.leaky_relu(x, 0.1)),
    "HardswishBackward": _vjp(F.hardswish),
    "HardtanhBackward": _vjp(lambda x: F.hardtanh(x, -0.5, 0.5)),
    "LogSigmoidBackward": _vjp(F.logsigmoid),
    "MseLoss": lambda a, b: F.mse_loss(a, b, reduction="none"),
    "SmoothL1Loss": lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5),
    "HuberLoss": lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.5),
    "BceLoss": _probs(lambda a, b: F.binary_cross_entropy(a, b, reduction="none")),
    "MseBackward": _vjp_loss(F.mse_loss),
    "SmoothL1Backward": _vjp_loss(lambda a, b: F.smooth_l1_loss(a, b, beta=0.5)),
    "HuberBackward": _vjp_loss(lambda a, b: F.huber_loss(a, b, delta=0.5)),
    "BceBackward": lambda g, a, b: _vjp_loss(F.binary_cross_entropy)(g, torch.sigmoid(a), torch.sigmoid(b)),
    # reductions and scans
    "Sum": lambda a: a.sum(1),
    "Mean": lambda a: a.mean(0),
    "Prod": lambda a: a.prod(1),
    "Max": lambda a: a.amax(1),
    "Min": lambda a: a.amin(0),
    "ArgMax": lambda a: a.argmax(1),
    "ArgMin": lambda a: a.argmin(0),
    "All": lambda a: (a > -1).all(1),
    "Any": lambda a: (a > 1).any(0),
    "CountNonzero": lambda a: torch.count_nonzero(a > 0, 1),
    "Norm": lambda a: torch.linalg.vector_norm(a, 3, 1),
    "Var": lambda a: a.var(1),
    "XorSum": lambda a: torch.hash_tensor(a, dim=1).view(torch.int64).to(a.dtype),
    "CumSum": lambda a: a.cumsum(1),
    "CumProd": lambda a: a.cumprod(1),
    "LogCumSumExp": lambda a: a.logcumsumexp(1),
    "CumMax": lambda a: (lambda r: torch.cat([r.values, r.indices.to(a.dtype)], 1))(a.cummax(1)),
    "CumMin": lambda a: (lambda r: torch.cat([r.values, r.indices.to(a.dtype)], 1))(a.cummin(1)),
}


def _inputs(row):
    """Operands of the row's dtype class on the CPU (integral for the integer-only classes)."""
    g = torch.Generator().manual_seed(len(row["name"]))
    if row["dtypes"] in ("Int", "IntBool"):
        return [torch.randint(0, 40, (5, 7), generator=g) for _ in range(row["arity"])]
    return [torch.randn(5, 7, generator=g) for _ in range(row["arity"])]


def _aten(row):
    if row["glue"] == "Op":  # one of mytorch's own operators (csrc/ops/PointwiseOps.cpp)
        return f"mytorch::{row['aten']}"
    return f"aten::{row['aten']}" + (f".{row['overload']}" if row["overload"] else "")


def _call(row, args):
    if row["glue"] == "Hand":
        return HAND[row["name"]](*args)
    if row["glue"] == "Op":  # the tensors in order, the scalars at their schema defaults (1.5 where none)
        op = getattr(torch.ops.mytorch, row["aten"])
        rest = [a for a in op.default._schema.arguments if not a.type.isSubtypeOf(torch._C.TensorType.get())]
        return op(*args, *(a.default_value if a.has_default_value() else 1.5 for a in rest))
    op = getattr(getattr(torch.ops.aten, row["aten"]), row["overload"])
    out = torch.empty(0, dtype=torch.bool if row["result"] == "Bool" else args[0].dtype, device=args[0].device)
    return op(*args, **{op._schema.arguments[-1].name: out})  # out=, grad_input=, ...


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['table']}-{r['name']}")
def test_row_is_registered_and_runs_natively(row):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(_aten(row), "PrivateUse1"), f"{_aten(row)} is not registered"
    assert row["glue"] != "Hand" or row["name"] in HAND, f"{row['name']}: a Hand row needs its call in HAND"
    args = _inputs(row)
    ref = _call(row, args)
    got = _call(row, [a.to("mytorch") for a in args])  # fallback mode error: a CPU fallback raises
    assert got.device.type == "mytorch"
    gold = _call(row, [a.double() if a.is_floating_point() else a for a in args]) if ref.is_floating_point() else None
    assert_aligned(got, ref, gold, row["name"])


def test_every_hand_call_belongs_to_a_row():
    assert set(HAND) <= {r["name"] for r in ROWS}, set(HAND) - {r["name"] for r in ROWS}


def test_foreach_ops_are_the_rows_marked_foreach():
    """Every functional and in-place overload of _foreach_<aten> for the rows marked Foreach (and clamp_min /
    clamp_max, maximum / minimum with a bound) is registered for the multi-tensor kernels, and no other."""
    bases = {r["aten"] for r in ROWS if r["foreach"]} | {"clamp_min", "clamp_max"}
    registered = set()
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith("aten::_foreach_") and torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
            registered.add(name)
    expected = set()
    for name in torch._C._dispatch_get_all_op_names():
        op, _, overload = name.partition(".")
        base = op[len("aten::_foreach_") :].rstrip("_")
        if op.startswith("aten::_foreach_") and base in bases and not overload.endswith("out"):
            expected.add(name)
    expected |= {"aten::_foreach_zero_", "aten::_foreach_copy_", "aten::_foreach_norm.Scalar"}
    assert registered == expected, (sorted(registered - expected), sorted(expected - registered))
    xs = [torch.randn(4, 3), torch.randn(70)]
    for base in sorted(
        bases
        - {
            "add",
            "sub",
            "mul",
            "div",
            "maximum",
            "minimum",
            "pow",
            "clamp_min",
            "clamp_max",
            "lerp",
            "addcmul",
            "addcdiv",
        }
    ):  # the unary ones, on the fast path
        fn = getattr(torch, f"_foreach_{base}")
        for r, t, g in zip(
            fn([x.abs() + 0.5 for x in xs]),
            fn([x.abs().to("mytorch") + 0.5 for x in xs]),
            fn([x.abs().double() + 0.5 for x in xs]),
        ):
            assert_aligned(t, r, g, f"_foreach_{base}")


# Note [Elementwise fast path]: a Table row's functional and in-place overloads, where ATen has a structured kernel
# for them, are registered beside its out= (csrc/aten/glue/PointwiseFast.cpp).
_FAST_OVERLOAD = {"out": "default", "Tensor_out": "Tensor", "OutTensor": "Tensor"}


def _structured(name):
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutogradNonFunctional")


def _fast_overloads(row):
    """(functional, in-place) OpOverloads of a Table row that has a structured functional kernel, else None."""
    if row["glue"] != "Table" or row["overload"] not in _FAST_OVERLOAD:
        return None
    overload = _FAST_OVERLOAD[row["overload"]]
    suffix = "" if overload == "default" else f".{overload}"
    if not _structured(f"aten::{row['aten']}{suffix}"):
        return None
    fn = getattr(getattr(torch.ops.aten, row["aten"]), overload)
    inplace = getattr(torch.ops.aten, row["aten"] + "_", None)
    ip = getattr(inplace, overload) if inplace is not None and _structured(f"aten::{row['aten']}_{suffix}") else None
    return fn, ip


FAST_ROWS = [r for r in ROWS if r["table"] == "pointwise" and _fast_overloads(r) is not None]


def _layouts(args):
    """The operands as the fast path takes them (contiguous, one size), and three ways it does not: one transposed,
    one broadcast along a dimension, and the first in float64 with the rest float32 (a promotion)."""
    first, rest = args[0], args[1:]
    return {
        "contiguous": args,
        "transposed": [first.t().contiguous().t(), *rest],
        "broadcast": [first, *(r[:1] for r in rest)] if rest else [first[:1].expand_as(first)],
        "promoted": _promoted(first, rest),
    }


def _promoted(first, rest):
    """A promotion: float64 with float32, int32 with int64 (binary); an integral input to a floating row (unary)."""
    if not first.is_floating_point():
        return [first.int(), *rest]
    return [first.double(), *rest] if rest else [(first * 5).round().int()]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast", "promoted"])
@pytest.mark.parametrize("row", FAST_ROWS, ids=lambda r: r["name"])
def test_functional_and_inplace_overloads_match_the_cpu(row, layout):
    """Results, dtypes, sizes and strides as the CPU's, on the fast path and off it; an in-place call as well, or
    ATen's error on both devices where the CPU refuses it (a promoted self)."""
    fn, ip = _fast_overloads(row)
    assert torch._C._dispatch_has_kernel_for_dispatch_key(fn.name(), "PrivateUse1"), fn.name()
    args = _layouts(_inputs(row))[layout]
    dev = [a.to("mytorch") for a in args]
    try:
        ref = fn(*args)
    except RuntimeError as e:  # refused on the CPU (an integral input to a float-only row): refused here too,
        torch.mytorch.set_fallback_mode("silent")  # by the CPU fallback the kernels leave such a call to
        try:
            with pytest.raises(RuntimeError, match=re.escape(str(e).split("\n")[0][:40])):
                fn(*dev)
        finally:
            torch.mytorch.set_fallback_mode("error")
        return
    got = fn(*dev)
    assert (got.dtype, got.shape, got.stride()) == (ref.dtype, ref.shape, ref.stride())
    wide = [a.double() if a.is_floating_point() else a for a in args]
    gold = fn(*wide) if ref.is_floating_point() and ref.dtype != torch.float64 else None
    assert_aligned(got, ref, gold, f"{row['name']} {layout}")
    if ip is None or layout == "broadcast" and len(args) == 1:
        return
    self_cpu, self_dev = args[0].clone(), dev[0].clone()
    try:
        ip(self_cpu, *args[1:])
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e).split("\n")[0][:40])):
            ip(self_dev, *dev[1:])
        return
    out = ip(self_dev, *dev[1:])
    assert out is self_dev
    gold = ip(args[0].double(), *wide[1:]) if self_cpu.dtype == torch.float32 else None
    assert_aligned(self_dev, self_cpu, gold, f"{row['name']}_ {layout}")


def test_fast_path_skips_the_structured_kernel_only_where_the_result_is_evident():
    """Negative control of the test above, which would pass if every call took the structured kernel: a contiguous
    call dispatches its op once and no empty (the fast path); a transposed one dispatches its op twice (the
    functional or in-place overload, then the out= one the structured kernel calls; the profiler names both alike)
    and, out of place, an empty."""
    from collections import Counter

    def dispatched(x):
        y = x.clone()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            torch.sin(x)
            torch.add(x, x, alpha=2)
            y.mul_(x)
        ops = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
        return Counter("empty" if name.startswith("aten::empty") else name for name in ops)

    x = torch.randn(8, 16, device="mytorch")
    fast = dispatched(x)
    assert (fast["aten::sin"], fast["aten::add"], fast["aten::mul_"], fast["empty"]) == (1, 1, 1, 0), fast
    slow = dispatched(x.t())
    assert (slow["aten::sin"], slow["aten::add"], slow["aten::mul"], slow["empty"]) == (2, 2, 1, 2), slow


def test_fast_inplace_refuses_a_partly_overlapping_operand_as_the_cpu():
    for device in ("cpu", "mytorch"):
        a = torch.arange(10.0, device=device)
        with pytest.raises(RuntimeError, match="unsupported operation: some elements of the input tensor"):
            a[1:].add_(a[:-1])
        assert torch.equal(a.cpu(), torch.arange(10.0)), "nothing written"
