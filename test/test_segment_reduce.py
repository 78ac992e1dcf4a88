"""torch.segment_reduce and its backward on the segment-reduction kernels (Note [Segment reduce],
kernels/include/mytorch/segment.h), with the fallback forbidden, on every runtime (the CUDA kernels on the emulated
build): against the CPU within the shared rule, the CPU's bits where both compute in the data's dtype, ATen's
refusals, and a float64 reference of the Note's rule for bounds ATen leaves undefined."""

import pytest
import torch
from conftest import at_sim_thread_counts

from mytorch.testing._compare import misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(31)
REDUCES = ["sum", "mean", "max", "min", "prod"]


def _dev(x):
    return x.to("mytorch")


def _problems(dev, ref, gold=None, what=""):
    """What differs between mytorch's outputs and the CPU's (aligned to the shared rule)."""
    out = []
    for d, r in zip(dev, ref):
        if d.device.type != "mytorch":
            out.append(f"{what}: an output on {d.device}")
        out.append(misalignment(d, r, gold, what))
    return [p for p in out if p]


def _segment_case(kind, axis):
    """Data with ties, zeros and a NaN in known segments, and its lengths or offsets (an empty segment included)."""
    data = torch.randn(7, 3, generator=g, dtype=torch.float64) if axis == 0 else torch.randn(2, 7, 3, generator=g)
    data = data.double()
    sel = (slice(None),) * axis
    data[sel + (1,)] = data[sel + (2,)]  # a tie inside the second segment
    data[sel + (4,)] = 0.0  # a zero (products' gradients)
    data[sel + (5, 0)] = float("nan")
    lengths = torch.tensor([1, 0, 2, 3, 1]) if axis == 0 else torch.tensor([[1, 0, 2, 3, 1], [2, 2, 0, 0, 3]])
    bounds = lengths if kind == "lengths" else torch.cat([torch.zeros_like(lengths[..., :1]), lengths.cumsum(-1)], -1)
    return data, bounds


def _forward_and_grad(x, reduce, kind, bounds, axis, initial, cot, unsafe=False):
    x = x.detach().requires_grad_()
    y = torch.segment_reduce(x, reduce, **{kind: bounds}, axis=axis, unsafe=unsafe, initial=initial)
    (gx,) = torch.autograd.grad(y, x, cot.to(y.device).to(y.dtype))
    return y.detach(), gx


