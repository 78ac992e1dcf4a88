"""The fuzzer's hand-written bad inputs (issue 19): what OpInfo samples and error inputs do not try. Each case is a
function of a device that builds its inputs there and returns the result; the worker runs it on the CPU and on
mytorch and compares the exception class, or the values, as for an OpInfo case.

Families: indices out of range (past the end, negative, before the start, huge) for every indexing op; huge and
negative sizes; NaN and infinity through the ops that order, reduce or bin; integer overflow; tensors without
elements; resize_, set_ and as_strided misuse; out= of another dtype for the out= kernels no OpInfo sample
reaches."""

from __future__ import annotations

import torch
import torch.nn.functional as F

BIG = 2**62


def _index_ops():
    """Indexing ops as f(device, index) over a 3x3 float tensor, the index one int64 value."""

    def x(d):
        return torch.arange(9.0, device=d).reshape(3, 3)

    def idx(d, v, shape=(1, 3)):
        t = torch.zeros(shape, dtype=torch.long, device=d)
        t.view(-1)[0] = v
        return t

    ones = lambda d, *s: torch.ones(*s, device=d)  # noqa: E731
    return {
        "gather": lambda d, v: x(d).gather(0, idx(d, v)),
        "scatter_": lambda d, v: x(d).scatter_(0, idx(d, v), ones(d, 1, 3)),
        "scatter_value": lambda d, v: x(d).scatter(1, idx(d, v), 5.0),
        "scatter_add_": lambda d, v: x(d).scatter_add_(0, idx(d, v), ones(d, 1, 3)),
        "scatter_reduce_": lambda d, v: x(d).scatter_reduce_(0, idx(d, v), ones(d, 1, 3), "prod"),
        "take_along_dim": lambda d, v: torch.take_along_dim(x(d), idx(d, v), 1),
        "index_select": lambda d, v: x(d).index_select(1, idx(d, v, (2,))),
        "index_add_": lambda d, v: x(d).index_add_(0, idx(d, v, (1,)), ones(d, 1, 3)),
        "index_add_1d": lambda d, v: x(d)[0].index_add_(0, idx(d, v, (1,)), ones(d, 1)),
        "index_copy_": lambda d, v: x(d).index_copy_(1, idx(d, v, (1,)), ones(d, 3, 1)),
        "index_fill_": lambda d, v: x(d).index_fill_(0, idx(d, v, (2,)), -1.0),
        "index_put_": lambda d, v: x(d).index_put_((idx(d, v, (2,)),), ones(d, 3)),
        "index_put_accumulate": lambda d, v: x(d).index_put_((idx(d, v, (2,)),), ones(d, 3), accumulate=True),
        "getitem": lambda d, v: x(d)[idx(d, v, (2,))],
        "getitem_2d": lambda d, v: x(d)[idx(d, v, (2,)), idx(d, 0, (2,))],
        "setitem": lambda d, v: x(d).__setitem__(idx(d, v, (2,)), 7.0),
        "take": lambda d, v: x(d).take(idx(d, v, (2,))),
        "put_": lambda d, v: x(d).put_(idx(d, v, (2,)), ones(d, 2)),
        "put_accumulate": lambda d, v: x(d).put_(idx(d, v, (2,)), ones(d, 2), accumulate=True),
        "embedding": lambda d, v: F.embedding(idx(d, v, (2,)), x(d)),
        "embedding_bag": lambda d, v: F.embedding_bag(idx(d, v, (1, 2)), x(d)),
        "one_hot": lambda d, v: F.one_hot(idx(d, v, (2,)), 3),
        "nll_loss": lambda d, v: F.nll_loss(x(d), idx(d, v, (3,))),
        "cross_entropy": lambda d, v: F.cross_entropy(x(d), idx(d, v, (3,))),
        "bincount": lambda d, v: torch.bincount(idx(d, v, (2,))),
        "index_reduce_": lambda d, v: x(d).index_reduce_(0, idx(d, v, (1,)), ones(d, 1, 3), "amax"),
        "narrow": lambda d, v: x(d).narrow(0, v, 1),
        "select": lambda d, v: x(d).select(1, v),
    }


def _geometry(t):
    return torch.tensor([t.storage_offset(), t.numel(), t.untyped_storage().nbytes(), *t.shape, *t.stride()])


