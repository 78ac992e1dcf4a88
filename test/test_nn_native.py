"""The NN training kernels run on mytorch's own kernels: with the fallback forbidden, each op of the
NN-kernel list (GEMM family, softmax, losses, activations, embedding, optimizers, pooling and friends; the
convolutions are in test_conv_native.py) runs forward and backward and matches the CPU; bad input raises instead
of crashing."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mytorch.testing._compare import assert_aligned

DEV = "mytorch"


pytestmark = pytest.mark.native


def assert_fwd_bwd_match_cpu(fn, *inputs, dtype=torch.float32, grad_inputs=(0,)):
    """Runs fn on CPU and mytorch copies of the inputs; compares outputs and the input gradients with the shared
    rule (Note [Alignment tolerance]): against float64, within twice PyTorch's own error at the dtype or the
    dtype's floor. Reductions inside (norm statistics, weight gradients) cancel, so a fixed tolerance would
    compare two roundings' noise."""

    def leaves(dt, device):
        return [
            t.clone().to(dt).to(device).requires_grad_(i in grad_inputs)
            if t.is_floating_point()
            else t.clone().to(device)
            for i, t in enumerate(inputs)
        ]

    cpu, dev, gold = leaves(dtype, "cpu"), leaves(dtype, DEV), leaves(torch.float64, "cpu")
    y, yd, yg = fn(*cpu), fn(*dev), fn(*gold)
    assert_aligned(yd, y.detach(), yg.detach(), "output")
    g = torch.randn_like(y, dtype=torch.float32)
    y.backward(g.to(dtype))
    yd.backward(g.to(dtype).to(DEV))
    yg.backward(g.to(dtype).double())
    for i in grad_inputs:
        assert_aligned(dev[i].grad, cpu[i].grad, gold[i].grad, f"gradient of input {i}")


g0 = torch.Generator().manual_seed(0)
X = torch.randn(6, 10, generator=g0)

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "elu": lambda t: F.elu(t, 0.7),
    "selu": F.selu,
    "celu": lambda t: F.celu(t, 1.3),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.05),
    "hardtanh": lambda t: F.hardtanh(t, -0.5, 0.7),
    "relu6": F.relu6,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "softplus": lambda t: F.softplus(t, beta=2, threshold=1),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "logsigmoid": F.logsigmoid,
    "softmax": lambda t: F.softmax(t, -1),
    "softmax0": lambda t: F.softmax(t, 0),
    "log_softmax": lambda t: F.log_softmax(t, -1),
    "log_softmax0": lambda t: F.log_softmax(t, 0),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_activation(name, dtype):
    assert_fwd_bwd_match_cpu(ACTIVATIONS[name], X * 3, dtype=dtype)


def test_softmax_half_to_float_and_wide_rows():
    x = torch.randn(3, 5000)
    assert_fwd_bwd_match_cpu(lambda t: F.softmax(t, -1), x)
    h = torch.randn(4, 33).half()
    ref = torch._softmax(h.float(), -1, False)
    assert_aligned(torch._softmax(h.to(DEV), -1, True), ref, torch._softmax(h.double(), -1, False), "half to float")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_weight_ignore_smoothing(reduction):
    t = torch.randint(0, 10, (6,), generator=g0)
    t[1] = -100
    w = torch.rand(10, generator=g0)
    assert_fwd_bwd_match_cpu(
        lambda x, tt, ww: F.cross_entropy(x, tt, weight=ww, reduction=reduction, label_smoothing=0.1), X, t, w
    )


def test_nll_loss2d_and_1d_input():
    x = torch.randn(2, 4, 3, 5, generator=g0).log_softmax(1)
    t = torch.randint(0, 4, (2, 3, 5), generator=g0)
    t[0, 1, 2] = 2
    assert_fwd_bwd_match_cpu(lambda a, b: F.nll_loss(a, b, ignore_index=2), x, t)
    assert_fwd_bwd_match_cpu(lambda a, b: F.nll_loss(a, b), torch.randn(7).log_softmax(0), torch.tensor(3))


