"""What PyTorch's own tests caught by class (issue 49), each checked against the CPU's behaviour in the same
process: out= of the range factories, the random ops' argument checks and warnings, type-promotion refusals, unique
over NaN slices, check order, and writes into tensors whose elements share memory."""

import itertools
import warnings

import pytest
import torch

from mytorch.testing._compare import assert_aligned


def outcome(fn):
    """(result or None, exception or None, [warning categories and first words])."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result, err = fn(), None
        except Exception as e:  # noqa: BLE001 -- the call's own error: compared with the CPU's
            result, err = None, e
    # mytorch's own notice that an op ran through the CPU fallback is not one of the op's warnings
    seen = [w for w in seen if "through the fallback" not in str(w.message)]
    return result, err, sorted(f"{type(w.message).__name__}: {str(w.message)[:40]}" for w in seen)


def assert_same_outcome(call, check_values=True):
    """call(device) on the CPU and on mytorch: the same exception class and message, the same warnings; when both
    succeed, the tensors call returns (or the out= it wrote) with the CPU's sizes, strides, dtype and values."""
    want, cpu_err, cpu_warns = outcome(lambda: call("cpu"))
    got, dev_err, dev_warns = outcome(lambda: call("mytorch"))
    assert type(dev_err) is type(cpu_err), f"mytorch {dev_err!r}, the CPU {cpu_err!r}"
    if cpu_err is not None:
        assert str(dev_err).split("\n")[0] == str(cpu_err).split("\n")[0]
    assert dev_warns == cpu_warns
    if cpu_err is None and want is not None:
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert (g.shape, g.stride(), g.dtype) == (w.shape, w.stride(), w.dtype)
            assert g.device.type == "mytorch"
            if check_values:
                assert_aligned(g, w)
    return got


# ---- range factories: one out= rule (Note [Strided out=] in csrc/core/Checked.cpp) ------------------------------

RANGES = {
    "arange": lambda out: torch.arange(0, 6, out=out),
    "arange_step": lambda out: torch.arange(1, 13, 2, out=out),
    "range": lambda out: torch.range(0, 5, out=out),
    "linspace": lambda out: torch.linspace(0, 5, 6, out=out),
    "logspace": lambda out: torch.logspace(0, 2, 6, out=out),
}
OUTS = {
    "transposed": lambda dt, d: torch.zeros(3, 2, dtype=dt, device=d).t(),  # the example
    "gapped": lambda dt, d: torch.zeros(12, dtype=dt, device=d)[::2],
    "expanded": lambda dt, d: torch.zeros(1, dtype=dt, device=d).expand(6),
    "too_small": lambda dt, d: torch.zeros(3, dtype=dt, device=d),
    "too_large_2d": lambda dt, d: torch.zeros(4, 4, dtype=dt, device=d),
}


@pytest.mark.parametrize("out_kind", OUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bfloat16])
@pytest.mark.parametrize("fn", RANGES)
def test_range_factory_out_as_cpu(fn, dtype, out_kind):
    def call(device):
        out = OUTS[out_kind](dtype, device)
        RANGES[fn](out)
        return out

    assert_same_outcome(call)


def test_linspace_transposed_out_keeps_its_layout():
    """The issue's example, spelled out: the values go through the strided (2, 3) tensor the user gave."""
    o = torch.zeros(3, 2, device="mytorch").t()
    torch.linspace(0, 5, 6, out=o)
    assert o.shape == (2, 3) and o.stride() == (1, 2)
    assert o.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@pytest.mark.parametrize("fn", ["linspace", "logspace"])
def test_complex_range_into_strided_out(fn):
    assert_same_outcome(lambda d: RANGES[fn](torch.zeros(3, 2, dtype=torch.complex64, device=d).t()))


@pytest.mark.parametrize(
    "call",
    [
        lambda d, out: torch.eye(2, 3, out=out),
        lambda d, out: torch.full((6,), 3.0, out=out),
        lambda d, out: torch.zeros((2, 3), out=out),
        lambda d, out: torch.add(torch.ones(6, device=d), 1, out=out),
    ],
    ids=["eye", "full", "zeros", "add"],
)
def test_other_out_ops_follow_the_same_rule(call):
    for kind in ("transposed", "gapped", "too_small"):
        assert_same_outcome(lambda d: (lambda out: (call(d, out), out)[1])(OUTS[kind](torch.float32, d)))