def _cases():
    cases = {}
    for name, f in _index_ops().items():
        for label, v in (("past_end", 3), ("last", -1), ("before_start", -4), ("huge", BIG)):
            cases[f"index/{name}/{label}"] = (lambda f, v: lambda d: f(d, v))(f, v)

    i32 = lambda d, *v: torch.tensor(v, dtype=torch.int32, device=d)  # noqa: E731
    i64 = lambda d, *v: torch.tensor(v, dtype=torch.int64, device=d)  # noqa: E731
    f32 = lambda d, *v: torch.tensor(v, dtype=torch.float32, device=d)  # noqa: E731
    nan, inf = float("nan"), float("inf")
    cases.update(
        {
            # huge and negative sizes
            "size/empty_huge": lambda d: torch.empty(BIG, device=d),
            "size/empty_negative": lambda d: torch.empty(-1, device=d),
            "size/zeros_overflowing_product": lambda d: torch.zeros(2**32, 2**32, device=d),
            "size/full_huge": lambda d: torch.full((2**40,), 1.0, device=d),
            "size/arange_huge": lambda d: torch.arange(0, 2**62, device=d),
            "size/expand_then_contiguous": lambda d: f32(d, 1).expand(2**40).contiguous(),
            "size/repeat_huge": lambda d: f32(d, 1, 2).repeat(2**40),
            "size/reshape_mismatch": lambda d: f32(d, 1, 2, 3).reshape(2, 2),
            "size/view_negative": lambda d: f32(d, 1, 2).view(-2),
            "size/randn_negative": lambda d: torch.randn(3, -2, device=d),
            "size/new_empty_huge": lambda d: f32(d, 1).new_empty((BIG, 4)),
            # NaN and infinity
            "nan/sort": lambda d: f32(d, 3, nan, -inf, inf, 1, nan).sort(),
            "nan/sort_descending": lambda d: f32(d, 3, nan, -inf, inf, 1, nan).sort(descending=True),
            "nan/topk": lambda d: f32(d, 3, nan, -inf, inf, 1).topk(2),
            "nan/argmax": lambda d: f32(d, 3, nan, inf).argmax(),
            "nan/max_dim": lambda d: f32(d, 3, nan, inf).max(0),
            "nan/amin": lambda d: f32(d, 3, nan, -inf).amin(),
            "nan/maximum": lambda d: torch.maximum(f32(d, 3, nan, 1), f32(d, nan, 1, inf)),
            "nan/clamp": lambda d: f32(d, nan, -inf, inf, 2).clamp(0, 1),
            "nan/clamp_nan_bound": lambda d: f32(d, 1, 2).clamp(min=nan),
            "nan/cumsum": lambda d: f32(d, 1, inf, -inf, 2).cumsum(0),
            "nan/cummax": lambda d: f32(d, 1, nan, 3, 2).cummax(0),
            "nan/softmax": lambda d: f32(d, 1, inf, 2).softmax(0),
            "nan/log_softmax_all_neg_inf": lambda d: f32(d, -inf, -inf).log_softmax(0),
            "nan/logsumexp": lambda d: f32(d, inf, inf, 1).logsumexp(0),
            "nan/unique": lambda d: f32(d, nan, 1, nan, 1).unique(),
            "nan/histc_inf_range": lambda d: f32(d, 1, inf).histc(bins=4),
            "nan/histc_nan": lambda d: f32(d, 1, nan).histc(bins=4, min=0, max=2),
            "nan/isin": lambda d: torch.isin(f32(d, nan, 1), f32(d, nan, 1)),
            "nan/nan_to_num": lambda d: f32(d, nan, inf, -inf).nan_to_num(),
            "nan/median": lambda d: f32(d, 3, nan, 1).median(),
            "nan/nanmedian": lambda d: f32(d, 3, nan, 1).nanmedian(),
            "nan/multinomial": lambda d: torch.multinomial(f32(d, 1, nan), 1),
            "nan/multinomial_inf": lambda d: torch.multinomial(f32(d, 1, inf), 1),
            "nan/multinomial_negative": lambda d: torch.multinomial(f32(d, 1, -1), 1),
            "nan/bernoulli_out_of_range": lambda d: torch.bernoulli(f32(d, 0.5, 2.0)),
            "nan/to_int": lambda d: f32(d, nan, inf, -inf).to(torch.int32).to(torch.float32).isfinite(),
            "nan/layer_norm": lambda d: F.layer_norm(f32(d, 1, nan, 2), (3,)),
            "nan/layer_norm_variance_overflow": lambda d: F.layer_norm(f32(d, 1e20, 2e20, 3e20, 4e20), (4,)),
            "nan/mm": lambda d: f32(d, nan, 1).reshape(1, 2) @ f32(d, 0, 1).reshape(2, 1),
            # integer overflow
            "int/add_wraps": lambda d: i32(d, 2**31 - 1) + i32(d, 1),
            "int/mul_wraps": lambda d: i64(d, 2**62) * i64(d, 4),
            "int/abs_min": lambda d: i32(d, -(2**31)).abs(),
            "int/neg_min": lambda d: -i64(d, -(2**63)),
            "int/sum_int8_promotes": lambda d: torch.full((300,), 100, dtype=torch.int8, device=d).sum(),
            "int/cumsum_int32": lambda d: torch.full((3,), 2**30, dtype=torch.int32, device=d).cumsum(0),
            "int/floor_divide_by_zero": lambda d: i64(d, 5, -5, 0) // i64(d, 0, 0, 0),
            "int/remainder_by_zero": lambda d: i32(d, 5, -5) % i32(d, 0, 0),
            "int/pow_overflow": lambda d: i64(d, 3).pow(50),
            "int/pow_negative_exponent": lambda d: i64(d, 2).pow(-1),
            "int/shift_past_width": lambda d: i32(d, 1) << i32(d, 40),
            "int/arange_int32_overflow": lambda d: torch.arange(2**31 - 2, 2**31 + 2, dtype=torch.int32, device=d),
            "int/uint8_sub_wraps": lambda d: torch.tensor([1], dtype=torch.uint8, device=d) - 2,
            "int/float_to_int8": lambda d: f32(d, 300.0, -300.0).to(torch.int8),
            "int/fill_out_of_range": lambda d: torch.zeros(2, dtype=torch.int8, device=d).fill_(1000),
            "int/randint_range": lambda d: torch.randint(0, 2**40, (4,), dtype=torch.int32, device=d),
            # tensors without elements
            "empty/sum": lambda d: torch.empty(0, 3, device=d).sum(0),
            "empty/mean": lambda d: torch.empty(0, device=d).mean(),
            "empty/max": lambda d: torch.empty(0, device=d).max(),
            "empty/max_dim": lambda d: torch.empty(0, 3, device=d).max(0),
            "empty/argmin": lambda d: torch.empty(0, device=d).argmin(),
            "empty/amax_other_dim": lambda d: torch.empty(0, 3, device=d).amax(1),
            "empty/mm_inner": lambda d: torch.empty(2, 0, device=d) @ torch.empty(0, 3, device=d),
            "empty/bmm": lambda d: torch.bmm(torch.empty(0, 2, 3, device=d), torch.empty(0, 3, 4, device=d)),
            "empty/cat": lambda d: torch.cat([torch.empty(0, device=d), f32(d, 1)]),
            "empty/cat_mismatch": lambda d: torch.cat([torch.empty(0, 2, device=d), f32(d, 1, 2, 3).reshape(1, 3)]),
            "empty/sort": lambda d: torch.empty(0, device=d).sort(),
            "empty/topk_k0": lambda d: f32(d, 1, 2).topk(0),
            "empty/topk_too_many": lambda d: f32(d, 1, 2).topk(3),
            "empty/softmax": lambda d: torch.empty(0, 4, device=d).softmax(1),
            "empty/cumsum": lambda d: torch.empty(0, device=d).cumsum(0),
            "empty/conv2d_batch": lambda d: F.conv2d(
                torch.empty(0, 1, 4, 4, device=d), torch.ones(2, 1, 3, 3, device=d)
            ),
            "empty/conv2d_kernel_too_big": lambda d: F.conv2d(
                torch.ones(1, 1, 2, 2, device=d), torch.ones(1, 1, 3, 3, device=d)
            ),
            "empty/layer_norm": lambda d: F.layer_norm(torch.empty(0, 4, device=d), (4,)),
            "empty/batch_norm": lambda d: F.batch_norm(torch.empty(0, 2, device=d), None, None, training=True),
            "empty/index_select": lambda d: f32(d, 1, 2).index_select(0, torch.empty(0, dtype=torch.long, device=d)),
            "empty/nonzero": lambda d: torch.empty(0, 3, device=d).nonzero(),
            "empty/median": lambda d: torch.empty(0, device=d).median(),
            "empty/kthvalue": lambda d: torch.empty(0, device=d).kthvalue(1),
            "empty/multinomial": lambda d: torch.multinomial(torch.empty(0, device=d), 1),
            "empty/std": lambda d: torch.empty(0, device=d).std(),
            "empty/prod": lambda d: torch.empty(0, device=d).prod(),
            # resize_, set_ and as_strided misuse
            "resize/negative": lambda d: f32(d, 1, 2).resize_(-1),
            "resize/huge": lambda d: f32(d, 1, 2).resize_(BIG),
            "resize/requires_grad": lambda d: f32(d, 1, 2).requires_grad_().resize_(4),
            "resize/of_a_view_grows_the_base": lambda d: (lambda b: (b[:2].resize_(8), b)[1])(f32(d, 1, 2, 3, 4)),
            "resize/expanded": lambda d: f32(d, 1).expand(4).resize_(8)[:1],  # past the first element: uninitialized
            "resize/as_smaller": lambda d: f32(d, 1, 2, 3).resize_as_(f32(d, 9)),
            "resize/to_zero_then_fill": lambda d: f32(d, 1, 2).resize_(0).fill_(3),
            # the storage grows (it is resizable), as on the CPU: its new bytes are uninitialized, so the geometry compares
            "set/offset_past_storage": lambda d: _geometry(
                torch.empty(0, device=d).set_(f32(d, 1, 2).untyped_storage(), 5, (2,))
            ),
            "set/size_past_storage": lambda d: _geometry(
                torch.empty(0, device=d).set_(f32(d, 1, 2).untyped_storage(), 0, (3,))
            ),
            "set/negative_stride": lambda d: torch.empty(0, device=d).set_(
                f32(d, 1, 2).untyped_storage(), 0, (2,), (-1,)
            ),
            "set/other_dtype_storage": lambda d: torch.empty(0, dtype=torch.int16, device=d).set_(
                f32(d, 1.5, 2).untyped_storage()
            ),
            "set/cpu_storage": lambda d: torch.empty(0, device=d).set_(torch.ones(2).untyped_storage()),
            "set/cpu_tensor": lambda d: torch.empty(0, device=d).set_(torch.ones(2)),
            "set/mytorch_storage_into_cpu": lambda d: torch.empty(0).set_(torch.ones(2, device=d).untyped_storage()),
            "set/then_write": lambda d: (
                lambda a: (torch.empty(0, device=d).set_(a.untyped_storage(), 1, (1,)).fill_(9), a)[1]
            )(f32(d, 1, 2, 3)),
            "as_strided/past_storage": lambda d: f32(d, 1, 2, 3).as_strided((4,), (1,)),
            "as_strided/offset_past_storage": lambda d: f32(d, 1, 2, 3).as_strided((1,), (1,), 3),
            "as_strided/negative_stride": lambda d: f32(d, 1, 2, 3).as_strided((2,), (-1,), 2),
            "as_strided/overlapping_write": lambda d: f32(d, 1, 2, 3).as_strided((3,), (0,)).add_(1),
            "copy/overlapping": lambda d: (lambda a: a[1:].copy_(a[:-1]))(f32(d, 1, 2, 3, 4)),
            "copy/shape_mismatch": lambda d: f32(d, 1, 2).copy_(f32(d, 1, 2, 3)),
            "copy/from_cpu_broadcast": lambda d: torch.zeros(2, 3, device=d).copy_(torch.arange(3.0)),
            "copy/complex_to_real": lambda d: torch.zeros(2, device=d).copy_(
                torch.ones(2, dtype=torch.complex64, device=d)
            ),
        }
    )
    return cases


