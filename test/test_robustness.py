"""Nothing a user holds is silently corrupted (issue 19): the one check path of the native kernels (Note [One
check path for native ops] in csrc/core/Checked.h) refuses tensors on another device, written tensors whose
elements share memory or that partly overlap an input, and out= tensors of the wrong dtype, with PyTorch's
exception and message; non-contiguous out= tensors are written through their strides and nothing else they
share memory with changes."""

import pytest
import torch
import torch.nn.functional as F

D = "mytorch"
SAME_DEVICE = "Expected all tensors to be on the same device"
g = torch.Generator().manual_seed(0)


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


A, B = r(4, 4), r(4, 4)
IMG, W = r(2, 3, 8, 8), r(5, 3, 3, 3)
IDX = torch.tensor([0, 2, 3])

# (name, f(x on the device, cpu_or_other)) -> must raise "same device"; the first argument is on mytorch.
MIXED = {
    "mm": lambda d, o: torch.mm(A.to(d), B.to(o)),
    "matmul": lambda d, o: A.to(d) @ B.to(o),
    "bmm": lambda d, o: torch.bmm(A.to(d)[None], B.to(o)[None]),
    "mv": lambda d, o: torch.mv(A.to(d), B[0].to(o)),
    "addmm": lambda d, o: torch.addmm(B[0].to(d), A.to(d), B.to(o)),
    "dot": lambda d, o: torch.dot(A[0].to(d), B[0].to(o)),
    "linear": lambda d, o: F.linear(A.to(d), B.to(o)),
    "conv2d": lambda d, o: F.conv2d(IMG.to(d), W.to(o)),
    "layer_norm": lambda d, o: F.layer_norm(A.to(d), (4,), B[0].to(o)),
    "rms_norm": lambda d, o: F.rms_norm(A.to(d), (4,), B[0].to(o)),
    "group_norm": lambda d, o: F.group_norm(IMG.to(d), 3, torch.ones(3).to(o)),
    "batch_norm": lambda d, o: F.batch_norm(IMG.to(d), torch.zeros(3).to(o), torch.ones(3).to(o)),
    "cross_entropy": lambda d, o: F.cross_entropy(A.to(d), IDX[:1].expand(4).to(o)),
    "nll_loss": lambda d, o: F.nll_loss(A.to(d), IDX[:1].expand(4).to(o)),
    "index_select": lambda d, o: A.to(d).index_select(0, IDX.to(o)),
    "gather": lambda d, o: A.to(d).gather(0, IDX[None].to(o)),
    "scatter_src": lambda d, o: A.to(d).scatter_(0, IDX[None].to(d), B[:1, :3].to(o)),
    "embedding": lambda d, o: F.embedding(IDX.to(d), B.to(o)),
    "masked_select": lambda d, o: A.to(d).masked_select((B > 0).to(o)),
    "take": lambda d, o: A.to(d).take(IDX.to(o)),
    "sort_out": lambda d, o: torch.sort(A.to(d), out=(torch.empty(0).to(o), torch.empty(0, dtype=torch.long).to(d))),
    # ops whose check is TensorIterator's (device_check: NoCheck): CPU scalars may come in, an out= elsewhere may not
    "sum_out": lambda d, o: torch.sum(A.to(d), 1, out=torch.empty(0).to(o)),
    "mean_out": lambda d, o: torch.mean(A.to(d), 1, out=torch.empty(0).to(o)),
    "var_out": lambda d, o: torch.var(A.to(d), 1, out=torch.empty(0).to(o)),
    "cumsum_out": lambda d, o: torch.cumsum(A.to(d), 1, out=torch.empty(0).to(o)),
    "max_dim_out": lambda d, o: torch.max(
        A.to(d), 1, out=(torch.empty(0).to(o), torch.empty(0, dtype=torch.long).to(d))
    ),
    "min_dim_indices_out": lambda d, o: torch.min(
        A.to(d), 1, out=(torch.empty(0).to(d), torch.empty(0, dtype=torch.long).to(o))
    ),
    "add_scalar_out": lambda d, o: torch.add(A.to(d), torch.tensor(2.0), out=torch.empty(0).to(o)),
    "index_out": lambda d, o: torch.index_select(A.to(d), 0, IDX.to(d), out=torch.empty(0).to(o)),
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_tensors_on_another_device_are_refused(name):
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        MIXED[name](D, "cpu")


def test_tensors_on_another_mytorch_device_are_refused(two_devices):
    d0, d1 = two_devices
    for name in ("mm", "index_select", "embedding", "layer_norm", "sum_out", "max_dim_out"):
        with pytest.raises(RuntimeError, match=SAME_DEVICE):
            MIXED[name](d0, d1)


def test_cpu_scalars_stay_accepted_where_cuda_accepts_them():
    x = A.to(D)
    assert torch.equal((x + torch.tensor(2.0)).cpu(), A + 2)
    assert torch.equal(torch.where(x > 0, x, torch.tensor(0.0)).cpu(), torch.where(A > 0, A, torch.tensor(0.0)))
    assert torch.equal(x[IDX].cpu(), A[IDX])  # indices may live on the CPU (index and index_put_)
    assert torch.equal(torch.sum(x, 1, out=torch.empty(0, device=D)).cpu(), A.sum(1))
    cpu = torch.zeros(4, 4)
    assert torch.equal(cpu.copy_(x), A)  # an in-place self elsewhere is copy_'s point


EXPANDED = {
    "cumsum": lambda x, out: torch.cumsum(x, 0, out=out),
    "softmax": lambda x, out: torch.softmax(x, 0, out=out),
    "gather": lambda x, out: torch.gather(x, 0, torch.zeros(3, dtype=torch.long, device=x.device), out=out),
    "index_select": lambda x, out: torch.index_select(x, 0, torch.zeros(3, dtype=torch.long, device=x.device), out=out),
    "take": lambda x, out: torch.take(x, torch.zeros(3, dtype=torch.long, device=x.device), out=out),
    "random_": lambda x, out: out.random_(0, 5),
    "uniform_": lambda x, out: out.uniform_(),
    "exp": lambda x, out: torch.exp(x, out=out),
}


@pytest.mark.parametrize("name", sorted(EXPANDED))
def test_expanded_outputs_are_refused_like_the_cpu(name):
    for dev in ("cpu", D):
        x = torch.arange(3.0, device=dev)
        out = torch.zeros(1, device=dev).expand(3)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            EXPANDED[name](x, out)


def test_partial_overlap_of_output_and_input_is_refused_like_the_cpu():
    for dev in ("cpu", D):
        x = torch.arange(8.0, device=dev)
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            x[1:].copy_(x[:-1])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            torch.exp(x[:6], out=x[2:])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            torch.index_select(x[:6].view(2, 3), 0, torch.tensor([1, 0], device=dev), out=x[1:7].view(2, 3))
        assert torch.equal(x.cpu(), torch.arange(8.0))


STRIDED_OUT = {
    "softmax": lambda x, out: torch.softmax(x, 1, out=out),
    "log_softmax": lambda x, out: torch.log_softmax(x, 1, out=out),
    "zeros": lambda x, out: torch.zeros(4, 3, out=out),
    "ones": lambda x, out: torch.ones(4, 3, out=out),
    "full": lambda x, out: torch.full((4, 3), 7.0, out=out),
    "mm": lambda x, out: torch.mm(x, x.t() @ x, out=out),
    "index_select": lambda x, out: torch.index_select(x, 0, torch.tensor([3, 2, 1, 0], device=x.device), out=out),
    "cumsum": lambda x, out: torch.cumsum(x, 0, out=out),
    "tril": lambda x, out: torch.tril(x, out=out),
    "gather": lambda x, out: torch.gather(x, 1, torch.tensor([[2, 1, 0]] * 4, device=x.device), out=out),
    "sort": lambda x, out: torch.sort(x, 1, out=(out, torch.empty(4, 3, dtype=torch.long, device=x.device))),
    "amax": lambda x, out: torch.amax(x, 1, keepdim=True, out=out[:, :1]),
    "add": lambda x, out: torch.add(x, 1, out=out),
}


@pytest.mark.parametrize("name", sorted(STRIDED_OUT))
def test_non_contiguous_outputs_are_written_through_their_strides(name):
    x = r(4, 3)
    base_cpu = torch.full((4, 6), -5.0)
    STRIDED_OUT[name](x, base_cpu[:, ::2])
    base = torch.full((4, 6), -5.0, device=D)
    STRIDED_OUT[name](x.to(D), base[:, ::2])
    assert torch.equal(base.cpu()[:, 1::2], torch.full((4, 3), -5.0))  # the gaps are the user's
    torch.testing.assert_close(base.cpu(), base_cpu)


def test_fallback_writes_a_strided_out_through_its_strides():
    """narrow_copy has no native kernel, and its CPU kernel writes an out= as if it were contiguous: the fallback
    hands it an empty host tensor (sim and cuda alike) and copies the result through the out='s strides."""
    x = r(4, 3)
    base = torch.full((4, 6), -5.0, device=D)
    torch.narrow_copy(x.to(D), 0, 1, 2, out=base[:2, ::2])
    assert torch.equal(base.cpu()[:2, ::2], x[1:3])
    assert torch.equal(base.cpu()[:, 1::2], torch.full((4, 3), -5.0)) and torch.equal(
        base.cpu()[2:], torch.full((2, 6), -5.0)
    )


WRONG_DTYPE = {
    "gather": lambda x, out: torch.gather(x, 0, torch.zeros(1, 4, dtype=torch.long, device=x.device), out=out),
    "take": lambda x, out: torch.take(x, torch.tensor([0, 5], device=x.device), out=out),
    "take_along_dim": lambda x, out: torch.take_along_dim(
        x, torch.zeros(1, 4, dtype=torch.long, device=x.device), 0, out=out
    ),
    "sort": lambda x, out: torch.sort(x, out=(out, torch.empty(0, dtype=torch.long, device=x.device))),
    "topk": lambda x, out: torch.topk(x, 2, out=(out, torch.empty(0, dtype=torch.long, device=x.device))),
    "amax": lambda x, out: torch.amax(x, 1, out=out),
    "amin": lambda x, out: torch.amin(x, 1, out=out),
    "tril": lambda x, out: torch.tril(x, out=out),
    "index_add": lambda x, out: torch.index_add(x, 0, torch.tensor([0], device=x.device), x[:1], out=out),
    "mm": lambda x, out: torch.mm(x, x, out=out),
    "softmax": lambda x, out: torch.softmax(x, 1, out=out),
    "nonzero": lambda x, out: torch.nonzero(x, out=out.int()),
    # found by the fuzzer's aten_out variant (out= of the aten calls an OpInfo sample makes)
    "argmax": lambda x, out: torch.argmax(x, 1, out=out),
    "max.dim": lambda x, out: torch.max(x, 1, out=(out, torch.empty(0, dtype=torch.long, device=x.device))),
    "min.dim_indices": lambda x, out: torch.min(x, 1, out=(torch.empty(0, device=x.device), out)),
    "any": lambda x, out: torch.any(x, 1, out=out),
    "all": lambda x, out: torch.all(x, out=out),
    "sum_named_dtype": lambda x, out: torch.sum(x, 1, dtype=torch.float32, out=out),
    "cumsum_named_dtype": lambda x, out: torch.cumsum(x, 1, dtype=torch.float32, out=out),
    "vector_norm": lambda x, out: torch.linalg.vector_norm(x, out=out),
    "max_pool2d": lambda x, out: torch.ops.aten.max_pool2d_with_indices.out(
        x.reshape(1, 1, *x.shape),
        [2, 2],
        [2, 2],
        [0, 0],
        [1, 1],
        False,
        out=out,
        indices=torch.empty(0, dtype=torch.long, device=x.device),
    ),
    "upsample_bilinear2d": lambda x, out: torch.ops.aten.upsample_bilinear2d.out(
        x.reshape(1, 1, *x.shape), [6, 8], False, None, None, out=out
    ),
    "nll_loss_forward": lambda x, out: torch.ops.aten.nll_loss_forward.output(
        x,
        torch.zeros(x.shape[0], dtype=torch.long, device=x.device),
        None,
        1,
        -100,
        output=out,
        total_weight=torch.empty(0, device=x.device),
    ),
    "binary_cross_entropy_backward": lambda x, out: torch.ops.aten.binary_cross_entropy_backward.grad_input(
        x.sigmoid(), x.sigmoid(), x.sigmoid(), None, 1, grad_input=out
    ),
    "index": lambda x, out: torch.ops.aten.index.Tensor_out(x, [torch.tensor([0, 1], device=x.device)], out=out),
    "huber_loss_backward": lambda x, out: torch.ops.aten.huber_loss_backward.out(x, x, x * 2, 1, 1.0, grad_input=out),
}


@pytest.mark.parametrize("name", sorted(WRONG_DTYPE))
def test_wrong_dtype_outputs_are_refused_like_the_cpu(name):
    x = A
    for dev in ("cpu", D):
        out = torch.empty(0, dtype=torch.float64, device=dev)
        with pytest.raises(RuntimeError):
            WRONG_DTYPE[name](x.to(dev), out)
        assert out.numel() == 0


def test_the_check_path_reports_the_operator():
    with pytest.raises(RuntimeError, match=r"when checking arguments for mm\.out"):
        torch.mm(A.to(D), B)


_INDEX_OPS = {
    "gather": lambda t, b: t.gather(0, b),
    "scatter_": lambda t, b: t.clone().scatter_(0, b, torch.ones(1, 3, device=t.device)),
    "scatter_add_": lambda t, b: t.clone().scatter_add_(0, b, torch.ones(1, 3, device=t.device)),
    "scatter_reduce_": lambda t, b: t.clone().scatter_reduce_(
        0, b, torch.ones(1, 3, device=t.device), "amax", include_self=False
    ),
    "take_along_dim": lambda t, b: torch.take_along_dim(t, b, 0),
    "index_select": lambda t, b: t.index_select(0, b[0, :1]),
    "index_add_": lambda t, b: t.clone().index_add_(0, b[0, :1], torch.ones(1, 3, device=t.device)),
    "index_add_1d": lambda t, b: t[0].clone().index_add_(0, b[0, :1], torch.ones(1, device=t.device)),
    "index_copy_": lambda t, b: t.clone().index_copy_(0, b[0, :1], torch.ones(1, 3, device=t.device)),
    "embedding": lambda t, b: torch.nn.functional.embedding(b[0], t),
    "one_hot": lambda t, b: torch.nn.functional.one_hot(b[0], 3),
    "getitem": lambda t, b: t[b[0]],
    "index_put_": lambda t, b: t.clone().index_put_((b[0],), torch.ones(3, device=t.device)),
    "index_fill_": lambda t, b: t.clone().index_fill_(0, b[0, :1], 1.0),
    "take": lambda t, b: t.take(b[0] * 3),
    "put_": lambda t, b: t.clone().put_(b[0] * 3, torch.ones(3, device=t.device)),
}


@pytest.mark.parametrize("index", [5, -1, -4])
def test_bad_indices_raise_the_cpus_exception_class(index):
    """An index past the end, a negative one (which the gather/scatter family, index_select, index_add,
    index_copy, embedding and one_hot refuse, and indexing, take, put and index_fill count from the end) and
    one before the start: the CPU's result, or its exception class."""
    x, bad = torch.arange(9.0).reshape(3, 3), torch.tensor([[index, 0, 0]])
    for name, f in _INDEX_OPS.items():
        results = []
        for dev in ("cpu", D):
            try:
                results.append(f(x.to(dev), bad.to(dev)).cpu())
            except (IndexError, RuntimeError) as e:
                results.append(type(e))
        if isinstance(results[0], torch.Tensor):
            assert isinstance(results[1], torch.Tensor) and torch.equal(results[0], results[1]), (name, results)
        else:
            assert results[0] is results[1], (name, index, results)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x.to(D).gather(0, torch.tensor([[5, 0, 0]], device=D))
    # An in-place scatter with a bad index raises before it returns; which of the other elements it wrote by then
    # is unspecified (the CPU writes those before the bad index; a GPU's threads may write any of them).
    for dev in ("cpu", D):
        with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 0 with size 3"):
            torch.zeros(3, 3, device=dev).scatter_reduce_(
                0, torch.tensor([[0, -1, 0]], device=dev), torch.ones(1, 3, device=dev), "amax", include_self=False
            )


def test_put_is_refused_in_deterministic_mode():
    x = torch.zeros(4, device=D)
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="put_ does not have a deterministic implementation"):
            x.put_(torch.tensor([0, 0], device=D), torch.tensor([1.0, 2.0], device=D))
    finally:
        torch.use_deterministic_algorithms(False)


