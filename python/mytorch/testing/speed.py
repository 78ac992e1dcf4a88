"""The speed report: every operator with a native sim kernel, timed against torch CPU in one process (issue 55).

    python -m mytorch.testing.speed                 # every case; writes benchmarks/results/speed.{json,md}
    python -m mytorch.testing.speed --docs          # and docs/speed.md (the tracked report)
    python -m mytorch.testing.speed --ops 'amax*' 'gather' --repeat 5

Which operators: the OpInfos of PyTorch's op_db that the committed alignment report (docs/alignment/sim.json, the
coverage report's source) finds running on mytorch's own kernels at the dtype, with nothing on the CPU fallback.

The inputs, at a medium size per family:
- elementwise (op_db's unary and binary ufuncs): 1024 x 1024 operands (1M elements) within the op's domain and its
  own make_tensor arguments;
- reductions (op_db's reduction OpInfos): a 1024 x 1024 operand reduced over everything, over dim 0 (the outer
  dimension: "outer") and over dim -1 ("inner"), with the OpInfo's own first extra arguments;
- every other OpInfo: its own sample inputs made with op_db's size constants (S, M, L: 5, 10, 20) scaled by --scale
  (default 12: 60, 120, 240), the sample with the most input elements up to --max-elements (default 4M). Many
  sample functions use literal shapes, so some of these samples stay small: the report gives each case's input
  elements, and a case under 4,096 elements measures dispatch more than its kernel;
- the families issue 55 names that op_db samples small or not at all (mytorch/testing/_speed_cases.py): indexing
  along inner and outer dimensions, random sampling, batch norm in training, gradient clipping, convolution,
  pooling, resampling, LSTM/GRU, dtype conversion.
For each:
- forward, at float32 and bfloat16 (where the op has a native kernel at that dtype);
- "strided": forward at float32 with every input tensor of two or more dimensions made non-contiguous (the same
  values, the last two dimensions' strides swapped), both sides alike;
- "backward": forward + backward at float32 (a vector-Jacobian product with ones) where the op supports autograd.
Each case runs through the shared harness (mytorch.testing.bench: interleaved rounds, the CPU allocator steady)
at the machine's default threads for both sides unless --threads says otherwise. A case that reaches the CPU
fallback on mytorch at this size, raises, or gives a result of another shape is listed apart, not timed.

The figure is the harness's RATIO: torch CPU time / mytorch time (above 1: mytorch is faster). The report sorts
the cases worst first and gives the median, the 10th percentile (the 90th percentile of mytorch's time over the
CPU's) and the worst, overall and by family.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import statistics
import sys
import time

import torch

from . import bench

FAMILY_OF_CLASS = {"UnaryUfuncInfo": "elementwise", "BinaryUfuncInfo": "elementwise", "ReductionOpInfo": "reductions"}
FAMILY_PATTERNS = [  # on the OpInfo's name, first match wins, after the classes above
    ("random", "normal*|bernoulli|uniform|rand*|multinomial|*dropout*|exponential|geometric|cauchy|log_normal"),
    ("indexing", "*index*|gather|scatter*|take*|put|masked*|nonzero*|unique*|*select*|where|argwhere|*embedding*"),
    ("reductions", "sum|prod|mean|var*|std*|amax|amin|max*|min*|argmax|argmin|norm*|logsumexp|cum*|all|any|count*"),
    ("normalization", "*norm*|*batch_norm*|*group_norm*|*layer_norm*|softmax|log_softmax|*softmin*"),
    ("convolution and pooling", "*conv*|*pool*|*interpolate*|*upsample*|*grid_sample*|*pad*|*fold*"),
    ("linear algebra", "linalg.*|matmul|mm|bmm|addmm|addmv|addbmm|baddbmm|mv|dot|vdot|einsum|tensordot|inner|outer"),
    ("recurrent", "*rnn*|*lstm*|*gru*"),
]


def family(op) -> str:
    cls = type(op).__name__
    if cls in FAMILY_OF_CLASS:
        return FAMILY_OF_CLASS[cls]
    for name, pats in FAMILY_PATTERNS:
        if any(fnmatch.fnmatch(op.name, p) for p in pats.split("|")):
            return name
    return "other"


def native_ops(report_path: str) -> dict[tuple[str, str], bool]:
    """(op key, dtype) -> True where the alignment report ran the op on mytorch's kernels with no fallback."""
    cases = json.load(open(report_path))["cases"]
    return {(c["op"], c["dtype"]): bool(c.get("native")) and not c.get("fallback_ops") for c in cases}