# ---- the random ops' checks and warnings (Note [ATen's random checks] in csrc/aten/tensor/Random.cpp) -----------

RANDOM_CALLS = {
    "uniform_reversed": lambda d: torch.zeros(4, device=d).uniform_(1.0, 0.0),
    "uniform_beyond_range": lambda d: torch.zeros(4, device=d, dtype=torch.float16).uniform_(-70000.0, 70000.0),
    "uniform_nan": lambda d: torch.zeros(4, device=d).uniform_(float("nan"), 1.0),
    "random_int8_past_max": lambda d: torch.zeros(4, device=d, dtype=torch.int8).random_(0, 129),
    "random_int8_below_min": lambda d: torch.zeros(4, device=d, dtype=torch.int8).random_(-129, 0),
    "random_float16_past_digits": lambda d: torch.zeros(4, device=d, dtype=torch.float16).random_(0, 2**11 + 2),
    "random_empty_range": lambda d: torch.zeros(4, device=d, dtype=torch.int64).random_(5, 5),
    "random_to_zero": lambda d: torch.zeros(4, device=d).random_(0),
    "random_bool_to_3": lambda d: torch.zeros(4, device=d, dtype=torch.bool).random_(0, 3),
    "normal_negative_std": lambda d: torch.zeros(4, device=d).normal_(0.0, -1.0),
    "normal_tensors_mismatched": lambda d: torch.normal(torch.zeros(3, device=d), torch.ones(4, device=d)),
    "normal_tensors_same_numel": lambda d: torch.normal(torch.zeros(6, device=d), torch.ones(2, 3, device=d)),
    "normal_tensor_negative_std": lambda d: torch.normal(torch.zeros(3, device=d), -torch.ones(3, device=d)),
    "normal_mean_tensor_negative_std": lambda d: torch.normal(torch.zeros(3, device=d), -1.0),
    "bernoulli_p_above_1": lambda d: torch.zeros(4, device=d).bernoulli_(1.1),
    "exponential_negative": lambda d: torch.zeros(4, device=d).exponential_(-1.0),
    "geometric_zero": lambda d: torch.zeros(4, device=d).geometric_(0.0),
}


@pytest.mark.parametrize("name", RANDOM_CALLS)
def test_random_checks_as_cpu(name):
    """Raised (class and message) or warned as the CPU; a result of the CPU's shape and dtype (draws differ)."""
    assert_same_outcome(RANDOM_CALLS[name], check_values=False)


def test_random_draws_stay_in_the_range_asked():
    t = torch.empty(4096, device="mytorch", dtype=torch.int8).random_(-128, 128)
    assert int(t.min()) >= -128 and int(t.max()) <= 127
    assert len(t.unique()) > 200  # the whole range is reached, not a truncated one
    f = torch.empty(4096, device="mytorch", dtype=torch.float16).random_(0, 2**11)
    assert float(f.min()) >= 0 and float(f.max()) < 2**11


@pytest.mark.parametrize("fill", ["fill_", "zero_", "uniform_", "normal_", "random_", "bernoulli_"])
def test_fills_of_a_self_that_shares_memory_as_cpu(fill):
    """ATen's fill_ and zero_ build their iterator without the overlap check, so an expanded self is filled; the
    random fills check the dtype's arguments first, then refuse it."""
    args = {"fill_": (2.0,), "uniform_": (0.0, 1.0), "random_": (0, 5), "bernoulli_": (0.5,)}.get(fill, ())
    got = assert_same_outcome(
        lambda d: getattr(torch.zeros(1, device=d).expand(4), fill)(*args), check_values=fill in ("fill_", "zero_")
    )
    if got is not None:
        assert got.stride() == (0,)


def test_random_fill_with_overlapping_self_fills_every_element():
    """fill_ on overlapping strides (as PyTorch's like-factory test builds its inputs) writes every element."""
    t = torch.empty_strided((4, 3, 2), (10, 0, 3), device="mytorch").fill_(1.0)
    assert bool((t.cpu() == 1.0).all())


# ---- like factories over tensors whose elements share memory -----------------------------------------------------

LIKE = {
    "zeros_like": torch.zeros_like,
    "ones_like": torch.ones_like,
    "full_like": lambda t: torch.full_like(t, 7.0),
    "empty_like": torch.empty_like,
    "rand_like": torch.rand_like,
    "randn_like": torch.randn_like,
    "randint_like": lambda t: torch.randint_like(t, 10, 100),
}


