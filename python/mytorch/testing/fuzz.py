"""The robustness fuzzer: PyTorch's OpInfo samples on mytorch as a careless user would pass them, each case in
a worker process under a time limit, against the CPU (issue 19; docs/robustness.md).

    python -m mytorch.testing.fuzz --cases 300 --seed 1          # a seeded sample (CI runs one)
    python -m mytorch.testing.fuzz --cases 0 --report docs/robustness.md   # the full campaign

Variants of each OpInfo sample (at float32, int64, complex64, bool and bfloat16, where the CPU supports them):
functional (values or exception class as the CPU's), non-contiguous out= (written through its strides, its
gaps untouched), reshaped out= (the right number of elements in another, non-contiguous shape: its final sizes,
strides and values as the CPU's), expanded out=, wrong-dtype out= and promoted out= (a dtype one promotion step up:
refused where the CPU refuses them), a promoted argument (a tensor argument after the first one promotion step up:
refused or computed as on the CPU), one argument on the CPU or on another mytorch device (refused, as CUDA does),
and the OpInfo's error inputs (the CPU's exception class). Then the hand-written bad inputs of _fuzz_bad.py (indices
out of range, huge sizes, NaN and infinity, integer overflow, tensors without elements, resize_/set_/as_strided
misuse), which every sample runs first, and the generated classes, shuffled in with the OpInfo cases: the random
ops at the edges of their arguments, the factories with every kind of out= and the like factories over inputs
whose elements share memory (_fuzz_edges.py: the CPU's exceptions, warnings, sizes and strides). Around every call
a bystander tensor on the device and the case's inputs are checksummed.

Verdicts: ok; differs (a difference from the CPU: one that KNOWN_DIFFERENCES does not list fails the run);
corruption (a bystander, an input, an out='s
gaps changed, or a wrong-dtype out= accepted); mixed_device (a tensor on another device accepted); crash (the
worker died, twice); hang (past --timeout); harness (the fuzzer's own code failed: fails the run too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

from ._pool import run_pool

VARIANTS = [
    "functional",
    "noncontig_out",
    "reshaped_out",
    "expanded_out",
    "wrong_dtype_out",
    "promoted_out",
    "promoted_arg",
    "aten_out",
    "cpu_arg",
    "other_device",
    "error_inputs",
    "bad_input",
    "random_edges",
    "factory_out",
]
DTYPES = ["float32", "int64", "complex64", "bool", "bfloat16"]
BAD = ("corruption", "mixed_device", "crash", "hang", "harness")
# The differences from the CPU that are kept on purpose (docs/robustness.md gives the reasons): OpInfo name and
# variant, to (a text the case's detail contains, the reason). A difference not listed here fails the run like a
# corruption does.
_STATS = "saved statistics in float32 for a half input, as CUDA keeps them"
_STD_VAR = "the CPU's full-reduction path lacks bfloat16 and raises for a float64 out=; CUDA's reduction takes it"
KNOWN_DIFFERENCES = {
    ("native_batch_norm", "functional"): ("output 1 is torch.float32", _STATS),
    ("_native_batch_norm_legit", "functional"): ("output 1 is torch.float32", _STATS),
    ("_batch_norm_with_update", "functional"): ("output 1 is torch.float32", _STATS),
    ("native_layer_norm", "functional"): ("output 1 is torch.float32", _STATS),
    ("nn.functional.layer_norm", "aten_out"): (
        "Expected out tensor to have dtype float, but got c10::BFloat16",
        _STATS,
    ),
    ("narrow_copy", "error_inputs"): (
        "IndexError where the CPU raises RuntimeError",
        "a dim past the last raises IndexError, as narrow (and CUDA's narrow_copy) does; "
        "the CPU kernel fails an internal check",
    ),
    ("std", "aten_out"): ("std_var_all: Unsupported dtype BFloat16", _STD_VAR),
    ("std.unbiased", "aten_out"): ("std_var_all: Unsupported dtype BFloat16", _STD_VAR),
    ("var", "aten_out"): ("std_var_all: Unsupported dtype BFloat16", _STD_VAR),
    ("var.unbiased", "aten_out"): ("std_var_all: Unsupported dtype BFloat16", _STD_VAR),
    ("nn.functional.gelu", "aten_out"): (
        "itensor_view_from_dense expects",
        "the CPU's oneDNN gelu backward refuses a "
        "float64 out= for bfloat16 inputs; ATen's TensorIterator rule (and CUDA) "
        "casts into it",
    ),
    **{
        (f"factory:randperm/{d}/overlapping", "factory_out"): (
            "unsupported operation: more than one element",
            "an out= whose elements share memory is refused, as torch.cuda's randperm refuses it (it copies into a "
            "non-contiguous out= through copy_); the CPU kernel writes every draw into the one shared element",
        )
        for d in ("float32", "float64", "int64", "bfloat16")
    },
    **{
        (f"nn.functional.{conv}", "promoted_arg"): (
            "bias type",
            "a bias of another dtype than the input is refused on every path, as torch.cuda refuses it; the CPU "
            "refuses it on its oneDNN paths and adds it after a cast on its slow ones",
        )
        for conv in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
    },
    ("bad:int/floor_divide_by_zero", "bad_input"): (
        "ZeroDivisionError",
        "integer division by zero does not raise, as on CUDA: it would need a synchronizing read of the divisor",
    ),
    ("bad:int/remainder_by_zero", "bad_input"): (
        "ZeroDivisionError",
        "integer division by zero does not raise, as on CUDA",
    ),
}


def unlisted(rows: list[dict]) -> list[dict]:
    """The rows that differ from the CPU in a way KNOWN_DIFFERENCES does not list."""

    def listed(r):
        known = KNOWN_DIFFERENCES.get((r["name"], r["variant"]))
        return known is not None and known[0] in r["detail"]

    return [r for r in rows if r["verdict"] == "differs" and not listed(r)]


def make_cases(op_db, n: int, seed: int, samples: int, ops: str = "", variants: str = "") -> list[dict]:
    import torch

    cases = []
    only = {o for o in ops.split(",") if o}
    chosen = [v for v in variants.split(",") if v] or VARIANTS
    for i, op in enumerate(op_db):
        if only and op.name not in only:
            continue
        allowed = op.supported_dtypes("cpu")
        for d in DTYPES:
            if getattr(torch, d) not in allowed:
                continue
            for variant in chosen:
                if variant in ("bad_input", "random_edges", "factory_out"):  # not an OpInfo's
                    continue
                for k in range(samples):
                    cases.append(
                        {
                            "op": i,
                            "name": op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""),
                            "dtype": d,
                            "variant": variant,
                            "sample": k,
                            "seed": seed,
                        }
                    )
    # the generated classes (_fuzz_edges.py: random ops at their arguments' edges, factories' out=) are cases like
    # the OpInfos' ones, shuffled in with them; --ops names them by their op ("linspace" for
    # "factory:linspace/float32/reshaped")
    from ._fuzz_edges import edges, factory_cases

    for variant, generated in (("random_edges", edges), ("factory_out", factory_cases)):
        if variant in chosen:
            cases += [
                {"op": -1, "name": name, "dtype": spec[1], "variant": variant, "sample": 0, "seed": seed}
                for name, spec in generated().items()
                if not only or name.split(":", 1)[1].split("/", 1)[0] in only
            ]
    rng = random.Random(seed)
    rng.shuffle(cases)
    if not only and "bad_input" in chosen:  # the hand-written bad inputs are few and quick: every sample runs them all
        from ._fuzz_bad import BAD_INPUTS

        cases = [
            {"op": -1, "name": "bad:" + name, "dtype": "-", "variant": "bad_input", "sample": 0, "seed": seed}
            for name in BAD_INPUTS
        ] + cases
    return cases[:n] if n else cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mytorch.testing.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=300, help="cases to run (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=2, help="samples per OpInfo, dtype and variant")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    p.add_argument("--json", default="", help="write every case's verdict here")
    p.add_argument("--report", default="", help="write the markdown summary here (docs/robustness.md)")
    p.add_argument("--log", default="build/fuzz-workers.log")
    p.add_argument("--ops", default="", help="only these OpInfos (comma-separated names), e.g. to re-run differences")
    p.add_argument("--variants", default="", help="only these variants (comma-separated)")
    p.add_argument("--preload", default="", help="modules each worker imports first (test hooks)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("MYTORCH_FALLBACK", "silent")
    import warnings

    warnings.filterwarnings("ignore")
    import torch  # noqa: F401
    import mytorch  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    cases = make_cases(op_db, args.cases, args.seed, args.samples, args.ops, args.variants)
    env = dict(os.environ, MYTORCH_FALLBACK="silent", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env["MYTORCH_FUZZ_PRELOAD"] = args.preload
    env.setdefault("MYTORCH_SIM_DEVICES", "2")
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(args.log, "w") as log:
        answers = run_pool(
            "mytorch.testing._fuzz_worker",
            list(enumerate(cases)),
            jobs=args.jobs,
            timeout=args.timeout,
            env=env,
            log=log,
        )
    rows = []
    for i, c in enumerate(cases):
        a = answers[i]
        if "failure" in a:
            verdict, detail = ("hang" if a.get("timed_out") else "crash"), a["failure"]
        else:
            verdict, detail = a["verdict"], a["detail"]
        rows.append(dict(c, verdict=verdict, detail=detail))
    elapsed = time.monotonic() - start
    command = "python -m mytorch.testing.fuzz " + " ".join(sys.argv[1:] if argv is None else argv)
    text = summary(rows, command.strip(), elapsed)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command.strip(), "cases": rows}, indent=0))
    if args.report:
        Path(args.report).write_text(text)
    return 1 if any(r["verdict"] in BAD for r in rows) or unlisted(rows) else 0


def summary(rows: list[dict], command: str, elapsed: float) -> str:
    verdicts = ["ok", "differs", "corruption", "mixed_device", "crash", "hang", "harness", "skipped"]
    by = {v: Counter() for v in VARIANTS}
    for r in rows:
        by[r["variant"]][r["verdict"]] += 1
    lines = [
        f"`{command}`: {len(rows)} cases in {elapsed:.0f} s",
        "",
        "| variant | " + " | ".join(verdicts) + " |",
        "|---" * (len(verdicts) + 1) + "|",
    ]
    for v in VARIANTS:
        lines.append(f"| {v} | " + " | ".join(str(by[v][x]) for x in verdicts) + " |")
    total = Counter(r["verdict"] for r in rows)
    lines.append("| all | " + " | ".join(str(total[x]) for x in verdicts) + " |")
    bad = [r for r in rows if r["verdict"] in BAD]
    diff = Counter((r["name"], r["variant"], r["detail"][:90]) for r in rows if r["verdict"] == "differs")
    if bad:
        lines += ["", "Cases that must not happen:", ""]
        lines += [f"- {r['name']} {r['dtype']} {r['variant']}: {r['verdict']}: {r['detail']}" for r in bad[:50]]
    new = unlisted(rows)
    if new:
        lines += ["", "Differences that KNOWN_DIFFERENCES does not list (they fail the run):", ""]
        lines += [f"- {r['name']} {r['dtype']} {r['variant']}: {r['detail']}" for r in new[:50]]
    if diff:
        lines += ["", "Differences from the CPU (op, variant, detail: cases):", ""]
        lines += [f"- {n} {v}: {d} ({k})" for (n, v, d), k in sorted(diff.items())[:80]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