def _scaled_sizes(scale: int):
    """op_db's size constants multiplied by `scale` in every module whose sample functions read them."""
    import importlib

    mods = ["torch.testing._internal.opinfo.core", "torch.testing._internal.common_methods_invocations"]
    mods += [
        f"torch.testing._internal.opinfo.definitions.{m}" for m in ("linalg", "special", "fft", "signal", "nested")
    ]
    saved = []
    for name in mods:
        try:
            m = importlib.import_module(name)
        except ImportError:
            continue
        for const, base in (("S", 5), ("M", 10), ("L", 20), ("XS", 3)):
            if getattr(m, const, None) == base:
                saved.append((m, const, base))
                setattr(m, const, base * scale)
    return saved


class _Sample:
    def __init__(self, input, args=(), kwargs=None, tag=""):
        self.input, self.args, self.kwargs, self.tag = input, tuple(args), dict(kwargs or {}), tag


SIDE = 1024  # generated operands are SIDE x SIDE


def generated_samples(op, dtype) -> list | None:
    """Medium-size samples for op_db's unary/binary ufuncs and reductions (module doc), or None for other ops."""
    from torch.testing import make_tensor

    cls = type(op).__name__
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if cls == "UnaryUfuncInfo":
        lo, hi = op.domain
        lo = None if lo is None else lo + 0.125
        hi = None if hi is None else hi - 0.125
        x = make_tensor((SIDE, SIDE), dtype=dtype, device="cpu", low=lo, high=hi)
        kwargs = op.sample_kwargs("cpu", dtype, x)[0] if op.sample_kwargs else {}
        return [_Sample(x, (), kwargs)]
    if cls == "BinaryUfuncInfo":
        x = make_tensor((SIDE, SIDE), dtype=dtype, device="cpu", **op.lhs_make_tensor_kwargs)
        y = make_tensor((SIDE, SIDE), dtype=dtype, device="cpu", **op.rhs_make_tensor_kwargs)
        kwargs = op.sample_kwargs("cpu", dtype, x)[0] if op.sample_kwargs else {}
        return [_Sample(x, (y,), kwargs)]
    if cls == "ReductionOpInfo":
        x = make_tensor((SIDE, SIDE), dtype=dtype, device="cpu")
        args, kwargs = next(iter(op.generate_args_kwargs(x)), ((), {}))
        kwargs = {k: v for k, v in kwargs.items() if k not in ("dim", "keepdim")}
        out = [_Sample(x, args, kwargs, "all")]
        out += [_Sample(x, args, dict(kwargs, dim=d), tag) for d, tag in ((0, "outer"), (-1, "inner"))]
        del g
        return out
    return None


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0][:120] if str(e) else ""


def _tensors(x) -> list:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(x) if isinstance(t, torch.Tensor)]


def _numel(sample) -> int:
    return sum(t.numel() for t in _tensors((sample.input, sample.args, sample.kwargs)))


def pick_sample(op, dtype, max_elements: int, scale: int):
    """The op's sample with the most input elements up to max_elements (sizes scaled), or None."""
    saved = _scaled_sizes(scale)
    try:
        best, best_n = None, -1
        for s in op.sample_inputs("cpu", dtype, requires_grad=False):
            n = _numel(s)
            if best_n < n <= max_elements:
                best, best_n = s, n
        return best
    finally:
        for m, const, base in saved:
            setattr(m, const, base)


def _strided(t: torch.Tensor) -> torch.Tensor:
    """The same values with the last two dimensions' strides swapped (non-contiguous for a real 2-D block)."""
    if t.layout != torch.strided or t.dim() < 2 or t.shape[-1] < 2 or t.shape[-2] < 2:
        return t
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _place(sample, device: str, strided: bool, grad: bool):
    from torch.utils._pytree import tree_map

    def move(x):
        if not isinstance(x, torch.Tensor):
            return x
        y = x.detach().to(device)
        if strided:
            y = _strided(y)
        if grad and y.is_floating_point():
            y.requires_grad_(True)
        return y

    return tree_map(move, (sample.input, sample.args, sample.kwargs))


def _call(op, placed):
    inp, args, kwargs = placed
    return op(inp, *args, **kwargs)


def _backward_fn(op, placed):
    leaves = [t for t in _tensors(placed) if t.requires_grad]

    def run():
        outs = [o for o in _tensors(_call(op, placed)) if o.requires_grad]
        torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs], allow_unused=True)

    return run, bool(leaves)


def op_key(op) -> str:
    from ._cases import op_key as key

    return key(op)


def _kinds(sample, dtype_name: str, supports_autograd: bool, kinds: set) -> list:
    out = ["forward"]
    if dtype_name == "float32":
        if any(t.dim() >= 2 and min(t.shape[-2:]) >= 2 for t in _tensors((sample.input, sample.args))):
            out.append("strided")
        if supports_autograd:
            out.append("backward")
    return [k for k in out if k in kinds]


