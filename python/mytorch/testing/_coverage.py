"""The fallback ledger of the coverage page (docs/coverage.md): which family each operator that still reaches the
CPU fallback belongs to, why it does, and the fast subset of OpInfos that CI re-runs to check that the committed
alignment report (docs/alignment/sim.json, from which the page is rendered) is current."""

from __future__ import annotations

import collections
import re

# Families of aten operators, matched on the operator's name without "aten::" and the overload, first match wins
# (the grouping: FFT, special functions, linear algebra, convolution, reductions and scans, vision,
# pointwise and the rest).
FAMILIES = [
    ("FFT", r"^_fft_"),
    (
        "special functions",
        r"^special_|polygamma|lgamma|digamma|^i0|igamma|^erfc|^erfinv|zeta|^logit|xlogy|^sinc|^entr|ndtr",
    ),
    (
        "linear algebra",
        r"^_?linalg_|^_?lu_|cholesky|^_?svd|^geqrf|^ormqr|^triangular_solve|^dot$|^vdot$|^addmv$|^mm$|^bmm$|^addmm$"
        r"|^addbmm$|^baddbmm$|^trace$|^_?cdist|^_?pdist|^inverse$|^_?det$",
    ),
    ("convolution", r"convolution|^conv|im2col|col2im"),
    (
        "reductions and scans",
        r"^norm$|^equal$|^nansum$|median|^index_reduce$|segment_reduce|^mode$|^kthvalue$|^aminmax$|_cummax|_cummin"
        r"|^renorm$|histogram|^bucketize$|^searchsorted$|unique|nonzero|^hash_tensor$|^repeat_interleave$",
    ),
    ("vision / pooling / padding", r"pool|_pad|grid_sampler|upsample|channel_shuffle|^unfold"),
    ("pointwise and the rest", r".*"),
]

# Why an operator still takes the fallback, where the reason is more than "no native kernel yet".
REASONS = {
    "aten::linalg_matrix_exp": "float16/bfloat16: the CPU reference evaluates in the half type and returns NaN where the exponential is representable; a correct kernel cannot match it",
    "aten::histogram.bin_ct": "a CPU-only operator: PyTorch has no device kernel for histogram (CUDA raises)",
    "aten::histogram.bins_tensor": "a CPU-only operator: PyTorch has no device kernel for histogram (CUDA raises)",
    "aten::_histogramdd_bin_edges": "a CPU-only operator: PyTorch has no device kernel for histogramdd",
    "aten::_histogramdd_from_bin_cts": "a CPU-only operator: PyTorch has no device kernel for histogramdd",
    "aten::_histogramdd_from_bin_tensors": "a CPU-only operator: PyTorch has no device kernel for histogramdd",
    "aten::linalg_eig": "non-Hermitian eigenproblem: cuSOLVER's geev is recent (CUDA 12.6+) and torch.cuda itself computes it on the host",
}
DEFAULT_REASON = "no native kernel yet"

# OpInfos CI aligns again to check the committed report (test_alignment.py): a few per family, native and
# fallback alike, at every dtype and sample, as the committed run.
FAST_SUBSET = [
    "fft.fft",
    "fft.irfftn",
    "special.i0e",
    "polygamma.polygamma_n_1",
    "igamma",
    "matmul",
    "linalg.svd",
    "linalg.solve",
    "linalg.qr",
    "linalg.eig",
    "dot",
    "nn.functional.conv1d",
    "nn.functional.conv3d",
    "nn.functional.conv_transpose2d",
    "median",
    "mode",
    "index_reduce.amax",
    "searchsorted",
    "cumsum",
    "nn.functional.pad.reflect",
    "nn.functional.interpolate.nearest-exact",
    "nn.functional.grid_sample",
    "nn.functional.max_unpool2d",
    "logspace",
    "add",
    "nn.functional.glu",
    "equal",
    "_segment_reduce.lengths",
    "hash_tensor",
    "nn.functional.adaptive_max_pool2d",
]


def family(op: str) -> str:
    base = op.removeprefix("aten::").split(".")[0]
    for name, pattern in FAMILIES:
        if re.search(pattern, base):
            return name
    return FAMILIES[-1][0]


def reason(op: str) -> str:
    return REASONS.get(op, DEFAULT_REASON)


def fallback_cases(cases) -> list[dict]:
    """The aligned, mismatching or erroring cases that ran at least one operator through the fallback."""
    return [c for c in cases if c["verdict"] in ("aligned", "mismatch", "error") and c.get("fallback_ops")]


def per_family(cases) -> dict[str, tuple[int, collections.Counter]]:
    """family -> (cases needing one of its operators, {operator: cases})."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    totals: collections.Counter = collections.Counter()
    for c in fallback_cases(cases):
        seen = set()
        for op in set(c["fallback_ops"]):
            f = family(op)
            counts[f][op] += 1
            seen.add(f)
        for f in seen:
            totals[f] += 1
    return {name: (totals[name], counts[name]) for name, _ in FAMILIES}


def case_key(c: dict) -> tuple:
    """What the fast-subset check compares: the verdict, whether it ran natively, the fallback operators and the
    families of the sim's host route it took (Note [Sim host route])."""
    return (
        c["verdict"],
        bool(c.get("native")),
        tuple(sorted(set(c.get("fallback_ops") or []))),
        tuple(sorted(c.get("host_route") or [])),
    )