def strided_inputs(device):
    """PyTorch's test_like_fn_stride_proparation_vs_tensoriterator_unary_op inputs: overlapping and gapped."""
    return [
        torch.empty_strided((4, 3, 2), (10, 3, 1), device=device).fill_(1.0),
        torch.empty_strided((4, 3, 2), (10, 0, 3), device=device).fill_(1.0),
        torch.empty_strided((4, 3, 2), (10, 1, 2), device=device).fill_(1.0),
        torch.empty_strided((4, 3, 2), (4, 2, 1), device=device)[:, :, ::2].fill_(1.0),
        torch.empty_strided((4, 3, 2), (10, 1, 1), device=device).fill_(1.0),
        torch.empty_strided((4, 1, 1, 2), (10, 0, 0, 2), device=device).fill_(1.0),
        torch.empty_strided((4, 2, 3), (10, 3, 3), device=device).fill_(1.0),
    ]


@pytest.mark.parametrize("fn", LIKE)
def test_like_factory_strides_as_cpu_and_as_exp(fn):
    for dev_t, cpu_t in zip(strided_inputs("mytorch"), strided_inputs("cpu")):
        for p in itertools.permutations(range(dev_t.dim())):
            got, want, te = LIKE[fn](dev_t.permute(p)), LIKE[fn](cpu_t.permute(p)), torch.exp(dev_t.permute(p))
            assert got.shape == want.shape and got.stride() == want.stride() == te.stride()


# ---- index writes into a self whose elements share memory ---------------------------------------------------------

EXPANDED_WRITES = {
    "index_fill_": lambda x, d: x.index_fill_(0, torch.tensor([2, 1], device=d), 1.0),
    "index_fill_tensor": lambda x, d: x.index_fill_(0, torch.tensor([2, 1], device=d), torch.tensor(1.0, device=d)),
    "index_put_": lambda x, d: x.index_put_((torch.tensor([2, 1], device=d),), torch.ones(2, device=d)),
    "setitem": lambda x, d: x.__setitem__(torch.tensor([2, 1], device=d), 2.0),
    "masked_fill_": lambda x, d: x.masked_fill_(torch.ones(6, dtype=torch.bool, device=d), 1.0),
    "masked_fill_tensor": lambda x, d: x.masked_fill_(torch.ones(6, dtype=torch.bool, device=d), torch.tensor(3.0)),
    "put_": lambda x, d: x.put_(torch.tensor([2, 1], device=d), torch.ones(2, device=d)),  # refused
    "index_copy_": lambda x, d: x.index_copy_(0, torch.tensor([2, 1], device=d), torch.ones(2, device=d)),  # refused
    "add_": lambda x, d: x.add_(1),  # refused
}


@pytest.mark.parametrize("name", EXPANDED_WRITES)
def test_writes_into_an_expanded_self_as_cpu(name):
    """ATen warns (deprecated) and writes for index_fill_, index_put_ and masked_fill_; refuses the others."""

    def call(device):
        x = torch.zeros(1, device=device).expand(6)
        EXPANDED_WRITES[name](x, device)
        return x

    assert_same_outcome(call)


# ---- type-promotion refusals --------------------------------------------------------------------------------------

