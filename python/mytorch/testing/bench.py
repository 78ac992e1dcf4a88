"""The benchmark harness every script in benchmarks/ uses (README, "Benchmarks").

On a small shared machine a benchmark easily measures the scheduler instead of the kernels. The harness
therefore:

- runs mytorch and the reference interleaved, round after round, in rotating order, so that drift in the
  machine's load hits both sides alike;
- keeps the CPU allocator steady (Note [Steady CPU allocator]);
- warms up each side, then sizes each sample to at least `--min-sample-ms` by repeating the call, so that
  timer resolution and per-call jitter do not dominate;
- reports medians with their spread (the interquartile range as a percentage of the median), and CPU time
  (the whole process's, every thread included) beside wall time;
- fixes the thread count of the CPU side (`--threads`, torch.set_num_threads; default 1) and prints both
  sides' thread counts. On sim, mytorch's kernels split their loops over torch's intra-op pool (Note [Sim
  parallelism]) and its GEMMs use the same CPU BLAS as the reference, so both sides get the same threads;
- uses one ratio direction everywhere: RATIO, the reference's time over mytorch's time, the median of the
  per-round ratios, so above 1 means mytorch is faster;
- prints the machine's load before and after, and warns when the machine was busy;
- writes results (JSON and Markdown) and plots to `--out` (default benchmarks/results/, not tracked), and
  to docs/ only with `--docs`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

RATIO = "ratio = reference time / mytorch time (median of interleaved rounds; above 1: mytorch is faster)"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


# Note [Steady CPU allocator]
# glibc's malloc serves large blocks with mmap and adapts its mmap and trim thresholds to the history of the
# process, so the same CPU op on multi-MiB tensors either reuses heap memory or maps, faults in and unmaps
# fresh pages on every call, and which one it does changes from run to run: F.rms_norm of 1024x2048 bf16 on
# one thread took 1.4-4.2 ms in five processes, and of 1024x8192 fp32 (32 MiB temporaries) 29-39 ms against
# 5.6 ms from the heap. mytorch's side (a caching allocator) and torch.cuda's never pay that. `--malloc
# steady` (the default) turns mmap off for malloc and keeps freed memory in the heap (no trimming below 4 GiB),
# as a caching allocator keeps it: the same ops then took 1.40-1.51 ms and 5.53-5.81 ms in four processes each.
# The process re-executes itself once to set this (glibc reads its tunables at start-up).
STEADY_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296"


def add_args(p: argparse.ArgumentParser, repeat: int = 11) -> argparse.ArgumentParser:
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads of the reference and of mytorch's CPU BLAS calls (torch.set_num_threads)",
    )
    p.add_argument("--repeat", type=int, default=repeat, help="interleaved rounds per case")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per side before timing")
    p.add_argument(
        "--min-sample-ms",
        type=float,
        default=20.0,
        help="each timed sample repeats the call until it lasts at least this long",
    )
    p.add_argument(
        "--out",
        default=os.path.join(ROOT, "benchmarks", "results"),
        help="folder for the results (JSON, Markdown) and plots",
    )
    p.add_argument("--docs", action="store_true", help="also write the plot into docs/ (the tracked figures)")
    p.add_argument(
        "--malloc",
        choices=("steady", "default"),
        default="steady",
        help="glibc malloc thresholds: fixed so freed memory stays in the heap (Note [Steady CPU "
        "allocator]), or glibc's adaptive defaults",
    )
    return p


def parse_args(p: argparse.ArgumentParser, module: str | None = None) -> argparse.Namespace:
    """Parses a benchmark's arguments; with --malloc steady on glibc, re-executes the process once with
    STEADY_TUNABLES set (before anything is measured). module: the name a `python -m` tool runs as."""
    args = p.parse_args()
    if args.malloc == "steady" and _glibc() and os.environ.get("MYTORCH_BENCH_MALLOC") != "steady":
        env = dict(os.environ, MYTORCH_BENCH_MALLOC="steady")
        env["GLIBC_TUNABLES"] = ":".join(x for x in (os.environ.get("GLIBC_TUNABLES", ""), STEADY_TUNABLES) if x)
        sys.stdout.flush()
        head = [sys.executable, "-m", module] if module else [sys.executable, sys.argv[0]]
        os.execve(sys.executable, head + sys.argv[1:], env)
    return args


def _glibc() -> bool:
    return sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _allocator_line() -> str:
    if not _glibc():
        return "CPU allocator: the platform's malloc (not glibc: --malloc has no effect)"
    if os.environ.get("MYTORCH_BENCH_MALLOC") == "steady":
        return (
            "CPU allocator: glibc malloc without mmap, trim threshold 4 GiB (--malloc steady: freed memory "
            "stays in the heap)"
        )
    return "CPU allocator: glibc malloc with its adaptive thresholds (--malloc default; figures vary more)"


@dataclass
class Stats:
    """Per-call times of one side over the rounds."""

    wall: list[float]
    cpu: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def spread(self) -> float:
        """Interquartile range of the wall times, as a fraction of the median."""
        return _iqr(self.wall) / self.median if self.median > 0 else 0.0


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _iqr(xs: list[float]) -> float:
    return _quantile(xs, 0.75) - _quantile(xs, 0.25) if len(xs) > 1 else 0.0


def measure(
    calls: dict[str, tuple[Callable[[], object], Callable[[], None]]],
    repeat: int,
    warmup: int = 2,
    min_sample_s: float = 0.02,
    inner: int | None = None,
) -> dict[str, Stats]:
    """Times each of `calls` (label -> (fn, sync)) over `repeat` interleaved rounds, in rotating order.

    A sample runs fn `inner` times and then sync once, and records the per-call wall and process CPU time.
    With inner=None each label's count is sized after warm-up so that a sample lasts at least min_sample_s.
    Collectives across processes must pass a fixed inner (every rank must make the same calls)."""
    counts = {}
    for label, (fn, sync) in calls.items():
        for _ in range(warmup):
            fn()
        sync()
        if inner is not None:
            counts[label] = inner
            continue
        n, t = 1, 0.0
        while True:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            t = time.perf_counter() - t0
            if t >= min_sample_s or n >= 1 << 16:
                break
            n = min(1 << 16, max(n * 2, int(n * min_sample_s / max(t, 1e-9) * 1.2)))
        counts[label] = n
    stats = {label: Stats([], []) for label in calls}
    order = list(calls.items())
    for r in range(repeat):
        k = r % len(order)
        for label, (fn, sync) in order[k:] + order[:k]:
            n = counts[label]
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            t1, c1 = time.perf_counter(), time.process_time()
            stats[label].wall.append((t1 - t0) / n)
            stats[label].cpu.append((c1 - c0) / n)
    return stats


def paired_ratio(ref: Stats, mine: Stats) -> tuple[float, float, float]:
    """Median and interquartile bounds of the per-round ratios ref / mine."""
    ratios = [a / b for a, b in zip(ref.wall, mine.wall) if b > 0]
    return statistics.median(ratios), _quantile(ratios, 0.25), _quantile(ratios, 0.75)


@dataclass
class Row:
    case: str
    mytorch_ms: float
    reference_ms: float
    ratio: float
    ratio_lo: float
    ratio_hi: float
    mytorch_spread: float
    reference_spread: float
    mytorch_cpu_ms: float
    reference_cpu_ms: float
    reference_variant: str = ""
    rate_unit: str = ""
    mytorch_rate: float | None = None
    reference_rate: float | None = None
    extra: dict = field(default_factory=dict)


def make_row(
    case: str,
    mine: Stats,
    ref: Stats,
    variant: str = "",
    work: float | None = None,
    unit: str = "",
    extra: dict | None = None,
) -> Row:
    """A result row from both sides' per-call times: medians, spreads, CPU times, paired ratio, rates."""
    ratio, lo, hi = paired_ratio(ref, mine)
    return Row(
        case,
        mine.median * 1e3,
        ref.median * 1e3,
        ratio,
        lo,
        hi,
        mine.spread,
        ref.spread,
        mine.cpu_median * 1e3,
        ref.cpu_median * 1e3,
        variant,
        unit,
        work / mine.median if work else None,
        work / ref.median if work else None,
        extra or {},
    )