@pytest.mark.parametrize("name", ["mse", "smooth_l1", "l1", "huber", "bce", "bce_logits"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(name, reduction):
    target = torch.rand(6, 10, generator=g0)
    w = torch.rand(10, generator=g0)
    fns = {
        "mse": lambda x, t: F.mse_loss(x, t, reduction=reduction),
        "smooth_l1": lambda x, t: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.5),
        "l1": lambda x, t: F.l1_loss(x, t, reduction=reduction),
        "huber": lambda x, t: F.huber_loss(x, t, reduction=reduction, delta=0.7),
        "bce": lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t, weight=w.to(x.device), reduction=reduction),
        "bce_logits": lambda x, t: F.binary_cross_entropy_with_logits(
            x, t, pos_weight=w.to(x.device), reduction=reduction
        ),
    }
    assert_fwd_bwd_match_cpu(fns[name], X, target)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_gemm_family(dtype):
    a, b = torch.randn(5, 7, generator=g0), torch.randn(7, 3, generator=g0)
    bias, v = torch.randn(3, generator=g0), torch.randn(7, generator=g0)
    assert_fwd_bwd_match_cpu(lambda x, y: x @ y, a, b, dtype=dtype, grad_inputs=(0, 1))
    assert_fwd_bwd_match_cpu(
        lambda x, y: x.t() @ y.t(), a.t().contiguous(), b.t().contiguous(), dtype=dtype, grad_inputs=(0, 1)
    )
    assert_fwd_bwd_match_cpu(
        lambda x, y, z: torch.addmm(z, x, y, beta=0.5, alpha=2), a, b, bias, dtype=dtype, grad_inputs=(0, 1, 2)
    )
    assert_fwd_bwd_match_cpu(lambda x, y, z: F.linear(x, y.t(), z), a, b, bias, dtype=dtype, grad_inputs=(0, 1, 2))
    assert_fwd_bwd_match_cpu(
        lambda x, y: torch.bmm(x, y), torch.randn(3, 4, 5), torch.randn(3, 5, 2), dtype=dtype, grad_inputs=(0, 1)
    )
    assert_fwd_bwd_match_cpu(
        lambda x, y, z: torch.baddbmm(z, x, y, alpha=0.5),
        torch.randn(3, 4, 5),
        torch.randn(3, 5, 2),
        torch.randn(4, 2),
        dtype=dtype,
        grad_inputs=(0, 1, 2),
    )
    assert_fwd_bwd_match_cpu(lambda x, y: torch.mv(x, y), a, v, dtype=dtype, grad_inputs=(0, 1))
    assert_fwd_bwd_match_cpu(lambda x, y: torch.dot(x, y), v, v * 2, dtype=dtype, grad_inputs=(0, 1))
    assert_fwd_bwd_match_cpu(
        lambda x, y: torch.matmul(x, y), torch.randn(2, 3, 4, 5), torch.randn(5, 6), dtype=dtype, grad_inputs=(0, 1)
    )


def test_gemm_errors_and_empty():
    a = torch.randn(3, 4, device=DEV)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ torch.randn(5, 2, device=DEV)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a, torch.randn(4, 2, device=DEV, dtype=torch.float64))
    z = torch.mm(torch.randn(3, 0, device=DEV), torch.randn(0, 2, device=DEV))
    assert z.shape == (3, 2) and z.abs().sum().item() == 0
    torch.mytorch.set_fallback_mode("silent")  # integer GEMM: CUDA PyTorch has none either; counted fallback
    i = torch.arange(6).view(2, 3)
    assert torch.equal((i.to(DEV) @ i.t().to(DEV)).cpu(), i @ i.t())


