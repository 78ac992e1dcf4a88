"""The speed report's own cases (mytorch/testing/speed.py): the families issue 55 names that op_db samples small or
not at all, at the natural medium shape of each. A case is built once per side: build(device, dtype, grad) makes
its inputs on the device (from the same seeded CPU values on both sides) and returns the call to time; with grad,
the call runs the forward and a backward from ones."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

N = 1024  # operands of N x N (1M elements) where a case has no natural shape of its own


def _rand(*shape, dtype=torch.float32, low=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g)
    return (t.abs() + low if low is not None else t).to(dtype)


def _ints(high, *shape, seed=1):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def _grad_call(fn, leaves):
    """fn() and, for the backward kind, a backward from ones into `leaves`."""

    def run():
        from torch.utils._pytree import tree_leaves

        outs = [o for o in tree_leaves(fn()) if isinstance(o, torch.Tensor) and o.requires_grad]
        torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs], allow_unused=True)

    return run


def _op(fn, *makers, backward=True):
    """A case from fn(*inputs) and its inputs' makers (the floating ones are differentiated)."""

    def build(dev, dtype, grad):
        xs = []
        for m in makers:
            t = m(dtype).to(dev)
            if grad and t.is_floating_point():
                t.requires_grad_(True)
            xs.append(t)
        if grad:
            return _grad_call(lambda: fn(*xs), [t for t in xs if t.requires_grad])
        return lambda: fn(*xs)

    return build, backward


def _module(make, shape, backward=True):
    """A case from an nn.Module (the same seeded weights on both sides) applied to one input."""

    def build(dev, dtype, grad):
        torch.manual_seed(0)
        m = copy.deepcopy(make()).to(device=dev, dtype=dtype)
        x = _rand(*shape, dtype=dtype).to(dev)
        if grad:
            x.requires_grad_(True)
            return _grad_call(lambda: m(x), [x, *m.parameters()])
        return lambda: m(x)

    return build, backward


def _factory(fn):
    def build(dev, dtype, grad):
        return lambda: fn(dev, dtype)

    return build, False


def _clip(dev, dtype, grad):
    ps = [torch.nn.Parameter(_rand(128, 1024, dtype=dtype, seed=i).to(dev)) for i in range(8)]
    for i, p in enumerate(ps):
        p.grad = _rand(128, 1024, dtype=dtype, seed=10 + i).to(dev)
    return lambda: torch.nn.utils.clip_grad_norm_(ps, 1.0)


def _bn_train(x, w, b):
    return F.batch_norm(x, None, None, w, b, training=True)


