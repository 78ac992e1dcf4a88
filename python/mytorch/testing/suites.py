"""PyTorch's own test suites on mytorch: the device-generic suites (instantiate_device_type_tests, whose
PrivateUse1 test base gives every template a TestFooPRIVATEUSE1 class next to TestFooCPU) and the test suite
of upstream's reference PrivateUse1 backend, torch_openreg, translated to mytorch.

    python -m mytorch.testing.suites                          # every suite, in full
    python -m mytorch.testing.suites --sample 0.05 --seed 1   # a seeded 5% of each device-generic suite
    python -m mytorch.testing.suites --suite test_indexing --suite openreg
    python -m mytorch.testing.suites --src ~/pytorch          # a PyTorch checkout instead of the download
                                                              # (or MYTORCH_PYTORCH_SRC=~/pytorch)

The test files are not in the torch wheel and their code is not the project's to commit, so they are taken
at run time from one pinned place: PyTorch's repository at the commit the installed torch was built from
(torch.version.git_version), downloaded once into build/pytorch-tests/<commit>/, or --src. The openreg files
are translated on the way (the module torch_openreg and the device name openreg become mytorch; nothing else).

The device-generic suites run their CPU and mytorch classes in the same process, so each mytorch test has
its CPU twin as the reference: a mytorch failure whose twin passes is attributable to mytorch, one whose twin
fails too is not. The pass rate is mytorch's passes over the twins that pass on the CPU and are not skipped on
mytorch. Results: a JSON file and a markdown table (--json, --markdown; docs/conformance.md has the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ._suite_plugin import device_of, twin_key

ROOT = Path(__file__).resolve().parents[3]

# name -> (file in PyTorch's test/, pytest -k expression or None)
DEVICE_SUITES = {
    "test_ops": ("test_ops.py", "TestCommon"),
    "test_modules": ("test_modules.py", None),
    "test_nn": ("test_nn.py", None),
    "test_torch": ("test_torch.py", None),
    "test_indexing": ("test_indexing.py", None),
    "test_reductions": ("test_reductions.py", None),
    "test_view_ops": ("test_view_ops.py", None),
    "test_binary_ufuncs": ("test_binary_ufuncs.py", None),
    "test_unary_ufuncs": ("test_unary_ufuncs.py", None),
    "test_autograd": ("test_autograd.py", None),
}
# files a suite imports from PyTorch's test/ besides its own
HELPERS = {"test_autograd": ["test/autograd/test_complex.py", "test/autograd/test_functional.py"]}
OPENREG_DIR = "test/cpp_extensions/open_registration_extension/torch_openreg/tests"
OPENREG_FILES = [
    "test_autocast.py",
    "test_autograd.py",
    "test_compile.py",
    "test_device.py",
    "test_device_type.py",
    "test_distributed.py",
    "test_event.py",
    "test_ipc.py",
    "test_memory.py",
    "test_misc.py",
    "test_opinfo.py",
    "test_ops.py",
    "test_profiler.py",
    "test_rng.py",
    "test_rnn.py",
    "test_sdpa.py",
    "test_storage.py",
    "test_streams.py",
    "test_testing.py",
    "test_utils.py",
]
# Tests of openreg's own internals: (nodeid regex, reason). A failure that reaches into the translated
# extension module's private bindings (mytorch._C has no such attribute) is counted here too, automatically.
# Filled from a run over the suite at the installed torch's commit (docs/conformance.md); ids are of the
# translated files (test_mytorch_<name>.py).
_BACKEND_META = (
    "openreg's own BackendMeta (format_number, version_number): tensor metadata its extension defines, serialises "
    "and propagates through fake tensors; mytorch attaches none"
)
_CUSTOM_OPS = (
    "openreg's own custom operators (torch.ops.openreg.custom_abs, custom_autograd_fn_*), defined by its extension"
)
OPENREG_INTERNAL: list[tuple[str, str]] = [
    (
        r"test_mytorch_autocast\.py::TestAutocast::test_mytorch_autocast_error_message$",
        "openreg's autocast policy refuses float32 as the autocast dtype; mytorch accepts float16, bfloat16 and "
        "float32, as torch.cuda does",
    ),
    (
        r"test_mytorch_autocast\.py::TestAutocast::test_mytorch_autocast_float32_supported$",
        "openreg's autocast lists run dot in float32; mytorch's lists are CUDA's, which leave dot in the input dtype",
    ),
    (r"test_mytorch_compile\.py::TestFakeTensor::test_backend_metadata_propagation$", _BACKEND_META),
    (
        r"test_mytorch_storage\.py::TestSerialization::test_(copy_backend_meta|fake_tensor_metadata_preservation"
        r"(_functional)?|serialization|serialization_metadata_preservation)$",
        _BACKEND_META,
    ),
    (
        r"test_mytorch_device\.py::TestDevice::test_device_capability$",
        "asserts openreg's capability set, which claims every dtype, quantized ones included; mytorch answers the "
        "dtypes it allocates and copies: all but the quantized ones (out of scope, refused with a clear error)",
    ),
    (
        r"test_mytorch_device\.py::TestDevice::test_device_poison_fork$",
        "message text with openreg's display name (OpenReg); mytorch raises the same sentence in its own words",
    ),
    (
        r"test_mytorch_misc\.py::TestTensorType::test_backend_type_methods$",
        "asserts openreg has no typed storage classes (storage.type() is torch.storage.TypedStorage); mytorch "
        "defines torch.mytorch.FloatStorage and the others, as torch.cuda does (Tensor.storage_type())",
    ),
    (
        r"test_mytorch_ops\.py::TestQuantization::test_quantize$",
        "openreg's own quantized kernels (quantize_per_tensor to a device qint8 tensor); quantized tensors are out "
        "of scope on mytorch (and deprecated in torch 2.13): refused with a NotImplementedError saying so",
    ),
    (r"test_mytorch_ops\.py::Test\w+::test_(compile_autograd_function|custom_autograd_fn|custom_abs)\w*$", _CUSTOM_OPS),
    (
        r"test_mytorch_rng\.py::TestRNG::test_offset_unsupported$",
        "asserts openreg has no generator offsets (torch.openreg.set_offset raising); mytorch's generators have "
        "them, as torch.cuda's do (Generator.get_offset/set_offset)",
    ),
]
# Tests whose failure is torch 2.13's own, whatever the device (the file is newer or older than the installed torch,
# or races with torch itself): (nodeid regex, reason); set apart only when they fail.
OPENREG_UPSTREAM: list[tuple[str, str]] = [
    (
        r"test_mytorch_autograd\.py::TestAutograd::test_autograd_init$",
        "racy with torch 2.13's engine: it starts one thread per device at the first backward and each names itself "
        "(pt_autograd_<i>) when it first runs, which backward() does not wait for; on a loaded machine "
        "pt_autograd_1 may not be named yet (seen once in four runs here, under load)",
    ),
    (
        r"test_mytorch_device\.py::TestDevice::test_device_properties$",
        "expects torch.accelerator.get_memory_info() to return a dict; torch 2.13's returns (free, total) for "
        "every device",
    ),
    (
        r"test_mytorch_ops\.py::TestFactory::test_empty$",
        "named tensors: torch 2.13 removed them (torch.empty(..., names=...) raises TypeError on the CPU too)",
    ),
]
_INTERNAL_MESSAGE = re.compile(r"module 'mytorch(\._C)?' has no attribute")
# Device-generic tests whose failure on mytorch is not mytorch's to fix: (suite, test name regex, reason). Set apart
# from the attributable failures (and from the pass rate) only when they fail, each listed in docs/conformance.md.
DEVICE_SET_APART: list[tuple[str, str, str]] = [
    (
        "test_torch",
        r"test_tensor_storage_type_mytorch_\w+$",
        "harness age: the 2023 test expects torch.FloatStorage for every device but CUDA; torch 2.13's "
        "Tensor.storage_type() answers a PrivateUse1 backend's own classes (torch.mytorch.FloatStorage), as "
        "torch.cuda's",
    ),
    (
        "test_torch",
        r"test_broadcast_fn_map2?_mytorch$",
        "a difference from the CPU that CUDA shares: Tensor.map_/map2_ run Python callables on CPU tensors only "
        "(torch raises 'only implemented on CPU tensors' for every other device; the 2023 test skips them on CUDA "
        "only)",
    ),
    (
        "test_ops",
        r"test_out_warning_\w+_mytorch$",
        "an upstream expected failure mytorch does not reproduce ('Unexpected success'): the OpInfo marks the "
        "test expectedFailure on every device, and mytorch warns as the test asks",
    ),
    (
        "test_ops",
        r"test_\w*sparse\w*_mytorch\w*$",
        "sparse tensors: out of scope on mytorch (refused with PyTorch's error for the Sparsemytorch key)",
    ),
    (
        "test_torch",
        r"test_memory_format_empty_like_mytorch$",
        "sparse tensors: out of scope on mytorch (the test makes a sparse COO tensor on the device)",
    ),
]
REQUIRED_RATE = 0.99  # of each suite's CPU-passing twins (issue 30); --check pools the sample's suites
RAW = "https://raw.githubusercontent.com/pytorch/pytorch/{commit}/{path}"


def _commit() -> str:
    import torch

    return torch.version.git_version


def _fetch(path: str, dest: Path, commit: str) -> None:
    if dest.exists():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = RAW.format(commit=commit, path=path)
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
    except Exception as e:  # noqa: BLE001 - reported with what to do instead
        raise SystemExit(
            f"cannot download {url}: {e}\nPyTorch's test files are taken from its repository at the "
            f"installed torch's commit ({commit}); without network access to GitHub, pass "
            f"--src <a PyTorch checkout at that commit>."
        ) from e
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(dest)


def translate_openreg(text: str) -> str:
    """torch_openreg's tests for mytorch: the module and the device name only, wherever the name occurs,
    inside identifiers too (is_openreg, _openreg_, DeviceType.OPENREG), in each spelling it has."""
    text = text.replace("torch_openreg", "mytorch")
    return text.replace("openreg", "mytorch").replace("OpenReg", "Mytorch").replace("OPENREG", "MYTORCH")


def prepare(src: Path | None, suites: list[str], work: Path) -> Path:
    """The test tree the suites run in: a copy of PyTorch's test/ files (and openreg's, translated)."""
    commit = _commit()
    tree = work / commit
    for name in suites:
        files = (
            [f"{OPENREG_DIR}/{f}" for f in OPENREG_FILES]
            if name == "openreg"
            else [f"test/{DEVICE_SUITES[name][0]}", *HELPERS.get(name, [])]
        )
        for path in files:
            dest = tree / path
            if src is not None:
                if not (src / path).exists():
                    if name == "openreg":
                        continue  # a file this version does not have
                    raise SystemExit(f"{src / path} not found: --src must be a PyTorch source tree")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / path, dest)
            else:
                try:
                    _fetch(path, dest, commit)
                except SystemExit:
                    if name != "openreg" or path.endswith("test_device.py"):
                        raise
                    continue  # a file this version does not have
            if name == "openreg" and dest.exists():
                translated = dest.with_name(dest.name.replace("test_", "test_mytorch_", 1))
                translated.write_text(translate_openreg(dest.read_text()))
    if any(name != "openreg" for name in suites):
        # names the test files import that moved since they were written (_suite_conftest.py)
        shutil.copyfile(Path(__file__).with_name("_suite_conftest.py"), tree / "test" / "conftest.py")
    return tree


def run_suite(
    tree: Path,
    name: str,
    sample: float,
    seed: int,
    timeout: int,
    suite_timeout: int,
    only: list[str] | None = None,
    shards: int = 1,
) -> list[dict]:
    """One suite's rows; `only`: these test ids alone (file::class::test, as in the rows); `shards`: pytest
    processes run at once for it, each with its share of the twin pairs."""
    results = tree / f"results-{name}.jsonl"
    results.unlink(missing_ok=True)
    if only is not None:
        cwd = tree / (OPENREG_DIR if name == "openreg" else "test")
        targets = sorted({f"{Path(i.split('::', 1)[0]).name}::{i.split('::', 1)[1]}" for i in only})
        kexpr, sample = None, 1.0
    elif name == "openreg":
        cwd = tree / OPENREG_DIR
        targets = sorted(str(p.name) for p in cwd.glob("test_mytorch_*.py"))
        kexpr = None
        sample = 1.0  # device-specific tests, small: always in full
    else:
        cwd = tree / "test"
        targets = [DEVICE_SUITES[name][0]]
        kexpr = DEVICE_SUITES[name][1]
    if only == []:
        return []
    env = dict(
        os.environ,
        MYTORCH_SUITE_SAMPLE=str(sample),
        MYTORCH_SUITE_SEED=str(seed),
        MYTORCH_SUITE_TIMEOUT=str(timeout),
        MYTORCH_SIM_DEVICES=os.environ.get("MYTORCH_SIM_DEVICES", "2"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")])),
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "mytorch.testing._suite_plugin",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        *targets,
    ]
    if kexpr:
        cmd += ["-k", kexpr]
    if name == "openreg":
        cmd += ["--confcutdir", str(cwd)]  # not the device suites' conftest above it
    # shards: that many pytest processes at once, each keeping its share of the twin pairs (_suite_plugin.py)
    shards = max(1, shards if only is None else 1)
    parts = [(k, tree / f"results-{name}.{k}.jsonl", tree / f"log-{name}.{k}.txt") for k in range(shards)]
    if shards == 1:
        parts = [(0, results, tree / f"log-{name}.txt")]
    procs = []
    for k, part_results, log in parts:
        part_results.unlink(missing_ok=True)
        out = open(log, "w")
        penv = dict(env, MYTORCH_SUITE_RESULTS=str(part_results), MYTORCH_SUITE_SHARD=f"{k}/{shards}")
        procs.append((subprocess.Popen(cmd, cwd=cwd, env=penv, stdout=out, stderr=subprocess.STDOUT), out))
    deadline = time.time() + suite_timeout
    rows = []
    for (proc, out), (_k, part_results, log) in zip(procs, parts):
        try:
            rc = proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = "timeout"
        out.close()
        part = [json.loads(line) for line in part_results.read_text().splitlines()] if part_results.exists() else []
        if not part and rc not in (0, 5):
            tail = log.read_text()[-2000:]
            part.append(
                {"id": f"{name}::<collection>", "outcome": "error", "message": f"pytest exit {rc}: {tail[-300:]}"}
            )
        rows += part
    return rows


def summarize(name: str, rows: list[dict]) -> dict:
    """Counts per suite. Device-generic: mytorch outcomes, twins' outcomes, attributable failures."""
    if name == "openreg":
        internal, upstream, counts, failures = [], [], Counter(), []
        for r in rows:
            why_upstream = next((why for pat, why in OPENREG_UPSTREAM if re.search(pat, r["id"])), None)
            if why_upstream is not None and r["outcome"] in ("failed", "error"):
                upstream.append({"id": r["id"], "outcome": r["outcome"], "reason": why_upstream})
                continue
            reason = next((why for pat, why in OPENREG_INTERNAL if re.search(pat, r["id"])), None)
            if reason is None and r["outcome"] in ("failed", "error") and _INTERNAL_MESSAGE.search(r["message"]):
                reason = "uses openreg's private extension bindings"
            if reason is not None:
                internal.append({"id": r["id"], "outcome": r["outcome"], "reason": reason})
                continue
            counts[_bucket(r["outcome"])] += 1
            if _bucket(r["outcome"]) == "failed":
                failures.append({"id": r["id"], "message": r["message"]})
        ran = counts["passed"] + counts["failed"]
        return {
            "suite": name,
            "passed": counts["passed"],
            "failed": counts["failed"],
            "skipped": counts["skipped"],
            "internal": internal,
            "upstream": upstream,
            "pass_rate": counts["passed"] / ran if ran else None,
            "failures": failures,
        }
    by_twin: dict[str, dict[str, str]] = {}
    mine = Counter()
    for r in rows:
        dev = device_of(r["id"])
        by_twin.setdefault(twin_key(r["id"]), {})[dev] = r
        if dev == "mytorch":
            mine[_bucket(r["outcome"])] += 1
    reference = attributable = passed = skipped = 0
    failures, set_apart = [], []
    for pair in by_twin.values():
        cpu, dev = pair.get("cpu"), pair.get("mytorch")
        if cpu is None or dev is None or _bucket(cpu["outcome"]) != "passed":
            continue
        reference += 1
        b = _bucket(dev["outcome"])
        if b == "passed":
            passed += 1
        elif b == "skipped":
            skipped += 1
        elif (why := _set_apart(name, dev["id"], dev.get("message", ""))) is not None:
            skipped += 1
            set_apart.append({"id": dev["id"], "reason": why})
        else:
            attributable += 1
            failures.append({"id": dev["id"], "message": dev["message"]})
    counted = reference - skipped
    return {
        "suite": name,
        "passed": mine["passed"],
        "failed": mine["failed"],
        "skipped": mine["skipped"],
        "cpu_passing_twins": reference,
        "twins_passed": passed,
        "twins_skipped": skipped,
        "attributable_failures": attributable,
        "set_apart": sorted(set_apart, key=lambda f: f["id"]),
        "pass_rate": passed / counted if counted else None,
        "failures": sorted(failures, key=lambda f: f["id"]),
    }