def test_embedding_backward_deterministic_padding_and_freq():
    for kwargs in [dict(), dict(padding_idx=3), dict(scale_grad_by_freq=True)]:
        idx = torch.tensor([[1, 3, 3, 0], [9, 3, 1, 1]])
        assert_fwd_bwd_match_cpu(lambda w, i: F.embedding(i, w, **kwargs), torch.randn(10, 4), idx)
    w = torch.randn(10, 4, device=DEV, requires_grad=True)
    with pytest.raises(IndexError):
        F.embedding(torch.tensor([10], device=DEV), w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_norm_layers(dtype):
    x = torch.randn(3, 4, 5, 6, generator=g0) * 3 + 1
    w, b = torch.rand(6, generator=g0) + 0.5, torch.randn(6, generator=g0)
    assert_fwd_bwd_match_cpu(
        lambda t, ww, bb: F.layer_norm(t, (6,), ww, bb), x, w, b, dtype=dtype, grad_inputs=(0, 1, 2)
    )
    assert_fwd_bwd_match_cpu(lambda t: F.layer_norm(t, (5, 6)), x, dtype=dtype)
    wc, bc = torch.rand(4, generator=g0) + 0.5, torch.randn(4, generator=g0)
    assert_fwd_bwd_match_cpu(
        lambda t, ww, bb: F.group_norm(t, 2, ww, bb), x, wc, bc, dtype=dtype, grad_inputs=(0, 1, 2)
    )
    assert_fwd_bwd_match_cpu(
        lambda t, ww, bb: F.batch_norm(t, None, None, ww, bb, training=True),
        x,
        wc,
        bc,
        dtype=dtype,
        grad_inputs=(0, 1, 2),
    )


def test_batch_norm_running_stats_and_eval():
    bn, bnd, bn64 = nn.BatchNorm2d(4), nn.BatchNorm2d(4).to(DEV), nn.BatchNorm2d(4).double()
    x = torch.randn(5, 4, 3, 3, generator=g0) * 2 + 1
    for _ in range(3):
        bn(x), bnd(x.to(DEV)), bn64(x.double())
    assert_aligned(bnd.running_mean, bn.running_mean, bn64.running_mean, "running_mean")
    assert_aligned(bnd.running_var, bn.running_var, bn64.running_var, "running_var")
    assert bnd.num_batches_tracked.item() == 3
    bn.eval(), bnd.eval()
    bng = copy.deepcopy(bn).double()  # the float64 reference of the same module
    assert_fwd_bwd_match_cpu(
        lambda t: bnd(t) if t.device.type != "cpu" else (bng(t) if t.dtype == torch.float64 else bn(t)), x
    )


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("shape", [(256, 64), (96, 24, 3), (7, 5, 7)])
def test_batch_norm_of_short_planes_by_columns(shape, train):
    """Batch norm over planes shorter than kMinRun (BatchNorm1d's [N, C] and [N, C, L]: column_stats and
    column_backward in kernels/sim/norm.cpp), for planes of 1, 3 and 7 elements (kMinRun is 8), in training and eval:
    the output, the input, weight and bias gradients and the running statistics aligned with the CPU against
    float64."""
    c = shape[1]
    x = torch.randn(shape, generator=g0) * 3 + 1
    gy = torch.randn(shape, generator=g0)
    outs = []
    for dev, dt in (("cpu", torch.float32), (DEV, torch.float32), ("cpu", torch.float64)):
        m = nn.BatchNorm1d(c).to(dev, dt)
        with torch.no_grad():
            m.weight.copy_(torch.linspace(0.5, 2, c)), m.bias.copy_(torch.linspace(-1, 1, c))
            m.running_mean.fill_(0.3), m.running_var.fill_(2.0)
        m.train(train)
        xx = x.detach().to(dev, dt).requires_grad_()
        y = m(xx)
        y.backward(gy.to(dev, dt))
        outs.append([y, xx.grad, m.weight.grad, m.bias.grad, m.running_mean, m.running_var])
    for i, name in enumerate(["y", "dx", "dw", "db", "running_mean", "running_var"]):
        assert_aligned(outs[1][i], outs[0][i], outs[2][i], name)


POOLS = {
    "max": lambda t: F.max_pool2d(t, 3, 2, 1),
    "max_dil_ceil": lambda t: F.max_pool2d(t, 2, 2, 0, 2, ceil_mode=True),
    "avg": lambda t: F.avg_pool2d(t, 3, 2, 1),
    "avg_nopad_ceil": lambda t: F.avg_pool2d(t, 3, 2, 1, True, False),
    "avg_div": lambda t: F.avg_pool2d(t, 2, divisor_override=3),
    "adaptive": lambda t: F.adaptive_avg_pool2d(t, (3, 5)),
    "global": lambda t: F.adaptive_avg_pool2d(t, 1),
    "adaptive_max": lambda t: F.adaptive_max_pool2d(t, (3, 5)),
    "adaptive_max_up": lambda t: F.adaptive_max_pool2d(t, (10, 4)),
    "adaptive_max_1d": lambda t: F.adaptive_max_pool1d(t.flatten(2), 11),
    "nearest2x": lambda t: F.interpolate(t, scale_factor=2),
    "nearest": lambda t: F.interpolate(t, size=(5, 11)),
    "bilinear": lambda t: F.interpolate(t, size=(13, 7), mode="bilinear"),
    "bilinear_ac": lambda t: F.interpolate(t, scale_factor=1.7, mode="bilinear", align_corners=True),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_and_upsample(name):
    assert_fwd_bwd_match_cpu(POOLS[name], torch.randn(2, 3, 7, 9, generator=g0))


POOLS3D = {
    "max": lambda t: F.max_pool3d(t, 3, 2, 1),
    "max_aniso_dil_ceil": lambda t: F.max_pool3d(t, (2, 3, 2), (1, 2, 3), (1, 0, 1), (2, 1, 2), ceil_mode=True),
    "avg": lambda t: F.avg_pool3d(t, 3, 2, 1),
    "avg_nopad_ceil": lambda t: F.avg_pool3d(t, (3, 2, 3), 2, 1, True, False),
    "avg_div": lambda t: F.avg_pool3d(t, 2, divisor_override=3),
    "adaptive_max": lambda t: F.adaptive_max_pool3d(t, (2, 3, 5)),
    "adaptive_max_up": lambda t: F.adaptive_max_pool3d(t, (7, 10, 4)),
}


@pytest.mark.parametrize("name", sorted(POOLS3D))
def test_pool3d(name):
    assert_fwd_bwd_match_cpu(POOLS3D[name], torch.randn(2, 3, 5, 7, 9, generator=g0))
    assert_fwd_bwd_match_cpu(POOLS3D[name], torch.randn(3, 4, 6, 5, generator=g0))  # unbatched


def test_pool3d_indices_nan_integers_and_bad_arguments():
    """3-D max pooling's indices (flattened over D*H*W) are ATen's, NaN and ties included; integers pool natively;
    bad arguments raise the CPU's error classes."""
    x = torch.randn(2, 3, 4, 6, 5, generator=g0)
    x[0, 0, 1, 2, 2] = float("nan")
    x[1, 2, :2, :2, :2] = 1.5  # ties: the first in the window wins
    for f in (
        lambda t: F.max_pool3d(t, 2, 1, 1, return_indices=True),
        lambda t: F.adaptive_max_pool3d(t, (3, 2, 4), return_indices=True),
    ):
        ref, out = f(x), f(x.to(DEV))
        assert torch.equal(out[1].cpu(), ref[1])
        assert_aligned(out[0], ref[0], None, "values")
    xi = torch.randint(-50, 50, (2, 3, 4, 6, 5), generator=g0)
    ref, out = F.max_pool3d(xi, 3, 2, 1, return_indices=True), F.max_pool3d(xi.to(DEV), 3, 2, 1, return_indices=True)
    assert torch.equal(out[0].cpu(), ref[0]) and torch.equal(out[1].cpu(), ref[1])
    for f in (
        lambda t: F.max_pool3d(t, 0),
        lambda t: F.max_pool3d(t, 3, padding=2),
        lambda t: F.avg_pool3d(t, 9),
        lambda t: F.max_pool3d(t[0, 0, 0], 2),
        lambda t: F.adaptive_max_pool3d(t, (2, 2)),
    ):
        with pytest.raises(RuntimeError):
            f(x)
        with pytest.raises(RuntimeError):
            f(x.to(DEV))


def test_loss_errors_raise():
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(torch.randn(3, 5, device=DEV), torch.tensor([0, 5, 1], device=DEV))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(torch.full((3,), 1.5, device=DEV), torch.zeros(3, device=DEV))
    with pytest.raises((ValueError, RuntimeError), match="batch_size"):
        F.nll_loss(torch.randn(3, 5, device=DEV), torch.tensor([0, 1], device=DEV))


def _params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(5, 3, generator=g), torch.randn(7, generator=g), torch.randn(70000, generator=g)]


@pytest.mark.parametrize(
    "opt",
    [
        "sgd_momentum",
        "sgd_nesterov_fused",
        "adamw_foreach",
        "adamw_fused",
        "adam_amsgrad_fused",
        "adam_foreach_wd",
        "rmsprop",
        "adagrad",
    ],
)
def test_optimizers_match_cpu(opt):
    make = {
        "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, foreach=True),
        "sgd_nesterov_fused": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, fused=True),
        "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
        "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
        "adam_amsgrad_fused": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, fused=True),
        "adam_foreach_wd": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1, maximize=True, foreach=True),
        "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5, foreach=True),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2, foreach=True),
    }[opt]
    pc = [p.clone().requires_grad_() for p in _params()]
    pd = [p.to(DEV).requires_grad_() for p in _params()]
    pg = [p.double().requires_grad_() for p in _params()]  # the golden run, in float64 on the CPU
    oc, od, og = make(pc), make(pd), make(pg)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        for a, b, c in zip(pc, pd, pg):
            grad = torch.randn(a.shape, generator=g)
            a.grad, b.grad, c.grad = grad.clone(), grad.to(DEV), grad.double()
        nc = torch.nn.utils.clip_grad_norm_(pc, 1.0)
        nd = torch.nn.utils.clip_grad_norm_(pd, 1.0)
        assert_aligned(nd, nc, torch.nn.utils.clip_grad_norm_(pg, 1.0), "clip_grad_norm_")
        oc.step()
        od.step()
        og.step()
    for i, (a, b, c) in enumerate(zip(pc, pd, pg)):
        assert_aligned(b.detach(), a.detach(), c.detach(), f"parameter {i}")


