"""The worker pool of the alignment suite and the fuzzer: tasks run in subprocesses, so that a crash or a hang
in a kernel costs one task, not the run.

A worker is `python -m <module>`: it reads one JSON request per line on stdin ({"index": i, ...the task's
payload}) and answers one JSON line per request ({"index": i, ...}) on the file descriptor named by
MYTORCH_WORKER_FD, after a first line {"ready": true}. A task whose worker dies is retried once in a fresh
worker, then reported as {"failure": why, "crashed": true}; one that runs past `timeout` seconds is killed and
reported as {"failure": why, "timed_out": true}.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time


class Worker:
    def __init__(self, module: str, env: dict, log):
        r, w = os.pipe()
        env = dict(env, MYTORCH_WORKER_FD=str(w))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            env=env,
            pass_fds=(w,),
            text=True,
        )
        os.close(w)
        self.out = os.fdopen(r, "r")
        self.buf = ""
        self.task = None  # (index, payload, attempt)
        self.started = 0.0

    def send(self, task):
        self.task = task
        self.started = time.monotonic()
        self.proc.stdin.write(json.dumps({"index": task[0], **task[1]}) + "\n")
        self.proc.stdin.flush()

    def kill(self):
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.out.close()


def run_pool(module: str, tasks: list, *, jobs: int, timeout: float, env: dict, log, progress=None) -> dict:
    """Runs tasks [(index, payload)] in `jobs` workers; returns {index: answer}. `progress(done, total, task)`
    is called after each answer."""
    sel = selectors.DefaultSelector()
    workers: list[Worker] = []
    results: dict = {}
    pending = [(i, p, 0) for i, p in reversed(tasks)]
    total = len(tasks)

    def spawn():
        w = Worker(module, env, log)
        sel.register(w.out, selectors.EVENT_READ, w)
        workers.append(w)

    def retire(w: Worker):
        sel.unregister(w.out)
        workers.remove(w)
        w.kill()

    def fail(w: Worker, why: str, crashed: bool):
        index, payload, attempt = w.task
        retire(w)
        if crashed and attempt == 0:
            pending.append((index, payload, 1))
        else:
            results[index] = {"failure": why, "crashed": crashed, "timed_out": not crashed}
        if pending or any(x.task for x in workers):
            spawn()

    def feed(w: Worker):
        if pending:
            w.send(pending.pop())
        else:
            w.task = None

    for _ in range(max(1, min(jobs, total))):
        spawn()
    while len(results) < total:
        for key, _ in sel.select(timeout=1.0):
            w: Worker = key.data
            chunk = os.read(w.out.fileno(), 1 << 20).decode()
            if not chunk:  # the worker died
                if w.task is not None:
                    code = w.proc.wait()
                    fail(
                        w,
                        f"worker crashed ({'signal ' + str(-code) if code < 0 else 'exit code ' + str(code)}) "
                        f"while running this task",
                        crashed=True,
                    )
                else:
                    retire(w)
                    if pending:
                        spawn()
                continue
            w.buf += chunk
            while "\n" in w.buf:
                line, w.buf = w.buf.split("\n", 1)
                msg = json.loads(line)
                if not msg.get("ready"):
                    results[msg["index"]] = msg
                    if progress is not None:
                        progress(len(results), total, w.task)
                feed(w)
        now = time.monotonic()
        for w in list(workers):
            if w.task is not None and now - w.started > timeout:
                fail(w, f"timed out after {timeout:.0f} s", crashed=False)
        if not workers and len(results) < total:
            spawn()
    for w in list(workers):
        w.proc.stdin.close()
        w.kill()
    return results