def test_refusals_that_match_the_cpu():
    """Calls the CPU (and CUDA) refuse, which mytorch used to answer with something."""
    cases = {
        "arange_bool": (NotImplementedError, lambda d: torch.arange(3, dtype=torch.bool, device=d)),
        "index_fill_bool_complex": (
            RuntimeError,
            lambda d: torch.zeros(3, dtype=torch.bool, device=d).index_fill_(0, torch.tensor([0], device=d), 1j),
        ),
        "multinomial_categories": (RuntimeError, lambda d: torch.multinomial(torch.ones(2**24 + 1, device=d), 1)),
        "cat_out_is_an_input": (RuntimeError, lambda d: (lambda x: torch.cat([x, x], out=x))(torch.ones(2, device=d))),
        "fallback_out_on_the_cpu": (  # eigvals: a fallback (linalg_eig: torch.cuda computes it on the host too)
            RuntimeError,
            lambda d: torch.linalg.eigvals(
                torch.eye(2, device=d), out=torch.empty(2, dtype=torch.cfloat, device="cpu" if d == D else "meta")
            ),
        ),
    }
    for name, (exc, f) in cases.items():
        for dev in ("cpu", D):
            if name == "fallback_out_on_the_cpu" and dev == "cpu":
                continue  # the CPU takes a CPU out=; the rule is CUDA's: an out= on the call's device
            with pytest.raises(exc):
                f(dev)