def test_foreach_overloads_match_cpu():
    xs = [torch.randn(4, 3), torch.randn(100000), torch.randn(0)]
    ys = [torch.randn_like(t) for t in xs]
    zs = [torch.rand_like(t) + 0.5 for t in xs]
    d = lambda ts: [t.to(DEV) for t in ts]  # noqa: E731
    s = torch.tensor(0.75)
    calls = [
        lambda a, b, c: torch._foreach_add(a, b, alpha=0.5),
        lambda a, b, c: torch._foreach_add(a, 2.0),
        lambda a, b, c: torch._foreach_add(a, [1.0, 2.0, 3.0]),
        lambda a, b, c: torch._foreach_add(a, s.to(a[0].device), alpha=2),
        lambda a, b, c: torch._foreach_sub(a, b),
        lambda a, b, c: torch._foreach_mul(a, s.to(a[0].device)),
        lambda a, b, c: torch._foreach_div(a, c),
        lambda a, b, c: torch._foreach_maximum(a, b),
        lambda a, b, c: torch._foreach_clamp_min(a, 0.1),
        lambda a, b, c: torch._foreach_pow(c, 1.5),
        lambda a, b, c: torch._foreach_pow(2.0, a),
        lambda a, b, c: torch._foreach_addcmul(a, b, c, 0.3),
        lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.1, 0.2, 0.3]),
        lambda a, b, c: torch._foreach_addcdiv(a, b, c, torch.tensor([0.1, 0.2, 0.3])),
        lambda a, b, c: torch._foreach_lerp(a, b, 0.3),
        lambda a, b, c: torch._foreach_lerp(a, b, c),
        lambda a, b, c: torch._foreach_sqrt(c),
        lambda a, b, c: torch._foreach_exp(a),
        lambda a, b, c: torch._foreach_neg(a),
        lambda a, b, c: torch._foreach_norm(a),
        lambda a, b, c: torch._foreach_norm(a[:2], float("inf")),
        lambda a, b, c: torch._foreach_norm(a, 1),
    ]
    f64 = lambda ts: [t.double() for t in ts]  # noqa: E731
    for i, fn in enumerate(calls):
        ref, got, gold = fn(xs, ys, zs), fn(d(xs), d(ys), d(zs)), fn(f64(xs), f64(ys), f64(zs))
        for r, t, g in zip(ref, got, gold):
            assert_aligned(t, r, g, f"call {i}")
    # in place, and the non-contiguous / mixed-dtype slow path (per-tensor native kernels)
    a, ad = [t.clone() for t in xs], d(xs)
    torch._foreach_mul_(a, 3.0), torch._foreach_mul_(ad, 3.0)
    torch._foreach_zero_(a[:1]), torch._foreach_zero_(ad[:1])
    with pytest.raises(RuntimeError, match="infinity norm on an empty"):
        torch._foreach_norm(ad, float("inf"))
    for r, t in zip(a, ad):
        torch.testing.assert_close(t.cpu(), r)
    nc = [torch.randn(4, 6)[:, ::2], torch.randn(3).double()]
    for r, t in zip(torch._foreach_add(nc, 1.0), torch._foreach_add(d(nc), 1.0)):
        torch.testing.assert_close(t.cpu(), r)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weight_norm_interface_natively(dim, dtype):
    """The fused weight norm (nn.utils.weight_norm; wav2vec2's positional convolution) and its backward, for the
    first and the last dimension."""
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(6, 4, 5, generator=gen)
    g = torch.randn(6, 1, 1, generator=gen) if dim == 0 else torch.randn(1, 1, 5, generator=gen)
    d = dim % v.dim()
    assert_fwd_bwd_match_cpu(
        lambda v_, g_: torch._weight_norm_interface(v_, g_, d)[0], v, g, dtype=dtype, grad_inputs=(0, 1)
    )
    norms = torch._weight_norm_interface(v.to(dtype).to(DEV), g.to(dtype).to(DEV), d)[1]
    assert norms.dtype == torch.float32 and norms.shape == g.shape
    with pytest.raises(RuntimeError, match="first or the last"):
        torch._weight_norm_interface(v.to(DEV), torch.randn(1, 4, 1).to(DEV), 1)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
