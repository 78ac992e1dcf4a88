"""The main job, shortened: trains the GPT example on mytorch and on the CPU and requires agreement."""

import os
import subprocess
import sys

from conftest import ROOT


SMALL = ["--layers", "1", "--embd", "64", "--heads", "2", "--block", "32", "--batch", "4", "--corpus-bytes", "200000"]


def test_train_gpt_optimized_agrees_with_cpu():
    """bash scripts/demo.sh --optimize: mytorch.optimize swaps the GPT's loss for linear_cross_entropy."""
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "train_gpt.py"), "--optimize", "--steps", "8", *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "mytorch.optimize: GPT: cross_entropy x1" in r.stdout
    assert "OK: mytorch and CPU training agree" in r.stdout


def test_train_gpt_agrees_with_cpu():
    r = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "examples", "train_gpt.py"),
            "--steps",
            "12",
            "--layers",
            "1",
            "--embd",
            "64",
            "--heads",
            "2",
            "--block",
            "32",
            "--batch",
            "4",
            "--corpus-bytes",
            "200000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "OK: mytorch and CPU training agree" in r.stdout
    assert "fallback summary" in r.stdout and "peak device memory" in r.stdout
    assert "expected duration: about" in r.stdout and "ETA" in r.stdout


def test_train_gpt_compiled_agrees_with_cpu():
    """The main job with --compile: Inductor on the sim runtime (test_compile.py), no fallback, CPU parity."""
    import torch

    if torch.mytorch.runtime() != "sim":
        import pytest

        pytest.skip("Inductor on mytorch runs on the sim runtime")
    r = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "examples", "train_gpt.py"),
            "--compile",
            "--steps",
            "6",
            "--layers",
            "1",
            "--embd",
            "64",
            "--heads",
            "2",
            "--block",
            "32",
            "--batch",
            "4",
            "--corpus-bytes",
            "200000",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MYTORCH_FALLBACK": "error"},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "OK: mytorch and CPU training agree" in r.stdout
    import re

    m = re.search(
        r"torch.compile \(Inductor, cpp path\): the first step, with compilation, took [0-9.]+ s; the graphs "
        r"run (\d+) generated kernels and (\d+) calls to mytorch's kernels \((.*)\)",
        r.stdout,
    )
    assert m, r.stdout[-2000:]
    assert int(m.group(1)) > 0 and int(m.group(2)) > 0 and "aten.mm" in m.group(3)
    assert "fallback summary: 0 operators ran on the CPU fallback" in r.stdout
