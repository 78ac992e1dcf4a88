"""Operator alignment suite: every OpInfo in PyTorch's op_db, on mytorch against the CPU (and stock
torch.cuda on a GPU), with a verdict per op x dtype and reports under docs/.

    python -m mytorch.testing.align                     # full run, writes docs/alignment/<runtime>.{json,md}
                                                        # and docs/coverage.md
    python -m mytorch.testing.align --ops add,mul,sin   # a subset (names or fnmatch patterns)
    python -m mytorch.testing.align --no-write          # print the summary only

Ops run in worker subprocesses (--jobs); an op that crashes its worker is retried once in a fresh worker
and then reported as an error, and an op that runs past --op-timeout seconds is killed and reported.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import time
from pathlib import Path

from ._pool import run_pool

DEFAULT_DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "bool"]


def _select_ops(op_db, patterns):
    from ._cases import op_key

    chosen = []
    for i, op in enumerate(op_db):
        key = op_key(op)
        if not patterns or any(fnmatch.fnmatch(key, p) or fnmatch.fnmatch(op.name, p) for p in patterns):
            chosen.append((i, key))
    return chosen


def run(args) -> dict:
    os.environ.setdefault("MYTORCH_FALLBACK", "silent")
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    import mytorch  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    runtime = torch.mytorch.runtime()
    patterns = [p for p in (args.ops or "").split(",") if p]
    tasks = [(i, key, 0) for i, key in _select_ops(op_db, patterns)]
    if not tasks:
        raise SystemExit(f"no OpInfo matches --ops {args.ops!r}")
    env = dict(
        os.environ,
        MYTORCH_FALLBACK="silent",
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
        MYTORCH_ALIGN_PRELOAD=args.preload or "",
    )
    env.setdefault("MYTORCH_SIM_DEVICES", "1")
    log_path = Path(args.log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    start = time.monotonic()

    def progress(done, total, task):
        if args.progress:
            print(
                f"\r[{done}/{total}] {time.monotonic() - start:6.0f}s {task[1]['key'][:40]:40s}",
                end="",
                file=sys.stderr,
                flush=True,
            )

    answers = run_pool(
        "mytorch.testing._worker",
        [(i, {"key": key, "dtypes": args.dtypes, "max_samples": args.max_samples}) for i, key, _ in tasks],
        jobs=args.jobs,
        timeout=args.op_timeout,
        env=env,
        log=log,
        progress=progress,
    )
    results = {}
    for i, key, _ in tasks:
        a = answers[i]
        if "failure" in a:
            why = a["failure"].replace("this task", "this op")
            results[i] = [
                {
                    "op": key,
                    "dtype": d,
                    "verdict": "error",
                    "detail": why,
                    "native": False,
                    "samples": 0,
                    "forward": None,
                    "backward": None,
                    "fallback_ops": [],
                    "native_kernels": [],
                }
                for d in _dtypes_for(op_db[i], args.dtypes)
            ]
        else:
            results[i] = a["cases"]
    log.close()
    if args.progress:
        print(file=sys.stderr)
    cases = [c for i, _, _ in tasks for c in results[i]]
    from ._report import build_report

    return build_report(
        cases,
        runtime=runtime,
        dtypes=args.dtypes,
        max_samples=args.max_samples,
        command=" ".join(["python -m mytorch.testing.align"] + args.argv),
        elapsed=time.monotonic() - start,
    )


def _dtypes_for(op, dtypes):
    from ._cases import DTYPES

    allowed = op.supported_dtypes("cpu")
    return [d for d in dtypes if DTYPES[d] in allowed]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mytorch.testing.align", description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="", help="comma-separated OpInfo names or fnmatch patterns (default: all)")
    p.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES), help="comma-separated dtypes")
    p.add_argument("--max-samples", type=int, default=0, help="samples per op and dtype (0: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--op-timeout", type=float, default=180.0, help="seconds one op (all its dtypes) may take")
    p.add_argument("--out-dir", default="docs", help="where alignment/<runtime>.{json,md} and coverage.md go")
    p.add_argument("--no-write", action="store_true", help="print the summary, write no report")
    p.add_argument("--json", default="", help="also write the JSON report to this path")
    p.add_argument("--preload", default="", help="modules each worker imports first (test hooks)")
    p.add_argument("--log", default="build/align-workers.log", help="workers' stderr")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty())
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    args.argv = argv
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    from ._cases import DTYPES

    bad = [d for d in args.dtypes if d not in DTYPES]
    if bad:
        p.error(f"unknown dtype(s) {bad}; choose from {list(DTYPES)}")
    report = run(args)
    from ._report import print_summary, write_reports
    from ._report import dump_json

    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(dump_json(report))
    if not args.no_write:
        for path in write_reports(report, Path(args.out_dir)):
            print(f"wrote {path}")
    print_summary(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