@pytest.mark.parametrize("kind", ["lengths", "offsets"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_segment_reduce_forward_and_backward_match_the_cpu(kind, axis, dtype):
    data, bounds = _segment_case(kind, axis)
    for reduce in REDUCES:
        for initial in [None, 2.0]:
            what = f"segment_reduce {reduce} {kind} axis={axis} initial={initial} {dtype}"
            shape = torch.segment_reduce(data, reduce, **{kind: bounds}, axis=axis, initial=initial).shape
            cot = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
            ref = _forward_and_grad(data.to(dtype), reduce, kind, bounds, axis, initial, cot)
            out = _forward_and_grad(_dev(data.to(dtype)), reduce, kind, _dev(bounds), axis, initial, cot)
            gold = torch.segment_reduce(data, reduce, **{kind: bounds}, axis=axis, initial=initial)
            problems = _problems(out[:1], ref[:1], gold, what) + _problems(out[1:], ref[1:], None, what + " gradient")
            assert not problems, problems
            # the control: the case reaches the tie, zero and NaN paths of the gradient with non-zero values
            assert ref[1].nan_to_num().abs().sum() > 0, what


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_is_the_cpus_bits_and_the_gradient_too(dtype):
    """Both take a segment's positions in order in the data's dtype: the same bits, at sizes the sim splits over
    threads and blocks of the inner dimension (300 > its 256), and along a row (inner = 1)."""
    for shape, axis in [((3, 500, 300), 1), ((4000,), 0), ((64, 900), 1)]:
        data = torch.randn(shape, generator=g, dtype=dtype)
        n = shape[axis]
        cuts = torch.sort(torch.randint(0, n + 1, (40,), generator=g)).values
        offsets = torch.cat([torch.tensor([0]), cuts, torch.tensor([n])]).expand(*shape[:axis], 42).contiguous()
        for reduce in REDUCES:
            x = data.abs() * 0.01 + 1 if reduce == "prod" else data  # products that stay finite
            cot = torch.randn(torch.segment_reduce(x, reduce, offsets=offsets, axis=axis).shape, generator=g)
            ref = _forward_and_grad(x, reduce, "offsets", offsets, axis, None, cot.to(dtype))
            out = _forward_and_grad(_dev(x), reduce, "offsets", _dev(offsets), axis, None, cot.to(dtype))
            torch.testing.assert_close(out[0].cpu(), ref[0], rtol=0, atol=0, equal_nan=True, msg=str((shape, reduce)))
            problems = _problems(out[1:], ref[1:], None, f"{shape} {reduce} gradient")
            assert not problems, problems


def test_int32_lengths_and_offsets():
    data = torch.randn(9, 4, generator=g)
    for kw in (
        dict(lengths=torch.tensor([2, 0, 7], dtype=torch.int32)),
        dict(offsets=torch.tensor([0, 3, 3, 9], dtype=torch.int32)),
    ):
        for reduce in REDUCES:
            want = torch.segment_reduce(data, reduce, **kw)
            got = torch.segment_reduce(_dev(data), reduce, **{k: _dev(v) for k, v in kw.items()})
            assert torch.equal(got.cpu().nan_to_num(7.0), want.nan_to_num(7.0)), (reduce, kw)


def test_segment_reduce_skips_positions_outside_every_segment():
    """Under unsafe=True lengths may stop short of the axis and offsets start past 0: those positions (a NaN among
    them) change no segment and get no gradient, as on the CPU."""
    x = torch.randn(9, 4, generator=g)
    x[0, 1] = x[8, 2] = float("nan")
    for kw in (dict(lengths=torch.tensor([2, 3])), dict(offsets=torch.tensor([2, 4, 7]))):
        kind, bounds = next(iter(kw.items()))
        for reduce in REDUCES:
            cot = torch.randn(2, 4, generator=g)
            want = _forward_and_grad(x, reduce, kind, bounds, 0, None, cot, unsafe=True)
            got = _forward_and_grad(_dev(x), reduce, kind, _dev(bounds), 0, None, cot, unsafe=True)
            for u, v in zip(got, want):
                assert torch.equal(u.cpu().nan_to_num(7.0), v.nan_to_num(7.0)), (reduce, kw)


def _reference(x, reduce, offsets, initial):
    """Note [Segment reduce]'s rule in float64 for a 1-D x and raw offsets: boundaries as a running maximum, read
    within the axis; a mean divides by the boundaries' difference."""
    b = torch.cummax(offsets, 0).values.tolist()
    out = []
    for s in range(len(b) - 1):
        lo, hi = min(max(b[s], 0), x.numel()), min(max(b[s + 1], 0), x.numel())
        vals = x[lo : max(lo, hi)].double()
        init = {"max": -float("inf"), "min": float("inf"), "prod": 1.0}.get(reduce, 0.0)
        acc = torch.tensor(init if initial is None else initial, dtype=torch.float64)
        for v in vals:
            if reduce in ("sum", "mean"):
                acc = acc + v
            elif reduce == "prod":
                acc = acc * v
            else:
                acc = v if v.isnan() else (torch.maximum if reduce == "max" else torch.minimum)(acc, v)
        n = b[s + 1] - b[s]
        if reduce == "mean":
            acc = (
                acc / n if n > 0 else (acc if initial is not None else torch.tensor(float("nan"), dtype=torch.float64))
            )
        out.append(acc)
    return torch.stack(out)


def test_unsafe_bounds_out_of_order_or_out_of_range_stay_inside_the_data():
    """Offsets that decrease or leave the axis (ATen's CPU kernel refuses a negative length only in the forward and
    reads past the data for the others): no read or write leaves the row, the result is the Note's rule, and the
    gradient is finite where the rule's segments are."""
    x = torch.randn(10, generator=g, dtype=torch.float64)
    for raw in ([0, 6, 3, 8, 10], [-5, 2, 2, 40], [4, 1, 0, 12], [3, 3]):
        offsets = torch.tensor(raw)
        for reduce in REDUCES:
            for initial in (None, 1.5):
                d = _dev(x).requires_grad_()
                got = torch.segment_reduce(d, reduce, offsets=_dev(offsets), unsafe=True, initial=initial)
                want = _reference(x, reduce, offsets, initial)
                assert torch.allclose(got.detach().cpu(), want, equal_nan=True), (raw, reduce, initial)
                (gd,) = torch.autograd.grad(got, d, torch.ones_like(got))
                assert gd.shape == x.shape, (raw, reduce)


@pytest.mark.skipif(torch.mytorch.runtime() != "sim", reason="the sim's thread split (test_sim_parallel's rule)")
def test_results_do_not_depend_on_the_sim_thread_count():
    x = _dev(torch.randn(6, 400, 300, generator=g))
    offsets = _dev(torch.tensor([0, 10, 10, 150, 399, 400]).expand(6, 6).contiguous())

    def work():
        outs = []
        for reduce in REDUCES:
            a = x.clone().requires_grad_()
            y = torch.segment_reduce(a, reduce, offsets=offsets, axis=1)
            outs += [y.detach().cpu(), torch.autograd.grad(y, a, y.detach().flip(0))[0].cpu()]
        return outs

    runs = at_sim_thread_counts(work)
    for k in (2, 4):
        assert all(torch.equal(u.nan_to_num(7.0), v.nan_to_num(7.0)) for u, v in zip(runs[k], runs[1])), k


def test_segment_reduce_keeps_atens_refusals():
    data = torch.randn(6, 2, generator=g)
    for bad, message in [
        (dict(lengths=torch.tensor([2, 2])), None),  # lengths do not cover the axis
        (dict(lengths=torch.tensor([7, -1])), "negative"),
    ]:
        with pytest.raises(RuntimeError) as cpu:
            torch.segment_reduce(data, "sum", **bad)
        with pytest.raises(RuntimeError) as dev:
            torch.segment_reduce(_dev(data), "sum", **{k: _dev(v) for k, v in bad.items()})
        if message:
            assert message in str(cpu.value) and message in str(dev.value)
    for dtype in (torch.float32, torch.int16):  # the CPU dispatches int32 and int64 lengths only
        with pytest.raises(RuntimeError):
            torch.segment_reduce(data, "sum", lengths=torch.tensor([3, 3], dtype=dtype))
        with pytest.raises(RuntimeError, match="int32 or int64"):
            torch.segment_reduce(_dev(data), "sum", lengths=_dev(torch.tensor([3, 3], dtype=dtype)))
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.segment_reduce(torch.ones(4, dtype=torch.int64, device="mytorch"), "sum", lengths=_dev(torch.tensor([4])))


def test_bad_bounds_and_gradients_raise_and_leave_the_inputs_alone():
    """Lengths whose leading dimensions are not the data's, or a gradient of the wrong size, are refused with a
    message, not read past their end."""
    data = _dev(torch.randn(3, 8, 2, generator=g))
    keep = data.cpu()
    with pytest.raises(RuntimeError, match="leading dimensions"):
        torch.segment_reduce(data, "sum", lengths=_dev(torch.tensor([[8], [8]])), axis=1, unsafe=True)
    lengths = _dev(torch.tensor([[3, 5]] * 3))
    out = torch.segment_reduce(data, "sum", lengths=lengths, axis=1)
    with pytest.raises(RuntimeError, match="expected grad and output of 12 elements"):
        torch.ops.aten._segment_reduce_backward(out[:, :1], out, data, "sum", lengths=lengths, axis=1)
    assert torch.equal(data.cpu(), keep)