# Out of scope by the error itself, in any suite: other layouts, whose dispatch keys mytorch registers nothing for
# (PyTorch's own "Could not run ... from the 'Sparsemytorch' backend").
_OUT_OF_SCOPE = re.compile(
    r"from the '(Sparse|SparseCsr|NestedTensor)mytorch' backend|mytorch does not support (quantized) tensors"
)


def _set_apart(suite: str, test_id: str, message: str = "") -> str | None:
    name = test_id.split("::")[-1]
    why = next((why for s, pat, why in DEVICE_SET_APART if s == suite and re.search(pat, name)), None)
    if why is None and (m := _OUT_OF_SCOPE.search(message)):
        kind = m.group(1) or m.group(2)
        why = f"{kind} tensors: out of scope on mytorch (refused with an error that says so)"
    return why


def _attributable_ids(name: str, rows: list[dict]) -> list[str]:
    """The ids of a suite's failures attributable to mytorch (openreg: every failure), with their CPU twins."""
    failing = {twin_key(f["id"]) for f in summarize(name, rows)["failures"]}
    return [r["id"] for r in rows if twin_key(r["id"]) in failing]


def _bucket(outcome: str) -> str:
    return {"passed": "passed", "xfail": "passed", "skipped": "skipped"}.get(outcome, "failed")