IMG = (8, 32, 56, 56)  # a ResNet stage's activations
CASES = {  # name -> (family, (build, has backward), input elements)
    # indexing along inner and outer dimensions
    "gather dim 1": (
        "indexing",
        _op(lambda x, i: x.gather(1, i), lambda d: _rand(N, N, dtype=d), lambda d: _ints(N, N, N // 2)),
        3 * N * N // 2,
    ),
    "gather dim 0": (
        "indexing",
        _op(lambda x, i: x.gather(0, i), lambda d: _rand(N, N, dtype=d), lambda d: _ints(N, N // 2, N)),
        3 * N * N // 2,
    ),
    "scatter_add dim 1": (
        "indexing",
        _op(
            lambda x, i, s: x.scatter_add(1, i, s),
            lambda d: _rand(N, N, dtype=d),
            lambda d: _ints(N, N, N // 2),
            lambda d: _rand(N, N // 2, dtype=d, seed=2),
        ),
        2 * N * N,
    ),
    "scatter dim 0": (
        "indexing",
        _op(
            lambda x, i, s: x.scatter(0, i, s),
            lambda d: _rand(N, N, dtype=d),
            lambda d: _ints(N, N // 2, N),
            lambda d: _rand(N // 2, N, dtype=d, seed=2),
        ),
        2 * N * N,
    ),
    "index_select dim 0": (
        "indexing",
        _op(lambda x, i: x.index_select(0, i), lambda d: _rand(N, N, dtype=d), lambda d: _ints(N, N // 2)),
        N * N,
    ),
    "index_select dim 1": (
        "indexing",
        _op(lambda x, i: x.index_select(1, i), lambda d: _rand(N, N, dtype=d), lambda d: _ints(N, N // 2)),
        N * N,
    ),
    "index_add dim 0": (
        "indexing",
        _op(
            lambda x, i, s: x.index_add(0, i, s),
            lambda d: _rand(N, N, dtype=d),
            lambda d: _ints(N, N),
            lambda d: _rand(N, N, dtype=d, seed=2),
        ),
        2 * N * N,
    ),
    "index_put accumulate": (
        "indexing",
        _op(
            lambda x, i, s: x.index_put((i,), s, accumulate=True),
            lambda d: _rand(N, N, dtype=d),
            lambda d: _ints(N, N),
            lambda d: _rand(N, N, dtype=d, seed=2),
        ),
        2 * N * N,
    ),
    "masked_fill": (
        "indexing",
        _op(lambda x, m: x.masked_fill(m, 0.0), lambda d: _rand(N, N, dtype=d), lambda d: _rand(N, N) > 0),
        N * N,
    ),
    "masked_select": (
        "indexing",
        _op(lambda x, m: x.masked_select(m), lambda d: _rand(N, N, dtype=d), lambda d: _rand(N, N) > 0),
        N * N,
    ),
    "nonzero": ("indexing", _op(lambda x: x.nonzero(), lambda d: (_rand(N, N) > 0).to(d), backward=False), N * N),
    "unique": ("indexing", _op(lambda x: torch.unique(x), lambda d: _ints(1000, N * N).to(d), backward=False), N * N),
    "take": (
        "indexing",
        _op(lambda x, i: x.take(i), lambda d: _rand(N, N, dtype=d), lambda d: _ints(N * N, N * N // 2)),
        N * N,
    ),
    "embedding 50k x 256": (
        "indexing",
        _op(lambda w, i: F.embedding(i, w), lambda d: _rand(50000, 256, dtype=d), lambda d: _ints(50000, 4096)),
        4096 * 256,
    ),
    # random sampling (the Philox generator)
    "randn 1M": ("random", _factory(lambda dev, dt: torch.randn(N, N, device=dev, dtype=dt)), N * N),
    "rand 1M": ("random", _factory(lambda dev, dt: torch.rand(N, N, device=dev, dtype=dt)), N * N),
    "randint 1M": ("random", _factory(lambda dev, dt: torch.randint(0, 1000, (N, N), device=dev)), N * N),
    "bernoulli_ 1M": (
        "random",
        _op(lambda x: x.bernoulli_(0.5), lambda d: _rand(N, N, dtype=d), backward=False),
        N * N,
    ),
    "dropout 1M": ("random", _op(lambda x: F.dropout(x, 0.1, training=True), lambda d: _rand(N, N, dtype=d)), N * N),
    "multinomial 64 x 1000": (
        "random",
        _op(
            lambda p: torch.multinomial(p, 100, replacement=True),
            lambda d: _rand(64, 1000, dtype=d, low=0.01),
            backward=False,
        ),
        64000,
    ),
    "randperm 100k": ("random", _factory(lambda dev, dt: torch.randperm(100000, device=dev)), 100000),
    # normalization and optimizer utilities
    "batch_norm training": (
        "normalization",
        _op(
            _bn_train,
            lambda d: _rand(*IMG, dtype=d),
            lambda d: _rand(32, dtype=d, low=0.5),
            lambda d: _rand(32, dtype=d),
        ),
        8 * 32 * 56 * 56,
    ),
    "batch_norm eval": (
        "normalization",
        _op(
            lambda x, m, v: F.batch_norm(x, m, v, training=False),
            lambda d: _rand(*IMG, dtype=d),
            lambda d: _rand(32, dtype=d),
            lambda d: _rand(32, dtype=d, low=0.5),
            backward=False,
        ),
        8 * 32 * 56 * 56,
    ),
    "group_norm 8 groups": (
        "normalization",
        _op(lambda x: F.group_norm(x, 8), lambda d: _rand(*IMG, dtype=d)),
        8 * 32 * 56 * 56,
    ),
    "layer_norm 4096 x 256": (
        "normalization",
        _op(lambda x: F.layer_norm(x, (256,)), lambda d: _rand(4096, 256, dtype=d)),
        4096 * 256,
    ),
    "softmax dim -1": ("normalization", _op(lambda x: x.softmax(-1), lambda d: _rand(N, N, dtype=d)), N * N),
    "softmax dim 0": ("normalization", _op(lambda x: x.softmax(0), lambda d: _rand(N, N, dtype=d)), N * N),
    "clip_grad_norm_ 8 x 128k": ("normalization", (lambda dev, dt, grad: _clip(dev, dt, grad), False), 8 * 128 * 1024),
    # convolution, pooling, resampling
    "conv2d 3x3 8x32x56x56": (
        "convolution and pooling",
        _module(lambda: torch.nn.Conv2d(32, 32, 3, padding=1), IMG),
        8 * 32 * 56 * 56,
    ),
    "conv2d 1x1 8x32x56x56": (
        "convolution and pooling",
        _module(lambda: torch.nn.Conv2d(32, 64, 1), IMG),
        8 * 32 * 56 * 56,
    ),
    "conv1d k5 16x64x1024": (
        "convolution and pooling",
        _module(lambda: torch.nn.Conv1d(64, 64, 5, padding=2), (16, 64, 1024)),
        16 * 64 * 1024,
    ),
    "conv_transpose2d 8x32x28x28": (
        "convolution and pooling",
        _module(lambda: torch.nn.ConvTranspose2d(32, 16, 4, 2, 1), (8, 32, 28, 28)),
        8 * 32 * 28 * 28,
    ),
    "max_pool2d 3/2": (
        "convolution and pooling",
        _op(lambda x: F.max_pool2d(x, 3, 2, 1), lambda d: _rand(*IMG, dtype=d)),
        8 * 32 * 56 * 56,
    ),
    "avg_pool2d 2/2": (
        "convolution and pooling",
        _op(lambda x: F.avg_pool2d(x, 2), lambda d: _rand(*IMG, dtype=d)),
        8 * 32 * 56 * 56,
    ),
    "adaptive_avg_pool2d 7": (
        "convolution and pooling",
        _op(lambda x: F.adaptive_avg_pool2d(x, 7), lambda d: _rand(*IMG, dtype=d)),
        8 * 32 * 56 * 56,
    ),
    "interpolate bilinear x2": (
        "convolution and pooling",
        _op(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), lambda d: _rand(8, 32, 28, 28, dtype=d)),
        8 * 32 * 28 * 28,
    ),
    "interpolate bicubic x2": (
        "convolution and pooling",
        _op(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), lambda d: _rand(8, 32, 28, 28, dtype=d)),
        8 * 32 * 28 * 28,
    ),
    "interpolate nearest x2": (
        "convolution and pooling",
        _op(lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), lambda d: _rand(8, 32, 28, 28, dtype=d)),
        8 * 32 * 28 * 28,
    ),
    # recurrent
    "LSTM 256, 64 steps x 16": ("recurrent", _module(lambda: torch.nn.LSTM(256, 256), (64, 16, 256)), 64 * 16 * 256),
    "GRU 256, 64 steps x 16": ("recurrent", _module(lambda: torch.nn.GRU(256, 256), (64, 16, 256)), 64 * 16 * 256),
    # conversions and copies
    "to float32": ("elementwise", _op(lambda x: x.float(), lambda d: _rand(N, N, dtype=d)), N * N),
    "to bfloat16": ("elementwise", _op(lambda x: x.to(torch.bfloat16), lambda d: _rand(N, N, dtype=d)), N * N),
    "contiguous of a transpose": (
        "elementwise",
        _op(lambda x: x.t().contiguous(), lambda d: _rand(N, N, dtype=d)),
        N * N,
    ),
    "add of a transposed operand": (
        "elementwise",
        _op(lambda x, y: x + y.t(), lambda d: _rand(N, N, dtype=d), lambda d: _rand(N, N, dtype=d, seed=3)),
        2 * N * N,
    ),
    "cumsum dim 0": ("reductions", _op(lambda x: x.cumsum(0), lambda d: _rand(N, N, dtype=d)), N * N),
    "cumsum dim 1": ("reductions", _op(lambda x: x.cumsum(1), lambda d: _rand(N, N, dtype=d)), N * N),
    "sort dim -1": ("reductions", _op(lambda x: x.sort(-1).values, lambda d: _rand(N, N, dtype=d)), N * N),
    "topk 8 dim -1": ("reductions", _op(lambda x: x.topk(8, -1).values, lambda d: _rand(N, N, dtype=d)), N * N),
}


def extra_cases(dtype: torch.dtype, kinds: set, chosen):
    """(label, family, mytorch call, CPU call, input elements) for the cases `chosen(name)` admits, or (label, why)
    where a side cannot be built."""
    dname = str(dtype).removeprefix("torch.")
    for name, (fam, (build, has_backward), elements) in CASES.items():
        if not chosen(name):
            continue
        for kind in ("forward", "backward"):
            if kind not in kinds or (kind == "backward" and (not has_backward or dtype != torch.float32)):
                continue
            label = f"{name} {dname} {kind}"
            try:
                fm = build("mytorch", dtype, kind == "backward")
                fr = build("cpu", dtype, kind == "backward")
            except Exception as e:  # noqa: BLE001 - the report lists it
                yield label, f"could not be built: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
                continue
            yield label, fam, fm, fr, elements


# Why the worst families stay slow (docs/speed.md's "Known misses"): fnmatch patterns on the case label -> the reason,
# where it was read from the code or a profile, else "not profiled yet"; issue 55's remaining work.
MISSES = {
    "nn.functional.interpolate*|nn.functional.upsample*": "op_db's samples are a few hundred elements: the glue's "
    "per-call work (weight matrices or index maps made per call, Note [Resampling by weight matrices]) dominates; the "
    "index maps are host loops since e5b846c (nearest 0.27-0.34x -> 0.51-0.56x, pad.reflect 0.20x -> 0.38x; they took 3-5 "
    "pointwise launches per dimension); at the family's size (interpolate x2 of 8x32x28x28) bilinear, bicubic and "
    "nearest are at or above the CPU",
    "grid_sampler_2d*": "2-D bilinear runs in blocks of 8 locations (Note [Sim bilinear blocks]), float32 in AVX2 "
    "with masked gathers since da97497 and 751688e (forward 0.16x -> 0.69x, backward 0.22x -> 0.68x); the strided "
    "case copies its input to a contiguous one first (the kernels read N C H W contiguous); the CPU's kernel is "
    "AVX-512 on this machine",
    "nonzero*|unique*|masked_select*|masked_scatter*": "data-dependent output sizes: nonzero is a compaction by "
    "prefix sums (Note [Nonzero by prefix sums]: block counts, their offsets, each block's rows; sim and CUDA) that "
    "copies a strided input first, masked_select and masked_scatter_ compose it with the index engine, and the count "
    "is read on the host (one synchronisation, as on the CPU); unique_consecutive is composed; op_db's small samples "
    "pay the glue's per-call work",
    "square*|float_power*": "square is pow(x, 2), x * x as ATen's CPU kernel computes it (csrc/aten/pointwise/"
    "BinaryOps.cpp), memory-bound at 1M elements; float_power computes in float64 on the scalar libm (float64 keeps "
    "it: Note [Sim vector math]); not profiled further. pow and __rpow__ left this list (Note [pow in float]: "
    "0.29-0.54x -> 1.14-1.22x at 61bbdc5)",
    "frexp*|mvlgamma*": "frexp left this list (two rows of the elementwise engine since 94cf24d: 0.16-0.27x -> "
    "1.4-2.6x); mvlgamma is "
    "composed (an arange, a broadcast sum of lgamma, a reduction): its lgamma vectorises since 43f769c (Note [lgamma "
    "in float]: lgamma 0.15x -> 1.27x, mvlgamma forward 0.17-0.43x -> 0.35-0.73x); its broadcast add and its sum "
    "over p (rows of 1-5 elements) run as short runs and short reductions since 238a5d8 (Note [Sim short "
    "reductions]: 0.34-0.73x -> 0.80-1.40x); both sides run ATen's composition (CompositeExplicitAutograd). "
    "erfinv and lgamma (43f769c: 0.08x -> 1.0x, 0.15x -> 1.27x), remainder, fmod, floor division and atan2 left "
    "this list (Note [Vectorised fmod], libmvec's atan2f), and so did i0/i1/K/J/Y, spherical_bessel_j0 and ndtri "
    "(Note [Special functions in float]: 0.04-0.74x -> 1.0-15x)",
    "linalg.*|triangular_solve*|cholesky*|qr*|geqrf*|ormqr*|svd*|pinverse*|lu_solve*|lu_unpack*|logdet*|matrix_exp*": "op_db's samples are small matrices (a few hundred elements), where the "
    "glue's per-call work dominates: the composed solvers run several native kernels and copies around the CPU's "
    "LAPACK call (Note [Dense solver family]); their meta call is cached since 0668b14 (Note [Cached meta results]: "
    "torch's Python meta kernel cost 15-40 us a call); ldl_factor and ldl_solve call LAPACK's sytrf and sytrs "
    "on the host route since 67434c5 (composed before: 0.01-0.05x); the sim's triangular solve substitutes whole rows "
    "of columns in parallel since 873cddc (linalg.lu_factor's backward 0.35x -> 0.88x); matrix_exp evaluates its "
    "degree-18 polynomial in 7 float64 GEMMs since da007d2 (0.50x -> 0.64x; it was 17)",
    "gather*|scatter*|index_*|take*|put*": "a gather with one index tensor checks a row's indices, then copies "
    "without a branch, split over elements (index.cpp is compiled for the portable ISA only: no vector gathers; the "
    "CPU's inner-dimension gather is about 2.7x faster); a scatter splits over a coordinate whose targets are disjoint, "
    "or by target rows (Note [Sim scatter]), else it is serial, its op fixed per loop (since 6cae2e8: the serial path "
    "switched on the op per element, index_copy 0.37x -> 0.70x, scatter 0.46x -> 0.92x); a bfloat16 scatter_reduce "
    "converts each element; op_db's small samples pay the glue's per-call checks",
    "conv*|nn.functional.conv*": "large convolutions' forward and input gradient run on the CPU's oneDNN (Note [Sim "
    "convolution host route]), with a copy of the result; their weight gradient, 1x1 and small convolutions stay on "
    "the sim's blocked im2col + GEMM (Note [Sim convolution]): oneDNN's weight gradient changes with the thread count, "
    "the sim's does not; op_db's 3-D samples are small, where the CPU's own direct convolution is faster",
    "nn.functional.multi_margin_loss*|nn.functional.multilabel_margin_loss*": "composed from native kernels (Note "
    "[Composed ops], csrc/aten/nn/MarginLoss.cpp): multi_margin_loss is about 17 aten calls of 1-10 us each "
    "(torch.profiler over 200 calls at 60 x 123: ne, where, sum, add, div, gt, ge, gather, any, logical_or, ...), "
    "against the CPU's one loop over the samples (about 60 us against 10); multilabel_margin_loss builds an (N, C, C) "
    "tensor of target-class pairs, C times the input's memory; a native kernel would take both to the CPU's cost",
    "LSTM*|GRU*": "the input projection is one GEMM per layer and the cell one kernel (Note [Whole-sequence RNN "
    "layers]); each step's hidden GEMM has batch rows (16), where the CPU BLAS runs at a third to a half of its "
    "large-GEMM rate, and the CPU's LSTM is oneDNN's RNN primitive (aten::mkldnn_rnn_layer), whose step GEMMs are its own; the CPU's "
    "GRU is ATen's composite",
}
