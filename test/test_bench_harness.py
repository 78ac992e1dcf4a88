"""The benchmark harness (mytorch.testing.bench) on a fake clock: interleaving, sample sizing, the ratio's
direction, the reference's fastest variant, and where results go. No real timing is asserted."""

import argparse
import json
import os

import pytest

from mytorch.testing import bench


class FakeClock:
    """perf_counter and process_time that advance only when a fake kernel 'runs'."""

    def __init__(self):
        self.now = 0.0
        self.cpu = 0.0
        self.log = []

    def kernel(self, label, seconds, cpu_fraction=1.0):
        def run():
            self.log.append(label)
            self.now += seconds
            self.cpu += seconds * cpu_fraction

        return run


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", lambda: c.now)
    monkeypatch.setattr(bench.time, "process_time", lambda: c.cpu)
    return c


def test_rounds_interleave_in_rotating_order(clock):
    calls = {k: (clock.kernel(k, 0.01), lambda: None) for k in ("a", "b", "c")}
    bench.measure(calls, repeat=3, warmup=0, inner=1)
    assert clock.log == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_samples_are_sized_to_the_minimum_and_reported_per_call(clock):
    stats = bench.measure(
        {"fast": (clock.kernel("fast", 1e-5, 0.5), lambda: None)}, repeat=4, warmup=1, min_sample_s=0.02
    )
    s = stats["fast"]
    assert len(s.wall) == 4
    assert s.median == pytest.approx(1e-5)
    assert s.cpu_median == pytest.approx(0.5e-5)
    assert s.spread == pytest.approx(0.0)
    per_sample = (len(clock.log) - 1) // 5  # one warm-up call; the sizing sample and 4 rounds of n calls
    assert per_sample * 1e-5 >= 0.02


def test_ratio_is_reference_over_mytorch_and_the_fastest_variant_is_the_reference(clock, tmp_path, monkeypatch):
    args = bench.add_args(argparse.ArgumentParser()).parse_args(
        ["--repeat", "5", "--warmup", "0", "--min-sample-ms", "0", "--out", str(tmp_path)]
    )
    b = bench.Bench("fake", args, "fake clock")
    row = b.compare(
        "case",
        clock.kernel("mine", 0.002),
        {"slow": clock.kernel("slow", 0.008), "fast": clock.kernel("fast", 0.004)},
        work=0.004,
        unit="GB/s",
    )
    assert row.reference_variant == "fast"
    assert row.ratio == pytest.approx(2.0)  # 4 ms reference / 2 ms mytorch: mytorch is faster
    assert row.extra["slow_ratio"] == pytest.approx(4.0)
    assert row.mytorch_rate == pytest.approx(2.0) and row.reference_rate == pytest.approx(1.0)
    out = b.finish()
    assert os.path.dirname(out) == str(tmp_path)
    data = json.load(open(out))
    assert data["rows"][0]["ratio"] == pytest.approx(2.0)
    assert any("ratio = reference time / mytorch time" in line for line in data["header"])
    assert any("thread" in line for line in data["header"])
    assert os.path.exists(tmp_path / "fake.md")


def test_threads_are_set_and_docs_are_written_only_when_asked(clock, tmp_path, monkeypatch):
    import torch

    before = torch.get_num_threads()
    docs = tmp_path / "docs"
    monkeypatch.setattr(bench, "ROOT", str(tmp_path))
    try:
        args = bench.add_args(argparse.ArgumentParser()).parse_args(["--threads", "1", "--out", str(tmp_path / "o")])
        b = bench.Bench("fake", args)
        assert torch.get_num_threads() == 1
        assert b.path("x.png").startswith(str(tmp_path / "o"))
        assert not docs.exists()
        assert b.path("x.png", docs=True).startswith(str(docs))
    finally:
        torch.set_num_threads(before)


def test_speed_report_covers_op_db_and_its_own_cases(tmp_path):
    """python -m mytorch.testing.speed end to end on two ops (an OpInfo and one of its own cases), in a fresh
    process (the harness sets process-wide modes): both timed, with the transposed variant, and the page's sections
    written. No timing is asserted."""
    import subprocess
    import sys

    from conftest import ROOT

    args = ["--ops", "abs", "gather dim 1", "--dtypes", "float32", "--kinds", "forward,strided", "--repeat", "1"]
    args += ["--min-sample-ms", "1", "--warmup", "0", "--malloc", "default", "--out", str(tmp_path)]
    r = subprocess.run(
        [sys.executable, "-m", "mytorch.testing.speed", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    payload = json.load(open(tmp_path / "speed.json"))
    cases = {row["case"] for row in payload["rows"]}
    assert {"abs float32 forward", "abs float32 strided", "gather dim 1 float32 forward"} <= cases, cases
    assert all(row["ratio"] > 0 and row["extra"]["elements"] > 0 for row in payload["rows"])
    page = (tmp_path / "speed.md").read_text()
    assert "## Summary" in page and "## Every case, worst first" in page and "## Known misses" in page


def test_speed_report_strided_variant_is_non_contiguous():
    """The strided variant really is: the same values, the last two dimensions' strides swapped (a report of
    contiguous operands labelled strided would pass every timing vacuously)."""
    import torch

    from mytorch.testing.speed import _strided

    t = torch.arange(12.0).reshape(3, 4)
    s = _strided(t)
    assert torch.equal(s, t) and not s.is_contiguous() and s.stride() == (1, 3)