def test_recurrent_layers_natively(kind):
    """nn.LSTM / nn.GRU and their cells: torch's RNN code picks the fused cells (_thnn_fused_lstm_cell,
    _thnn_fused_gru_cell) for a non-CPU device; forward and backward against the CPU."""
    torch.manual_seed(0)
    if kind in ("LSTM", "GRU"):
        ref = getattr(nn, kind)(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        x = torch.randn(3, 5, 8)
    else:
        ref = getattr(nn, kind)(8, 16)
        x = torch.randn(3, 8)
    dev = copy.deepcopy(ref).to(DEV)
    gold = copy.deepcopy(ref).double()

    def loss(model, inp):
        out = model(inp)
        out = out[0] if isinstance(out, tuple) else out
        return (out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype, device=out.device)).sum()

    xs = [x.clone().requires_grad_(), x.to(DEV).requires_grad_(), x.double().requires_grad_()]
    losses = [loss(m, xi) for m, xi in zip((ref, dev, gold), xs)]
    for l_ in losses:
        l_.backward()
    assert_aligned(losses[1], losses[0], losses[2], "loss")
    assert_aligned(xs[1].grad, xs[0].grad, xs[2].grad, "input gradient")
    for (name, p), pd, pg in zip(ref.named_parameters(), dev.parameters(), gold.parameters()):
        assert_aligned(pd.grad, p.grad, pg.grad, name)