def op_cases(op, dtype_name: str, args):
    """(label, family, mytorch call, CPU call, input elements) for an OpInfo at a dtype, or (label, why) pairs."""
    dtype = getattr(torch, dtype_name)
    try:
        samples = generated_samples(op, dtype)
        if samples is None:
            one = pick_sample(op, dtype, args.max_elements, args.scale)
            samples = [] if one is None else [one]
    except Exception as e:  # noqa: BLE001 - the report lists it
        samples = []
        yield f"{op_key(op)} {dtype_name}", f"no sample: {type(e).__name__}: {_first_line(e)}"
    else:
        if not samples:
            yield f"{op_key(op)} {dtype_name}", "no sample within --max-elements"
    for sample in samples:
        tag = f" {sample.tag}" if getattr(sample, "tag", "") else ""
        for kind in _kinds(sample, dtype_name, op.supports_autograd, args.kinds):
            label = f"{op_key(op)}{tag} {dtype_name} {kind}"
            strided, grad = kind == "strided", kind == "backward"
            try:
                ref, mine = _place(sample, "cpu", strided, grad), _place(sample, "mytorch", strided, grad)
            except Exception as e:  # noqa: BLE001
                yield label, f"inputs not placed: {type(e).__name__}: {_first_line(e)}"
                continue
            if grad:
                fm, has = _backward_fn(op, mine)
                fr, _ = _backward_fn(op, ref)
                if not has:
                    continue
            else:
                fm, fr = (lambda m=mine: _call(op, m)), (lambda r=ref: _call(op, r))
            yield label, family(op), fm, fr, _numel(sample)


def run_case(b: bench.Bench, label, fam, fm, fr, elements, repeat):
    """Times one case after checking it once: the same result shapes on both sides, nothing on the fallback."""
    from .. import _C

    try:
        f0 = _C._fallback_totals()[0]
        got, want = fm(), fr()
        fell = _C._fallback_totals()[0] - f0
    except Exception as e:  # noqa: BLE001 - the report lists it
        return None, f"raised {type(e).__name__}: {_first_line(e)}"
    shapes = lambda x: [tuple(t.shape) for t in _tensors(x)]  # noqa: E731
    if shapes(got) != shapes(want):
        return None, f"result shapes {shapes(got)} != the CPU's {shapes(want)}"
    if fell:
        return None, f"{fell} call(s) on the CPU fallback"
    row = b.compare(label, fm, fr, repeat=repeat)
    row.extra.update(family=fam, elements=elements)
    return row, ""


def summarize(rows) -> dict:
    def stats(rs):
        r = sorted(x.ratio for x in rs)
        if not r:
            return {}
        p10 = r[max(0, int(round(0.1 * (len(r) - 1))))]
        return {"cases": len(r), "median": statistics.median(r), "p10": p10, "worst": r[0]}

    fams = sorted({x.extra["family"] for x in rows})
    return {"all": stats(rows), **{f: stats([x for x in rows if x.extra["family"] == f]) for f in fams}}


def case_key(case: str, extra: dict) -> tuple:
    """A case's identity across runs: its label and input size (an op's op_db sample and its family-sized sample share
    the label)."""
    return case, extra.get("elements")


def summarize_before(before: dict, rows) -> dict:
    """The summary of the baseline's ratios over the cases timed in both runs."""

    class R:
        def __init__(self, ratio, fam):
            self.ratio, self.extra = ratio, {"family": fam}

    found = [(before[k], r.extra["family"]) for r in rows if (k := case_key(r.case, r.extra)) in before]
    return summarize([R(ratio, fam) for ratio, fam in found])


