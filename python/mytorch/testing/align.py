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
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "bool"]


class Worker:
    def __init__(self, env: dict, log):
        r, w = os.pipe()
        env = dict(env, MYTORCH_ALIGN_FD=str(w))
        self.proc = subprocess.Popen([sys.executable, "-m", "mytorch.testing._worker"], stdin=subprocess.PIPE,
                                     stdout=log, stderr=log, env=env, pass_fds=(w,), text=True)
        os.close(w)
        self.out = os.fdopen(r, "r")
        self.buf = ""
        self.task = None       # (index, key, attempt)
        self.started = 0.0
        self.ready = False

    def send(self, task, dtypes, max_samples):
        self.task = task
        self.started = time.monotonic()
        req = {"index": task[0], "key": task[1], "dtypes": dtypes, "max_samples": max_samples}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.out.close()


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
    env = dict(os.environ, MYTORCH_FALLBACK="silent", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               MYTORCH_ALIGN_PRELOAD=args.preload or "")
    env.setdefault("MYTORCH_SIM_DEVICES", "1")
    log_path = Path(args.log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    sel = selectors.DefaultSelector()
    workers: list[Worker] = []
    results: dict[int, list] = {}
    pending = list(reversed(tasks))
    total = len(tasks)
    start = time.monotonic()

    def spawn():
        w = Worker(env, log)
        sel.register(w.out, selectors.EVENT_READ, w)
        workers.append(w)
        return w

    def fail(w: Worker, why: str, retry: bool):
        index, key, attempt = w.task
        sel.unregister(w.out)
        workers.remove(w)
        w.kill()
        if retry and attempt == 0:
            pending.append((index, key, 1))
        else:
            results[index] = [{"op": key, "dtype": d, "verdict": "error", "detail": why, "native": False,
                               "samples": 0, "forward": None, "backward": None, "fallback_ops": [], "native_kernels": []}
                              for d in _dtypes_for(op_db[index], args.dtypes)]
        if pending or any(x.task for x in workers):
            spawn()

    def feed(w: Worker):
        if pending:
            w.send(pending.pop(), args.dtypes, args.max_samples)
        else:
            w.task = None

    for _ in range(max(1, min(args.jobs, len(tasks)))):
        spawn()
    done_count = 0
    while len(results) < total:
        for key, _ in sel.select(timeout=1.0):
            w: Worker = key.data
            chunk = os.read(w.out.fileno(), 1 << 20).decode()
            if not chunk:   # the worker died
                if w.task is not None:
                    code = w.proc.wait()
                    why = f"worker crashed ({'signal ' + str(-code) if code < 0 else 'exit code ' + str(code)}) " \
                          f"while running this op"
                    fail(w, why, retry=True)
                else:
                    sel.unregister(w.out)
                    workers.remove(w)
                    w.kill()
                    if pending:
                        spawn()
                continue
            w.buf += chunk
            while "\n" in w.buf:
                line, w.buf = w.buf.split("\n", 1)
                msg = json.loads(line)
                if msg.get("ready"):
                    w.ready = True
                else:
                    results[msg["index"]] = msg["cases"]
                    done_count += 1
                    if args.progress:
                        elapsed = time.monotonic() - start
                        print(f"\r[{done_count}/{total}] {elapsed:6.0f}s {w.task[1][:40]:40s}", end="", file=sys.stderr,
                              flush=True)
                feed(w)
        now = time.monotonic()
        for w in list(workers):
            if w.task is not None and now - w.started > args.op_timeout:
                fail(w, f"timed out after {args.op_timeout:.0f} s", retry=False)
        if not workers and len(results) < total:
            spawn()
    for w in list(workers):
        w.proc.stdin.close()
        w.kill()
    log.close()
    if args.progress:
        print(file=sys.stderr)
    cases = [c for i, _, _ in tasks for c in results[i]]
    from ._report import build_report
    return build_report(cases, runtime=runtime, dtypes=args.dtypes, max_samples=args.max_samples,
                        command=" ".join(["python -m mytorch.testing.align"] + args.argv),
                        elapsed=time.monotonic() - start)


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