def _whole_sequence_gemms(run, rows):
    """How many GEMMs over every step at once (rows = steps x batch) `run` launches (the profiler sees the calls
    inside composite and registered kernels alike, with autograd and in inference mode)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        run()
    mms = [e.input_shapes for e in prof.events() if e.name == "aten::mm" and len(e.input_shapes) == 2]  # not mm.out
    return sum(1 for shapes in mms if shapes[0][0] == rows)


@pytest.mark.parametrize(
    "kind,kw,whole",
    [
        ("LSTM", {"bias": False}, True),
        ("GRU", {"num_layers": 3}, True),
        ("LSTM", {"num_layers": 2, "bidirectional": True}, True),
        ("LSTM", {"proj_size": 4}, False),  # projections: ATen's composite, per step
    ],
)
@pytest.mark.parametrize("inference", [False, True])
def test_recurrent_layers_project_the_whole_sequence_once(kind, kw, whole, inference):
    """Note [Whole-sequence RNN layers]: nn.LSTM / nn.GRU on the device project every step's input in one GEMM
    per layer and direction (ATen's composite does so for CPU tensors only), with autograd and in inference
    mode; the output, final states and gradients match the CPU and float64."""
    torch.manual_seed(0)
    ref = getattr(nn, kind)(6, 8, **kw)
    dev, gold = copy.deepcopy(ref).to(DEV), copy.deepcopy(ref).double()
    x, h = torch.randn(7, 3, 6), None
    xs = [x.clone().requires_grad_(not inference), x.to(DEV).requires_grad_(not inference), x.double()]
    xs[2].requires_grad_(not inference)
    outs = [None] * 3
    with torch.inference_mode(inference):
        outs[0], outs[2] = ref(xs[0]), gold(xs[2])
        gemms = _whole_sequence_gemms(lambda: outs.__setitem__(1, dev(xs[1])), 7 * 3)
    dirs, layers = 2 if kw.get("bidirectional") else 1, kw.get("num_layers", 1)
    assert gemms == (layers * dirs if whole else 0)
    flat = [[o[0], *(o[1] if isinstance(o[1], tuple) else (o[1],))] for o in outs]
    for i, (r, d, g) in enumerate(zip(*flat)):
        assert_aligned(d, r.detach(), g.detach(), f"result {i}")
    if inference:
        return
    for o in flat:
        h = sum((t * torch.linspace(-1, 1, t.shape[-1], dtype=t.dtype, device=t.device)).sum() for t in o)
        h.backward()
    assert_aligned(xs[1].grad, xs[0].grad, xs[2].grad, "input gradient")
    for (name, p), pd, pg in zip(ref.named_parameters(), dev.parameters(), gold.parameters()):
        assert_aligned(pd.grad, p.grad, pg.grad, name)


def test_recurrent_dropout_between_layers_only_in_training():
    """The dropout between stacked layers applies in training only (ATen's rule): eval mode equals the layers
    without dropout, training mode draws a mask."""
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 8, num_layers=2, dropout=0.5).to(DEV)
    plain = copy.deepcopy(lstm)
    plain.dropout = 0.0
    x = torch.randn(5, 2, 6).to(DEV)
    torch.testing.assert_close(lstm.eval()(x)[0].cpu(), plain(x)[0].cpu(), rtol=0, atol=0)
    assert not torch.equal(lstm.train()(x)[0].cpu(), plain(x)[0].cpu())


@pytest.mark.parametrize(
    "dtype,param",
    [
        (torch.bfloat16, None),
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float16),
        (torch.float32, torch.float32),
    ],
)
def test_group_norm_statistics_dtype_and_empty_input(dtype, param):
    """native_group_norm keeps its statistics in the parameters' dtype on every device (ATen's group norm is
    shared by the CPU and CUDA), unlike batch and layer norm on CUDA; an input without elements has a mean of 0
    and an rstd of NaN."""
    x = torch.randn(2, 4, 3, generator=g0).to(dtype)
    w = None if param is None else torch.rand(4, generator=g0).to(param)
    for N, C, HxW, inp in [(2, 4, 3, x), (2, 4, 0, x[..., :0])]:
        ref = torch.native_group_norm(inp, w, w, N, C, HxW, 2, 1e-5)
        got = torch.native_group_norm(inp.to(DEV), *(2 * [None if w is None else w.to(DEV)]), N, C, HxW, 2, 1e-5)
        gold = torch.native_group_norm(inp.double(), *(2 * [None if w is None else w.double()]), N, C, HxW, 2, 1e-5)
        for r, d, g in zip(ref, got, gold):
            assert d.dtype == r.dtype and d.shape == r.shape
            assert_aligned(d, r, g, "group norm output")


def test_group_norm_over_a_large_group_keeps_the_cpus_accuracy():
    """Note [Two-level sums]: 8M elements in one group, away from zero (where one float accumulator drifts by
    about n * eps): forward and backward within the tolerance rule against float64."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 4, 1024, 2048, generator=gen) + 3.0
    w, b = torch.randn(4, generator=gen), torch.randn(4, generator=gen)
    assert_fwd_bwd_match_cpu(lambda x_, w_, b_: F.group_norm(x_, 1, w_, b_), x, w, b, grad_inputs=(0, 1, 2))


@pytest.mark.parametrize("norm", ["batch", "group"])
@pytest.mark.parametrize("training", [True, False])
def test_norms_keep_channels_last(norm, training):
    """A channels-last input gets a channels-last output and input gradient, as on the CPU and CUDA, with the
    CPU's values."""
    torch.manual_seed(0)
    ref = (nn.BatchNorm2d(6) if norm == "batch" else nn.GroupNorm(2, 6)).train(training)
    if norm == "batch":
        ref.running_mean.uniform_(-1, 1)
        ref.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 6, 5, 7).to(memory_format=torch.channels_last)
    outs = []
    for model, inp in (
        (copy.deepcopy(ref), x),
        (copy.deepcopy(ref).to(DEV), x.to(DEV)),
        (copy.deepcopy(ref).double(), x.double()),
    ):
        leaf = inp.detach().requires_grad_()
        y = model(leaf)
        y.backward(torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y).to(y.device))
        outs.append((y, leaf.grad))
    for i in range(2):
        assert_aligned(outs[1][i], outs[0][i], outs[2][i], ["output", "gradient"][i])
        assert outs[1][i].is_contiguous(memory_format=torch.channels_last)


