"""scripts/gpu_verify.sh, the one command a borrowed GPU machine runs (docs/gpu.md, "On a GPU"): every stage it
lists exists, it keeps to its deadline, and it leaves at most 8 files, all in its output folder."""

import importlib.util
import json
import os
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_verify.sh")


def _driver():
    spec = importlib.util.spec_from_file_location("gpu_verify", os.path.join(ROOT, "scripts", "gpu_verify.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args, env=None, timeout=300):
    full = dict(os.environ, PYTHON=sys.executable, **(env or {}))
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=full, timeout=timeout, cwd=ROOT)


def test_every_listed_stage_is_dispatched():
    d = _driver()
    assert list(d.STAGES) == [
        "probe",
        "build",
        "distributed",
        "tests",
        "bench",
        "tests_cuda_core",
        "ptxas",
        "ipc",
        "compile",
        "sanitizer",
        "align",
        "fuzz",
        "ep",
        "graphs",
    ]
    assert all(callable(f) and f.__name__ == f"stage_{name}" for name, f in d.STAGES.items())
    r = _run("--help")
    assert r.returncode == 0 and " ".join(d.STAGES) in r.stdout


def test_an_unknown_stage_is_refused_before_anything_runs(tmp_path):
    r = _run(str(tmp_path / "out"), "probe", "fuzzz")
    assert r.returncode == 2 and "fuzzz" in r.stderr, r
    assert not (tmp_path / "out" / "summary.json").exists()


def test_results_are_at_most_eight_files_in_the_output_folder(tmp_path):
    out = tmp_path / "out"
    r = _run(str(out), "probe")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["logs.tar.gz", "summary.json", "summary.md"], files
    summary = json.load(open(out / "summary.json"))
    assert summary["ok"] and [s["stage"] for s in summary["stages"]] == ["probe"], summary
    with tarfile.open(out / "logs.tar.gz") as tar:
        assert "gpu_verify/probe.log" in tar.getnames()
    assert not any(p.name.startswith("gpu_verify-") for p in tmp_path.iterdir())


def test_stages_after_the_deadline_are_recorded_not_run(tmp_path):
    out = tmp_path / "out"
    r = _run(str(out), "probe", "build", env={"GPU_VERIFY_DEADLINE": "1"})
    summary = json.load(open(out / "summary.json"))
    statuses = {s["stage"]: (s["status"], s["detail"]) for s in summary["stages"]}
    assert statuses["build"][0] == "skipped" and "deadline" in statuses["build"][1], statuses
    assert r.returncode == 0, r.stdout[-2000:]


def _build_module(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("mytorch_build_carry", os.path.join(ROOT, "scripts", "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = tmp_path / "tree"
    (tree / "csrc").mkdir(parents=True)
    (tree / "csrc" / "a.cpp").write_text("int a;\n")
    monkeypatch.setattr(mod, "ROOT", tree)
    monkeypatch.setattr(mod, "BUILD", tmp_path / "build")
    return mod, tree


def test_a_carried_build_is_unpacked_only_for_its_torch_python_and_tree(monkeypatch, tmp_path):
    """Note [A carried GPU build]: the extension built here for the lent machine's torch is used there only when
    the torch, the Python tag and the digest of the build's inputs all match; otherwise the reason is given."""
    import lzma

    import torch

    b, tree = _build_module(monkeypatch, tmp_path)
    carry = tmp_path / "carry"
    carry.mkdir()
    path, why = b.carried(carry)
    assert path is None and "no carried build" in why
    payload = b"\x7fELF not really an extension"
    (carry / "_C.so.xz").write_bytes(lzma.compress(payload, preset=1))
    good = {"torch": torch.__version__, "cache_tag": sys.implementation.cache_tag, "name": "_C.test.so"}
    for field, wrong, said in (("torch", "2.11.0+cu130", "2.11.0+cu130"), ("cache_tag", "cpython-39", "cpython-39")):
        (carry / "carry.json").write_text(json.dumps(dict(good, digest=b.inputs_digest(), **{field: wrong})))
        path, why = b.carried(carry)
        assert path is None and said in why, why
    (carry / "carry.json").write_text(json.dumps(dict(good, digest=b.inputs_digest())))
    path, why = b.carried(carry)
    assert why == "ok" and path.read_bytes() == payload
    # an input changed after the carried build was made: its digest no longer matches
    before = b.inputs_digest()
    (tree / "csrc" / "a.cpp").write_text("int a = 1;\n")
    assert b.inputs_digest() != before
    path, why = b.carried(carry)
    assert path is None and "changed since the carried build" in why