def markdown(summaries: list[dict], command: str) -> str:
    lines = [
        f"`{command}`",
        "",
        "| suite | tests run | mytorch passed | failed | skipped | CPU-passing twins | attributable failures "
        "| pass rate | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        rate = "—" if s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"
        share = "all" if s.get("sample", 1.0) >= 1 else f"{100 * s['sample']:g}% (seeded)"
        took = f"{s['seconds'] // 60} min" if "seconds" in s else "—"
        if s["suite"] == "openreg":
            excluded = f"{len(s['internal'])} openreg-internal, {len(s['upstream'])} torch 2.13's own"
            lines.append(
                f"| torch_openreg (translated) | {share} | {s['passed']} | {s['failed']} | {s['skipped']} | — | "
                f"{s['failed']} ({excluded}: excluded) | {rate} | {took} |"
            )
        else:
            lines.append(
                f"| {s['suite']} | {share} | {s['passed']} | {s['failed']} | {s['skipped']} | "
                f"{s['cpu_passing_twins']} | {s['attributable_failures']}{_apart(s)} | {rate} | {took} |"
            )
    return "\n".join(lines) + "\n"


# Seconds a suite took in the test command's sample (1%, openreg in full) on this project's 2-core machine: the order in
# which --jobs starts them. A suite not listed counts as the shortest.
_EXPECTED_SECONDS = {
    "test_ops": 93,
    "openreg": 69,
    "test_unary_ufuncs": 46,
    "test_modules": 42,
    "test_binary_ufuncs": 21,
    "test_nn": 15,
    "test_reductions": 12,
    "test_torch": 8,
}


def _expected_cost(name: str) -> int:
    return _EXPECTED_SECONDS.get(name, 0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--suite",
        action="append",
        choices=[*DEVICE_SUITES, "openreg"],
        help="a suite to run (repeatable; default: all)",
    )
    p.add_argument(
        "--src",
        type=Path,
        default=os.environ.get("MYTORCH_PYTORCH_SRC") or None,
        help="a PyTorch source tree at the installed torch's commit (default: $MYTORCH_PYTORCH_SRC, else downloaded)",
    )
    p.add_argument("--work", type=Path, default=ROOT / "build" / "pytorch-tests")
    p.add_argument("--sample", type=float, default=1.0, help="fraction of each device-generic suite (seeded)")
    p.add_argument(
        "--sample-for",
        action="append",
        default=[],
        metavar="SUITE=F",
        help="a fraction for one suite, overriding --sample (repeatable)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=120, help="seconds per test")
    p.add_argument("--suite-timeout", type=int, default=4 * 3600, help="seconds per suite")
    p.add_argument("--jobs", type=int, default=1, help="suites run at once (each is one process)")
    p.add_argument(
        "--shards",
        type=int,
        default=1,
        help="pytest processes per suite, each running a share of its twin pairs (--jobs x --shards at once)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when openreg's suite fails outside its listed exclusions, or when the device-generic suites' "
        f"pooled pass rate is under {100 * REQUIRED_RATE:g}%% (the CI sample)",
    )
    p.add_argument(
        "--rerun",
        type=Path,
        help="the work folder of an earlier run (build/pytorch-tests/<commit>): run again only its failures "
        "attributable to mytorch, with their CPU twins, and report that run with their new outcomes",
    )
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    if args.src is not None:
        args.src = Path(args.src)
    suites = args.suite or [*DEVICE_SUITES, "openreg"]
    tree = prepare(args.src, suites, args.work)

    fractions = {name: args.sample for name in suites}
    for item in args.sample_for:
        name, _, fraction = item.partition("=")
        if name not in fractions:
            p.error(f"--sample-for {item}: {name} is not one of the suites run ({', '.join(suites)})")
        fractions[name] = float(fraction)

    def one(name: str) -> dict:
        start = time.time()
        sample = 1.0 if name == "openreg" else fractions[name]
        if args.rerun is not None:
            # an earlier run's rows, with its attributable failures (and their CPU twins) run again here
            before = [json.loads(line) for line in (args.rerun / f"results-{name}.jsonl").read_text().splitlines()]
            again = _attributable_ids(name, before)
            fresh = run_suite(tree, name, 1.0, 0, args.timeout, args.suite_timeout, again)
            by_test = {r["id"].split("::", 1)[1]: r for r in fresh}
            rows = [by_test.get(r["id"].split("::", 1)[1], r) for r in before]
            sample = json.loads((args.rerun / "sample.json").read_text()).get(name, 1.0)
        else:
            rows = run_suite(tree, name, sample, args.seed, args.timeout, args.suite_timeout, shards=args.shards)
        (tree / f"results-{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        s = summarize(name, rows)
        s["sample"] = sample
        s["seconds"] = round(time.time() - start)
        rate = "—" if s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"
        print(
            f"{name}: {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped; pass rate {rate} "
            f"({s['seconds']} s)",
            flush=True,
        )
        return s

    # each suite is its own pytest process: --jobs runs that many at once, the longest first (so that no long suite
    # starts last and leaves the other workers idle: 190 s -> about 165 s for the test command's sample on 2 jobs),
    # and the table keeps the suites' order
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        started = {name: pool.submit(one, name) for name in sorted(suites, key=_expected_cost, reverse=True)}
        summaries = [started[name].result() for name in suites]
    if args.rerun is None:
        (tree / "sample.json").write_text(json.dumps({s["suite"]: s["sample"] for s in summaries}))
    command = "python -m mytorch.testing.suites " + " ".join(argv if argv is not None else sys.argv[1:])
    table = markdown(summaries, command.strip())
    print(table)
    if args.json:
        args.json.write_text(
            json.dumps({"command": command.strip(), "torch_commit": _commit(), "suites": summaries}, indent=1)
        )
    if args.markdown:
        args.markdown.write_text(table)
    if args.check:
        problems = check(summaries)
        for line in problems:
            print("check:", line)
        return 1 if problems else 0
    return 0


def _apart(s: dict) -> str:
    return f" (+{len(s['set_apart'])} set apart)" if s.get("set_apart") else ""


def check(summaries: list[dict]) -> list[str]:
    """What fails the CI sample: an openreg failure outside its exclusions, a pooled pass rate under REQUIRED_RATE
    over the device-generic suites run (pooled: a 1% sample holds a few dozen twins per suite)."""
    problems = [
        f"openreg: {f['id']}: {f['message'][:200]}" for s in summaries if s["suite"] == "openreg" for f in s["failures"]
    ]
    device = [s for s in summaries if s["suite"] != "openreg"]
    passed = sum(s["twins_passed"] for s in device)
    counted = sum(s["cpu_passing_twins"] - s["twins_skipped"] for s in device)
    if counted and passed / counted < REQUIRED_RATE:
        problems.append(
            f"device-generic suites: pooled pass rate {100 * passed / counted:.2f}% < {100 * REQUIRED_RATE:g}%"
        )
        problems += [f"{s['suite']}: {f['id']}: {f['message'][:200]}" for s in device for f in s["failures"]]
    return problems


if __name__ == "__main__":
    sys.exit(main())