def test_uint8_upsampling():
    """Images in uint8: nearest exactly as the CPU; bilinear computed in float32 and rounded, within 1 of the CPU
    (whose uint8 path uses fixed-point weights; CUDA truncates instead)."""
    gen = torch.Generator().manual_seed(0)
    for shape, kw in [((2, 3, 7, 9), dict(scale_factor=2)), ((1, 3, 16, 16), dict(size=(5, 7)))]:
        x = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
        got = F.interpolate(x.to(DEV), mode="nearest", **kw)
        assert got.dtype == torch.uint8 and torch.equal(got.cpu(), F.interpolate(x, mode="nearest", **kw))
        for align in (False, True):
            got = F.interpolate(x.to(DEV), mode="bilinear", align_corners=align, **kw).cpu()
            want = F.interpolate(x, mode="bilinear", align_corners=align, **kw)
            assert got.dtype == torch.uint8 and (got.int() - want.int()).abs().max() <= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_loss_natively(dtype, layout):
    """F.ctc_loss (wav2vec2's CTC head), Note [CTC]: the CPU's algorithm step for step, so loss and gradient are
    the CPU's; every reduction, an empty target, and an impossible alignment (input shorter than its target)
    with zero_infinity; tensor and list lengths."""
    gen = torch.Generator().manual_seed(0)
    T, N, C = 30, 4, 12
    lp = torch.randn(T, N, C, generator=gen, dtype=dtype).log_softmax(-1)
    il, tl = torch.tensor([30, 25, 18, 1]), torch.tensor([10, 0, 7, 3])
    tg = torch.randint(1, C, (N, 10), generator=gen)
    if layout == "concatenated":
        tg = torch.cat([tg[b, : tl[b]] for b in range(N)])
    for reduction in ("mean", "sum", "none"):
        for lengths in ((il, tl), (il.tolist(), tl.tolist())):
            results = []
            for device in ("cpu", DEV):
                x = lp.to(device).detach().requires_grad_()
                li, lt = (v.to(device) if torch.is_tensor(v) else v for v in lengths)
                loss = F.ctc_loss(x, tg.to(device), li, lt, reduction=reduction, zero_infinity=True)
                loss.sum().backward()
                results.append((loss.detach().cpu(), x.grad.cpu()))
            assert torch.equal(results[1][0], results[0][0]) and torch.equal(results[1][1], results[0][1])
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp.to(DEV), tg.to(DEV), il, tl, blank=C)
    with pytest.raises(RuntimeError, match="input_lengths"):
        F.ctc_loss(lp.to(DEV), tg.to(DEV), [31, 1, 1, 1], tl.tolist())


def test_linalg_solve_triangular_natively():
    """torch.linalg.solve_triangular (Qwen3-Next), Note [Triangular solve]: lower and upper, left and right,
    unitriangular, broadcast batches, float32 and float64, and the gradient; against the CPU with the tolerance
    rule; ATen's shape checks."""
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for upper in (False, True):
            for left in (True, False):
                for unit in (False, True):
                    A = torch.randn(5, 1, 6, 6, generator=gen, dtype=dtype) + 4 * torch.eye(6, dtype=dtype)
                    A = A.triu() if upper else A.tril()
                    B = (
                        torch.randn(2, 6, 3, generator=gen, dtype=dtype)
                        if left
                        else torch.randn(2, 3, 6, generator=gen, dtype=dtype)
                    )
                    f = lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)  # noqa: E731
                    assert_fwd_bwd_match_cpu(f, A, B, dtype=dtype, grad_inputs=(0, 1))
    # the sim's row-wise substitution over blocks of 256 columns in parallel: 300 columns (two blocks), more than a
    # grain of work, the same bits at 1 and 2 threads
    for upper in (False, True):
        A = torch.randn(3, 40, 40, generator=gen) + 8 * torch.eye(40)
        A, B = (A.triu() if upper else A.tril()), torch.randn(3, 40, 300, generator=gen)
        outs = []
        before = torch.get_num_threads()
        try:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                outs.append(torch.linalg.solve_triangular(A.to(DEV), B.to(DEV), upper=upper).cpu())
        finally:
            torch.set_num_threads(before)
        assert torch.equal(outs[0], outs[1])
        gold = torch.linalg.solve_triangular(A.double(), B.double(), upper=upper)
        assert_aligned(outs[0], torch.linalg.solve_triangular(A, B, upper=upper), gold, f"300 columns upper={upper}")
    with pytest.raises(RuntimeError, match="Incompatible shapes of A and B"):
        torch.linalg.solve_triangular(torch.eye(3, device=DEV), torch.ones(4, 2, device=DEV), upper=False)
    with pytest.raises(RuntimeError, match="batches of square matrices"):
        torch.linalg.solve_triangular(torch.ones(3, 4, device=DEV), torch.ones(3, 2, device=DEV), upper=False)