PROMOTION = {
    "neg_complex_into_complex128": lambda d: torch.neg(
        torch.ones(3, dtype=torch.complex64, device=d), out=torch.empty(3, dtype=torch.complex128, device=d)
    ),
    "sgn_complex_into_complex128": lambda d: torch.sgn(
        torch.ones(3, dtype=torch.complex64, device=d), out=torch.empty(3, dtype=torch.complex128, device=d)
    ),
    "where_complex_into_complex128": lambda d: torch.where(
        torch.ones(3, dtype=torch.bool, device=d),
        torch.ones(3, dtype=torch.complex64, device=d),
        torch.zeros(3, dtype=torch.complex64, device=d),
        out=torch.empty(3, dtype=torch.complex128, device=d),
    ),
    "where_check_order": lambda d: torch.where(
        torch.ones(3, dtype=torch.int64, device=d),
        torch.ones(3, device=d),
        torch.zeros(3, device=d),
        out=torch.empty(3, dtype=torch.float64, device=d),
    ),
    "abs_complex_into_float": lambda d: torch.abs(
        torch.ones(3, dtype=torch.complex64, device=d), out=torch.empty(3, dtype=torch.float32, device=d)
    ),
    "abs_complex_into_complex128": lambda d: torch.abs(
        torch.ones(3, dtype=torch.complex64, device=d), out=torch.empty(3, dtype=torch.complex128, device=d)
    ),
    "neg_float_into_double": lambda d: torch.neg(
        torch.ones(3, device=d), out=torch.empty(3, dtype=torch.float64, device=d)
    ),
    "index_put_double_source": lambda d: torch.zeros(4, device=d).index_put_(
        (torch.tensor([1], device=d),), torch.ones(1, dtype=torch.float64, device=d)
    ),
    "index_put_accumulate_long_source": lambda d: torch.zeros(4, device=d).index_put_(
        (torch.tensor([1], device=d),), torch.ones(1, dtype=torch.int64, device=d), accumulate=True
    ),
    "setitem_half_source": lambda d: torch.zeros(4, device=d).__setitem__(
        torch.tensor([1], device=d), torch.ones(1, dtype=torch.float16, device=d)
    ),
    "put_double_source": lambda d: torch.zeros(4, device=d).put_(
        torch.tensor([1], device=d), torch.ones(1, dtype=torch.float64, device=d)
    ),
}
INDEX_DTYPES = {
    "index_select": lambda x, i: x.index_select(0, i),
    "take": lambda x, i: x.take(i),
    "put_": lambda x, i: x.put_(i, torch.ones(i.shape, device=x.device)),
    "index_fill_": lambda x, i: x.index_fill_(0, i, 1.0),
    "index_add": lambda x, i: x.index_add(0, i, torch.ones(i.shape, device=x.device)),
    "gather": lambda x, i: x.gather(0, i),
    "index": lambda x, i: x[i],
}


@pytest.mark.parametrize("name", PROMOTION)
def test_promotion_refusals_as_cpu(name):
    assert_same_outcome(PROMOTION[name])


@pytest.mark.parametrize("idtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.float32])
@pytest.mark.parametrize("op", INDEX_DTYPES)
def test_index_dtypes_as_cpu(op, idtype):
    assert_same_outcome(
        lambda d: INDEX_DTYPES[op](torch.arange(4.0, device=d), torch.tensor([1, 2], dtype=idtype, device=d))
    )


# ---- unique over slices with NaN (Note [unique(dim) over NaN]) ----------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1])
def test_unique_dim_with_nan_as_cpu(dim):
    nan = float("nan")
    x = torch.tensor([[1.0, nan], [1.0, nan], [0.0, 2.0], [nan, 1.0], [0.0, 2.0], [3.0, 1.0]])
    x = x if dim == 0 else x.t().contiguous()
    want = torch.unique(x, dim=dim, return_inverse=True, return_counts=True)
    got = torch.unique(x.to("mytorch"), dim=dim, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        assert g.device.type == "mytorch"
        assert torch.equal(g.cpu().nan_to_num(123.0), w.nan_to_num(123.0)) and torch.equal(g.cpu().isnan(), w.isnan())


def test_unique_dim_without_nan_stays_native():
    for x in (torch.tensor([[3, 1], [0, 2], [3, 1], [0, 1]]), torch.tensor([[3.0, 1.0], [0.0, 2.0], [3.0, 1.0]])):
        torch.mytorch.reset_fallback_stats()
        got = torch.unique(x.to("mytorch"), dim=0, return_counts=True)
        assert torch.mytorch.fallback_stats() == {}  # the native path: no CPU fallback without a NaN
        want = torch.unique(x, dim=0, return_counts=True)
        assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))


def test_unique_dim_with_nan_is_a_counted_fallback():
    torch.mytorch.reset_fallback_stats()
    torch.unique(torch.tensor([[float("nan"), 1.0]], device="mytorch"), dim=0)
    assert torch.mytorch.fallback_stats()["aten::unique_dim"]["calls"] == 1


# ---- check order ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes,dim,size,step",
    [([6], 1, 2, 0), ([6], 0, 2, 0), ([6], 0, -1, 1), ([6], 0, 2, -1), ([6], 5, 2, 1), ([6], 5, -1, 1), ([], 1, 1, 1)],
)
def test_unfold_backward_checks_in_atens_order(sizes, dim, size, step):
    def call(device):
        grad = torch.ones(3, 2, device=device) if sizes else torch.ones((), device=device)
        return torch.ops.aten.unfold_backward(grad, sizes, dim, size, step)

    assert_same_outcome(call)