class Bench:
    """One benchmark run: the set-up (threads, reference, header), the comparisons, and the written results."""

    def __init__(self, name: str, args: argparse.Namespace, description: str = ""):
        import mytorch  # noqa: F401  (registers the device)

        self.name, self.args = name, args
        torch.set_num_threads(args.threads)
        torch.mytorch.set_fallback_mode("silent")
        self.runtime = torch.mytorch.runtime()
        self.gpu = self.runtime == "cuda" and torch.cuda.is_available()
        self.ref = "cuda" if self.gpu else "cpu"
        self.sync = {
            "mytorch": torch.mytorch.synchronize,
            "cpu": lambda: None,
            "cuda": torch.cuda.synchronize if self.gpu else (lambda: None),
        }
        self.rows: list[Row] = []
        self.load_before = _load()
        cpus = os.cpu_count() or 1
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
        if self.gpu:
            threads = f"reference torch.cuda on {torch.cuda.get_device_name()}; host threads {torch.get_num_threads()}"
        else:
            threads = (
                f"reference torch CPU at {torch.get_num_threads()} thread(s) (--threads); mytorch sim kernels on "
                f"torch's intra-op pool at {torch.mytorch.sim_threads()} (MYTORCH_SIM_THREADS caps it), its "
                f"GEMM/conv through the CPU BLAS at {torch.get_num_threads()}"
            )
        self.header = [
            f"{name}: {description}".rstrip(": "),
            f"torch {torch.__version__}, mytorch runtime {self.runtime} ({torch.mytorch.get_device_name()}), "
            f"reference {self.ref}",
            f"threads: {threads}",
            _allocator_line(),
            f"machine: {platform.machine()}, {cpus} CPUs ({usable} usable), load average {self.load_before[0]:.2f} "
            f"{self.load_before[1]:.2f} {self.load_before[2]:.2f} before",
            # ratios are comparable across runs only on the same CPU and ISA: torch's kernels and the sim's variants
            # both follow it (a 4.7-21x CPU trunc/tanh on one machine was memory-bound parity on an AVX-512 one)
            f"CPU: {_cpu_model()}; torch CPU kernels {torch.backends.cpu.get_cpu_capability()}, "
            f"sim kernels {_sim_isa()}",
            f"timing: {args.repeat} interleaved rounds, warm-up {args.warmup}, samples >= {args.min_sample_ms:g} ms; "
            f"times are medians per call ± the interquartile range (% of the median); CPU time is the process's",
            RATIO,
        ]
        for line in self.header:
            print(line)
        if self.load_before[0] > max(1.0, usable - args.threads):
            print(
                f"warning: the machine is busy (load {self.load_before[0]:.2f} on {usable} CPUs); figures may be noisy"
            )
        self._printed_head = False

    # ---- comparisons -----------------------------------------------------------------------------------------
    def compare(
        self,
        case: str,
        mine: Callable[[], object],
        refs: dict[str, Callable[[], object]] | Callable,
        work: float | None = None,
        unit: str = "",
        inner: int | None = None,
        repeat: int | None = None,
        **extra,
    ) -> Row:
        """Times mine against the reference (or several reference variants: the fastest, by median, is the
        reference; the others are kept in extra as '<variant>_ms' and '<variant>_ratio')."""
        if callable(refs):
            refs = {"": refs}
        calls = {"mytorch": (mine, self.sync["mytorch"])}
        calls.update({f"ref:{k}": (f, self.sync[self.ref]) for k, f in refs.items()})
        stats = measure(calls, repeat or self.args.repeat, self.args.warmup, self.args.min_sample_ms / 1e3, inner)
        m = stats["mytorch"]
        best = min(refs, key=lambda k: stats[f"ref:{k}"].median)
        r = stats[f"ref:{best}"]
        for k in refs:
            if k != best:
                extra[f"{k}_ms"] = stats[f"ref:{k}"].median * 1e3
                extra[f"{k}_ratio"] = paired_ratio(stats[f"ref:{k}"], m)[0]
        row = make_row(case, m, r, best, work, unit, extra)
        self.add(row)
        return row

    def add(self, row: Row) -> None:
        self.rows.append(row)
        if not self._printed_head:
            print(
                f"\n{'case':44s} {'mytorch':>17s} {'reference':>17s} {'CPU time (m / r)':>21s} "
                f"{'rate (m / r)':>21s} {'ratio [IQR]':>18s}"
            )
            self._printed_head = True
        rate = f"{row.mytorch_rate:.3g} / {row.reference_rate:.3g} {row.rate_unit}" if row.mytorch_rate else ""
        variant = f" ({row.reference_variant})" if row.reference_variant else ""
        others = "".join(f"  {k[:-6]} {v:.2f}x" for k, v in row.extra.items() if k.endswith("_ratio"))
        cpu = f"{_fmt(row.mytorch_cpu_ms)} / {_fmt(row.reference_cpu_ms)}"
        print(
            f"{row.case[:44]:44s} {_fmt(row.mytorch_ms):>10s} ±{row.mytorch_spread:4.0%} "
            f"{_fmt(row.reference_ms):>10s} ±{row.reference_spread:4.0%} {cpu:>21s} {rate:>21s} "
            f"{row.ratio:6.2f}x [{row.ratio_lo:.2f}-{row.ratio_hi:.2f}]{variant}{others}",
            flush=True,
        )

    def note(self, text: str) -> None:
        print(text, flush=True)

    # ---- results ---------------------------------------------------------------------------------------------
    def path(self, filename: str, docs: bool = False) -> str:
        folder = os.path.join(ROOT, "docs") if docs else self.args.out
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, filename)

    def save_plot(self, fig, filename: str) -> None:
        fig.savefig(self.path(filename), dpi=120)
        print(f"plot: {os.path.relpath(self.path(filename))}")
        if self.args.docs:
            fig.savefig(self.path(filename, docs=True), dpi=120)
            print(f"plot: {os.path.relpath(self.path(filename, docs=True))}")

    def finish(self) -> str:
        after = _load()
        print(f"\nload average {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} after")
        data = {
            "benchmark": self.name,
            "header": self.header,
            "argv": sys.argv,
            "load_after": after,
            "rows": [asdict(r) for r in self.rows],
        }
        out = self.path(f"{self.name}.json")
        with open(out, "w") as f:
            json.dump(data, f, indent=1)
        md = self.path(f"{self.name}.md")
        with open(md, "w") as f:
            f.write("\n".join(f"{line}  " for line in self.header) + "\n\n")
            f.write("| case | mytorch ms | reference ms | mytorch CPU ms | reference CPU ms | ratio | IQR |\n")
            f.write("|---|---|---|---|---|---|---|\n")
            for r in self.rows:
                f.write(
                    f"| {r.case} | {r.mytorch_ms:.3f} ±{r.mytorch_spread:.0%} | {r.reference_ms:.3f} "
                    f"±{r.reference_spread:.0%} | {r.mytorch_cpu_ms:.3f} | {r.reference_cpu_ms:.3f} | "
                    f"{r.ratio:.2f} | {r.ratio_lo:.2f}-{r.ratio_hi:.2f} |\n"
                )
        print(f"results: {os.path.relpath(out)}, {os.path.relpath(md)}")
        return out


