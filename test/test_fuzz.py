"""The robustness fuzzer (python -m mytorch.testing.fuzz): a seeded sample of its cases finds no silent
corruption, no mixed-device acceptance, no crash, no hang and no difference from the CPU that is not listed; the harness itself tells a crash and a hang
from an answer. The full campaign's figures are in docs/robustness.md."""

import json
import os
import subprocess
import sys

from conftest import ROOT
from mytorch.testing._fuzz_bad import BAD_INPUTS
from mytorch.testing.fuzz import VARIANTS, unlisted


CASES = int(os.environ.get("MYTORCH_FUZZ_CASES", "8000"))  # scripts/test.sh runs fewer on the emulated build


def test_seeded_sample_has_no_silent_corruption(tmp_path):
    out = tmp_path / "fuzz.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mytorch.testing.fuzz",
            "--cases",
            str(CASES),
            "--seed",
            "20261124",
            "--jobs",
            "2",
            "--json",
            str(out),
            "--log",
            str(tmp_path / "workers.log"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    rows = json.loads(out.read_text())["cases"]
    verdicts = {row["verdict"] for row in rows}
    assert len(rows) == CASES and "ok" in verdicts
    assert not verdicts & {"corruption", "mixed_device", "crash", "hang"}
    # every variant ran somewhere in the sample
    ran = {row["variant"] for row in rows if row["verdict"] != "skipped"}
    assert CASES < 1000 or ran == set(VARIANTS)
    # the hand-written bad inputs come first in every sample; every difference from the CPU is one that
    # KNOWN_DIFFERENCES lists, with docs/robustness.md (the run's exit status says so too)
    bad_inputs = [row for row in rows if row["variant"] == "bad_input"]
    assert len(bad_inputs) == min(CASES, len(BAD_INPUTS)) and "ok" in {row["verdict"] for row in bad_inputs}
    assert not unlisted(rows), unlisted(rows)


def test_pool_reports_crashes_and_hangs(tmp_path):
    from mytorch.testing._pool import run_pool

    worker = tmp_path / "toy_worker.py"
    worker.write_text(
        "import json, os, sys, time\n"
        "out = os.fdopen(int(os.environ['MYTORCH_WORKER_FD']), 'w', buffering=1)\n"
        "out.write(json.dumps({'ready': True}) + '\\n')\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    if req['do'] == 'crash': os.abort()\n"
        "    if req['do'] == 'hang': time.sleep(60)\n"
        "    out.write(json.dumps({'index': req['index'], 'answer': req['do']}) + '\\n')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    with open(tmp_path / "log", "w") as log:
        got = run_pool(
            "toy_worker",
            [(0, {"do": "ok"}), (1, {"do": "crash"}), (2, {"do": "hang"}), (3, {"do": "ok"})],
            jobs=2,
            timeout=3,
            env=env,
            log=log,
        )
    assert got[0]["answer"] == "ok" and got[3]["answer"] == "ok"
    assert got[1]["crashed"] and "signal 6" in got[1]["failure"]
    assert got[2]["timed_out"] and "timed out" in got[2]["failure"]


def test_every_listed_difference_is_justified_in_the_docs():
    """KNOWN_DIFFERENCES is the machine's list; docs/robustness.md gives each entry's reason to a reader."""
    from mytorch.testing.fuzz import KNOWN_DIFFERENCES

    doc = open(os.path.join(ROOT, "docs", "robustness.md")).read()
    missing = [name for name, _ in KNOWN_DIFFERENCES if f"`{name.removeprefix('bad:')}`" not in doc]
    assert not missing, missing


def _fuzz_range_factories(tmp_path, preload: str):
    out = tmp_path / f"fuzz{preload}.json"
    cmd = [sys.executable, "-m", "mytorch.testing.fuzz", "--cases", "0", "--jobs", "2", "--ops", "linspace,arange"]
    cmd += ["--variants", "reshaped_out,factory_out", "--json", str(out), "--log", str(tmp_path / "workers.log")]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "test") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(cmd + (["--preload", preload] if preload else []), capture_output=True, text=True,
                       timeout=600, cwd=ROOT, env=env)  # fmt: skip
    return r, json.loads(out.read_text())["cases"]


def test_new_variants_catch_the_range_factory_out_bug(tmp_path):
    """Negative control (issue 49): with linspace and arange put back to resizing a right-sized strided out= to 1-D
    (test/fuzz_hooks.py), the reshaped_out and factory_out variants report it and the run fails; without the hook
    the same cases pass."""
    r, rows = _fuzz_range_factories(tmp_path, "fuzz_hooks")
    assert r.returncode == 1, r.stdout[-2000:]
    differs = {(row["variant"], row["name"].split("/")[0]) for row in rows if row["verdict"] == "differs"}
    assert {
        ("reshaped_out", "arange"),
        ("factory_out", "factory:linspace"),
        ("factory_out", "factory:arange"),
    } <= differs
    assert any("strides" in row["detail"] for row in rows if row["variant"] == "factory_out")
    r, rows = _fuzz_range_factories(tmp_path, "")
    assert r.returncode == 0, r.stdout[-2000:]
    assert {row["verdict"] for row in rows} <= {"ok", "skipped"} and any(row["verdict"] == "ok" for row in rows)
