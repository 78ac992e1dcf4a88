"""The main job, shortened: trains the GPT example on mytorch and on the CPU and requires agreement."""
import os
import subprocess
import sys

from conftest import ROOT


def test_train_gpt_agrees_with_cpu():
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "train_gpt.py"), "--steps", "12", "--layers", "1",
         "--embd", "64", "--heads", "2", "--block", "32", "--batch", "4", "--corpus-bytes", "200000"],
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "OK: mytorch and CPU training agree" in r.stdout
    assert "fallback summary" in r.stdout and "peak device memory" in r.stdout
    assert "expected duration: about" in r.stdout and "ETA" in r.stdout