@pytest.mark.parametrize("op", ["sigmoid_backward", "tanh_backward"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_sigmoid_and_tanh_backward_round_once(op, dtype):
    """One fused kernel in opmath, as ATen's: at half types, composing three kernels rounded three times (a third
    of the elements differed from the CPU's, up to twice its error)."""
    gen = torch.Generator().manual_seed(5)
    g, y = torch.randn(4096, generator=gen).to(dtype), torch.rand(4096, generator=gen).to(dtype)
    f = getattr(torch.ops.aten, op)
    got, ref, gold = f(g.to(DEV), y.to(DEV)), f(g, y), f(g.double(), y.double())
    assert_aligned(got, ref, gold, op)
    if dtype == torch.bfloat16:  # the CPU computes bf16 in float and rounds once: the same bits
        assert torch.equal(got.cpu(), ref)


@pytest.mark.every_runtime
def test_max_pool2d_nan_empty_windows_and_integers():
    """ATen's choice within a max-pooling window: a larger value or any NaN replaces (the last NaN's index wins); a
    window of only -inf keeps its first element; a window that dilation leaves empty gives the lowest value and
    ATen's index. Integer inputs pool natively (the CPU and CUDA take them) with the same indices."""
    x = torch.randn(2, 3, 8, 9, generator=g0)
    x[0, 0, :2, :2] = float("nan")  # four NaNs in the first window
    x[0, 1] = float("-inf")
    x[1, 2, 2:4, 2:4] = 5.0  # ties
    for args in ((3, 2, 1), (2, 2, 0, 1, True), (3, 1, 1, 2)):
        ref = F.max_pool2d(x, *args, return_indices=True)
        out = F.max_pool2d(x.to(DEV), *args, return_indices=True)
        assert torch.equal(out[1].cpu(), ref[1]), args
        assert_aligned(out[0], ref[0], None, "max_pool2d values")
    one = torch.full((1, 1, 1, 1), -5.0)  # k=2, padding 1, dilation 2: the window holds no element
    for t in (one, one.long()):
        ref = F.max_pool2d(t, 2, 1, 1, 2, return_indices=True)
        out = F.max_pool2d(t.to(DEV), 2, 1, 1, 2, return_indices=True)
        assert torch.equal(out[0].cpu(), ref[0]) and torch.equal(out[1].cpu(), ref[1]), t.dtype
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):  # native: the fallback raises here
        xi = torch.randint(-100 if dtype != torch.uint8 else 0, 100, (2, 3, 7, 6), generator=g0).to(dtype)
        ref = F.max_pool2d(xi, 3, 2, 1, return_indices=True)
        out = F.max_pool2d(xi.to(DEV), 3, 2, 1, return_indices=True)
        assert out[0].dtype == dtype
        assert torch.equal(out[0].cpu(), ref[0]) and torch.equal(out[1].cpu(), ref[1]), dtype


def test_adaptive_max_pool2d_indices_nan_and_out():
    """ATen's choice within a window (the first maximum, the last NaN, the window's first element when all are
    -inf) and its out= and channels-last forms."""
    x = torch.randn(2, 3, 7, 9, generator=g0)
    x[0, 0, 0, :3] = float("nan")
    x[0, 1] = float("-inf")
    x[1, 2, 2:4, 2:4] = 5.0  # ties
    for inp in (x, x.to(memory_format=torch.channels_last), x[0]):
        ref = F.adaptive_max_pool2d(inp, (4, 5), return_indices=True)
        out = F.adaptive_max_pool2d(inp.to(DEV), (4, 5), return_indices=True)
        assert torch.equal(out[1].cpu(), ref[1])
        assert_aligned(out[0], ref[0], None, "adaptive_max_pool2d values")
    values, indices = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.ops.aten.adaptive_max_pool2d.out(x.to(DEV), [2, 3], out=values, indices=indices)
    assert torch.equal(indices.cpu(), F.adaptive_max_pool2d(x, (2, 3), return_indices=True)[1])
    with pytest.raises(RuntimeError):
        F.adaptive_max_pool2d(torch.randn(2, 0, 4, device=DEV), 2)
    with pytest.raises(RuntimeError):
        torch.ops.aten.adaptive_max_pool2d_backward(torch.randn(1, 2, 2, device=DEV), x[0].to(DEV), indices[0])


def test_pad_meta_checks_are_cached_and_still_raise():
    """reflection/replication pads call torch's Python meta kernel for ATen's checks (Note [Cached meta results]):
    once per key; a repeat takes the cache, and padding the check refuses raises the CPU's message every time. The
    values and the backward are the CPU's."""
    import mytorch

    entries = mytorch._C._meta_cache_entries
    x = torch.randn(2, 3, 9, 11, generator=torch.Generator().manual_seed(3))
    d = x.to("mytorch")
    for mode in ("reflect", "replicate"):
        F.pad(d, (2, 3, 1, 4), mode=mode)
        before = entries()
        got = F.pad(d, (2, 3, 1, 4), mode=mode)
        assert entries() == before
        assert torch.equal(got.cpu(), F.pad(x, (2, 3, 1, 4), mode=mode)), mode
        xg, dg = x[0].clone().requires_grad_(), d[0].clone().requires_grad_()
        F.pad(xg, (1, 2), mode=mode).pow(2).sum().backward()
        F.pad(dg, (1, 2), mode=mode).pow(2).sum().backward()
        torch.testing.assert_close(dg.grad.cpu(), xg.grad)
    for _ in range(2):  # not stored: the check runs again
        with pytest.raises(RuntimeError) as cpu:
            F.pad(x[0], (11, 0), mode="reflect")
        with pytest.raises(RuntimeError, match=str(cpu.value).split("\n")[0][:30]):
            F.pad(d[0], (11, 0), mode="reflect")