def _fmt(ms: float) -> str:
    """A time given in milliseconds, in the unit that keeps three significant digits readable."""
    if ms < 1e-3:
        return f"{ms * 1e6:.0f} ns"
    if ms < 1:
        return f"{ms * 1e3:.3g} us"
    if ms < 1e3:
        return f"{ms:.3g} ms"
    return f"{ms / 1e3:.3g} s"


def _cpu_model() -> str:
    """The processor's name as /proc/cpuinfo gives it (the architecture elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _sim_isa() -> str:
    """The sim's instruction-set variant (Note [Sim ISA variants]); n/a on other runtimes' builds."""
    import mytorch

    fn = getattr(mytorch._C, "_sim_isa", None)
    return fn() if fn is not None else "n/a"


def _load() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def compare_runs(a: str, b: str) -> float:
    """Prints, case by case, how the ratio of run b differs from run a (two results JSON files of the same
    benchmark at the same settings); returns the largest relative difference."""
    ra = {r["case"]: r for r in json.load(open(a))["rows"]}
    rb = {r["case"]: r for r in json.load(open(b))["rows"]}
    worst = 0.0
    print(f"{'case':46s} {'ratio a':>8s} {'ratio b':>8s} {'b/a - 1':>8s}")
    for case in ra:
        if case not in rb:
            continue
        x, y = ra[case]["ratio"], rb[case]["ratio"]
        d = y / x - 1
        worst = max(worst, abs(d))
        print(f"{case[:46]:46s} {x:8.3f} {y:8.3f} {d:+8.1%}")
    print(f"largest difference: {worst:.1%} over {len(set(ra) & set(rb))} cases")
    return worst


if __name__ == "__main__":
    # python -m mytorch.testing.bench A.json B.json: how far two runs' ratios are apart.
    if len(sys.argv) != 3:
        sys.exit("usage: python -m mytorch.testing.bench RESULTS_A.json RESULTS_B.json")
    compare_runs(sys.argv[1], sys.argv[2])