def _out_cases():
    """out= of another dtype (float64, int32) for the native out= kernels that no OpInfo sample reaches, forward
    or backward (the aten_out variant covers the others)."""

    def x(d):
        return torch.arange(12.0, device=d).reshape(3, 4) / 10

    def long(d, *shape):
        return torch.zeros(*shape, dtype=torch.long, device=d)

    def scalar(d, v):
        return torch.tensor(v, device=d)

    ops = {
        "_addmm_activation": lambda d, o: torch.ops.aten._addmm_activation.out(
            x(d)[:, :3], x(d)[:, :2], x(d)[:2, :3], out=o
        ),
        "all.dims_out": lambda d, o: torch.ops.aten.all.dims_out(x(d), [0], False, out=o),
        "any.dims_out": lambda d, o: torch.ops.aten.any.dims_out(x(d), [0], False, out=o),
        "arange.start_out": lambda d, o: torch.ops.aten.arange.start_out(0, 5, 1, out=o),
        "clamp.out": lambda d, o: torch.clamp(x(d), 0.1, 0.5, out=o),
        "clamp_max.out": lambda d, o: torch.clamp_max(x(d), 0.5, out=o),
        "clamp_min.out": lambda d, o: torch.clamp_min(x(d), 0.5, out=o),
        "conj_physical.out": lambda d, o: torch.conj_physical(x(d).to(torch.complex64), out=o),
        "eye.m_out": lambda d, o: torch.eye(3, 4, out=o),
        "eye.out": lambda d, o: torch.eye(3, out=o),
        "isin.Scalar_Tensor_out": lambda d, o: torch.isin(1.0, x(d), out=o),
        "isin.Tensor_Scalar_out": lambda d, o: torch.isin(x(d), 0.1, out=o),
        "lerp.Tensor_out": lambda d, o: torch.lerp(x(d), x(d) * 2, x(d), out=o),
        "linspace.out": lambda d, o: torch.linspace(0, 1, 5, out=o),
        "log_sigmoid_backward.grad_input": lambda d, o: torch.ops.aten.log_sigmoid_backward.grad_input(
            x(d), x(d), x(d), grad_input=o
        ),
        "nll_loss2d_forward.output": lambda d, o: torch.ops.aten.nll_loss2d_forward.output(
            x(d).reshape(1, 3, 2, 2), long(d, 1, 2, 2), None, 1, -100, output=o, total_weight=torch.empty(0, device=d)
        ),
        "nll_loss2d_backward.grad_input": lambda d, o: torch.ops.aten.nll_loss2d_backward.grad_input(
            scalar(d, 1.0), x(d).reshape(1, 3, 2, 2), long(d, 1, 2, 2), None, 1, -100, scalar(d, 4.0), grad_input=o
        ),
        "scatter.value_reduce_out": lambda d, o: torch.ops.aten.scatter.value_reduce_out(
            x(d), 0, long(d, 1, 4), 2.0, reduce="add", out=o
        ),
        "sort.values_stable": lambda d, o: torch.sort(x(d), stable=True, out=(o, long(d, 0))),
        "upsample_nearest2d.out": lambda d, o: torch.ops.aten.upsample_nearest2d.out(
            x(d).reshape(1, 1, 3, 4), [6, 8], None, None, out=o
        ),
        "upsample_nearest2d_backward.grad_input": lambda d, o: torch.ops.aten.upsample_nearest2d_backward.grad_input(
            torch.ones(1, 1, 6, 8, device=d), [6, 8], [1, 1, 3, 4], None, None, grad_input=o
        ),
    }
    cases = {}
    for name, f in ops.items():
        for dt in (torch.float64, torch.int32):
            cases[f"out/{name}/{str(dt).split('.')[-1]}"] = (
                lambda f, dt: lambda d: f(d, torch.empty(0, dtype=dt, device=d))
            )(f, dt)
    return cases


BAD_INPUTS = {**_cases(), **_out_cases()}
# Cases whose accepted result draws from the generator: only shapes and dtypes compare.
DRAWS = {name for name in BAD_INPUTS if "multinomial" in name or "bernoulli" in name or "randint" in name}
# Cases that mix a mytorch tensor with a CPU storage: refused on mytorch, as CUDA refuses them, whatever the CPU does.
MIXED = {"set/cpu_storage", "set/cpu_tensor", "set/mytorch_storage_into_cpu"}