def render(b: bench.Bench, rows, skipped, summary, command: str, before: dict | None = None) -> str:
    lines = [
        "# Speed report: the sim's native operators against torch CPU",
        "",
        "Generated by `" + command + "` (mytorch/testing/speed.py says how the cases are made). "
        "Ratio: torch CPU time / mytorch time, one process, interleaved medians (above 1: mytorch is faster; "
        "issue 55's targets in these terms: every case ≥ 0.8, elementwise and reductions ≥ 1.0, none below 0.67 "
        "without a reason below, median ≥ 1.11).",
        "",
        *[f"    {h}" for h in b.header],
        "",
        "## Summary",
        "",
        "| family | cases | median | 10th percentile | worst |" + (" median before | worst before |" if before else ""),
        "|---|---|---|---|---|" + ("---|---|" if before else ""),
    ]
    old = summarize_before(before, rows) if before else {}
    for fam, s in summary.items():
        if s:
            line = f"| {fam} | {s['cases']} | {s['median']:.2f} | {s['p10']:.2f} | {s['worst']:.2f} |"
            if before:
                o = old.get(fam) or {}
                line += f" {o.get('median', float('nan')):.2f} | {o.get('worst', float('nan')):.2f} |"
            lines.append(line)
    lines += [
        "",
        "## Every case, worst first",
        "",
        "| case | family | input elements | mytorch ms | CPU ms | ratio [IQR] |" + (" before |" if before else ""),
        "|---|---|---|---|---|---|" + ("---|" if before else ""),
    ]
    for r in sorted(rows, key=lambda x: x.ratio):
        line = (
            f"| {r.case} | {r.extra['family']} | {r.extra['elements']:,} | {r.mytorch_ms:.3f} | {r.reference_ms:.3f} "
            f"| {r.ratio:.2f} [{r.ratio_lo:.2f}-{r.ratio_hi:.2f}] |"
        )
        if before:
            k = case_key(r.case, r.extra)
            line += f" {before[k]:.2f} |" if k in before else " |"
        lines.append(line)
    from ._speed_cases import MISSES

    lines += ["", "## Known misses", "", "Families with cases below 0.67, and why where it is known:", ""]
    lines += ["| cases | below 0.67 | why |", "|---|---|---|"]
    for pats, why in MISSES.items():
        hit = [r for r in rows if any(fnmatch.fnmatch(r.case, p) for p in pats.split("|"))]
        slow = sum(r.ratio < 0.67 for r in hit)
        lines.append(f"| {', '.join(f'`{q}`' for q in pats.split('|'))} | {slow} of {len(hit)} | {why} |")
    lines += ["", "## Not timed", "", "| case | why |", "|---|---|"]
    lines += [f"| {c} | {why} |" for c, why in skipped]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    bench.add_args(p, repeat=5)
    p.set_defaults(threads=torch.get_num_threads(), min_sample_ms=10.0)
    p.add_argument("--ops", nargs="*", default=[], help="fnmatch patterns on the case's operator (default: every op)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--kinds", default="forward,strided,backward")
    p.add_argument("--scale", type=int, default=12, help="op_db's size constants S, M, L times this")
    p.add_argument("--max-elements", type=int, default=4 << 20, help="the largest sample taken (input elements)")
    p.add_argument("--report", default=os.path.join(bench.ROOT, "docs", "alignment", "sim.json"))
    p.add_argument("--baseline", default="", help="a speed.json of an earlier run: its ratios shown beside")
    args = bench.parse_args(p, "mytorch.testing.speed") if argv is None else p.parse_args(argv)
    args.kinds = set(args.kinds.split(","))
    from torch.testing._internal.common_methods_invocations import op_db

    from ._speed_cases import extra_cases

    b = bench.Bench("speed", args, "every native sim operator against torch CPU (issue 55)")
    native = native_ops(args.report)
    chosen = lambda key: not args.ops or any(fnmatch.fnmatch(key, pat) for pat in args.ops)  # noqa: E731
    rows, skipped = [], []
    t0 = time.time()

    def run(cases):
        for case in cases:
            if len(case) == 2:
                skipped.append(case)
                continue
            row, why = run_case(b, *case, args.repeat)
            if row is None:
                skipped.append((case[0], why))
            else:
                rows.append(row)

    for op in op_db:
        if chosen(op_key(op)):
            for dtype_name in args.dtypes.split(","):
                if native.get((op_key(op), dtype_name)):
                    run(op_cases(op, dtype_name, args))
    for dtype_name in args.dtypes.split(","):
        run(extra_cases(getattr(torch, dtype_name), args.kinds, chosen))
    summary = summarize(rows)
    command = "python -m mytorch.testing.speed" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    before = {}
    if args.baseline:
        before = {case_key(r["case"], r.get("extra", {})): r["ratio"] for r in json.load(open(args.baseline))["rows"]}
    shown = " ".join(a for a in command.split() if a != "--docs" and not a.startswith("--baseline"))
    text = render(b, rows, skipped, summary, shown, before)
    payload = {
        "command": command,
        "header": b.header,
        "summary": summary,
        "rows": [r.__dict__ for r in rows],
        "skipped": skipped,
    }
    for docs in (False, True) if args.docs else (False,):  # docs/ gets the page; the JSON stays in --out
        with open(b.path("speed.md", docs), "w") as f:
            f.write(text)
    with open(b.path("speed.json"), "w") as f:
        json.dump(payload, f, indent=1, default=str)
    print(f"\n{len(rows)} cases timed, {len(skipped)} not, in {time.time() - t0:.0f} s")
    for fam, st in summary.items():
        if st:
            print(f"{fam:28s} {st['cases']:5d} median {st['median']:.2f} p10 {st['p10']:.2f} worst {st['worst']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