def test_fallback_applies_the_out_rules():
    """Ops without a native kernel (histogram here: PyTorch has none for a device; complex division, the LDL
    solve, kthvalue and masked_select had none when this was written) take the CPU fallback. It refuses partial
    overlap itself, hands an out= that is also an input to the CPU kernel over the input's own host storage, so that
    the kernel's rule applies (kthvalue and masked_select refuse it, histogram counts what it reads), and gives
    ATen's warning when it resizes a non-empty out=."""
    torch.mytorch.reset_fallback_stats()
    c = torch.tensor([0.5, 2.0, 1.0, 3.5])
    z = c.to(D)
    edges = torch.empty(0, device=D)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        torch.histogram(z[1:], bins=3, out=(z[:-1], edges))
    assert torch.equal(z.cpu(), c)
    for dev in ("cpu", D):
        x = torch.tensor([3.0, 1.0, 2.0, 5.0], device=dev)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            torch.kthvalue(x, 2, out=(x, torch.empty(0, dtype=torch.long, device=dev)))
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            torch.masked_select(x, x > 1, out=x)
        assert x.tolist() == [3.0, 1.0, 2.0, 5.0]
        y, ref = c.clone().to(dev), c.clone()
        torch.histogram(ref, bins=4, out=(ref, torch.empty(0)))  # the CPU with its hist aliasing its input
        assert torch.histogram(y, bins=4, out=(y, torch.empty(0, device=dev)))[0] is y
        assert torch.equal(y.cpu(), ref)
    torch.mytorch.reset_fallback_stats()
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        torch.histogram(z, bins=3, out=(torch.empty(5, device=D), torch.empty(4, device=D)))
    assert "aten::histogram.bin_ct_out" in torch.mytorch.fallback_stats()
