"""The runner of PyTorch's own suites (python -m mytorch.testing.suites) on a small source tree laid out like
PyTorch's: twins are paired across the CPU and mytorch classes, failures are attributed only where the CPU
twin passes, the sample is seeded and keeps twins together, a hung test times out, and torch_openreg's
tests are translated and run with openreg-internal ones set apart."""

import json
import subprocess
import sys

from conftest import ROOT
from mytorch.testing._suite_plugin import device_of, twin_key

DEVICE_SUITE = """
import time
import torch
from torch.testing._internal.common_utils import TestCase, skipIfMps  # a 2023 name the runner's conftest supplies
from torch.testing._internal.common_device_type import (
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    dtypes,
    onlyCPU,
)


class TestMini(TestCase):
    @skipIfMps
    def test_add(self, device):
        self.assertEqual(torch.ones(3, device=device) + 1, torch.full((3,), 2.0, device=device))

    @dtypes(torch.float32, torch.int64)
    def test_sum(self, device, dtype):
        self.assertEqual(torch.ones(3, device=device, dtype=dtype).sum().item(), 3)

    def test_fails_everywhere(self, device):
        self.assertEqual(1, 2)

    def test_cpu_passes_mytorch_fails(self, device):
        self.assertTrue(device.startswith("cpu"))

    def test_hangs_on_mytorch(self, device):
        if not device.startswith("cpu"):
            time.sleep(60)
        self.assertEqual(torch.ones(1, device=device).item(), 1)

    @onlyCPU
    def test_cpu_only(self, device):
        self.assertEqual(device, "cpu")


instantiate_device_type_tests(TestMini, globals())


class TestOther(TestCase):
    def test_mul(self, device):
        self.assertEqual((torch.ones(2, device=device) * 2).sum().item(), 4)


# a device class named after the backend (TestOtherMYTORCH), as the harness names some
PrivateUse1TestBase.device_type = torch._C._get_privateuse1_backend_name()
instantiate_device_type_tests(TestOther, globals())
PrivateUse1TestBase.device_type = "privateuse1"
"""

OPENREG_SUITE = """
import torch
import torch_openreg  # noqa: F401
from torch.testing._internal.common_utils import TestCase


class TestDevice(TestCase):
    def test_device_name(self):
        self.assertEqual(torch.empty(2, device="openreg").device.type, "openreg")
        self.assertTrue(torch.empty(2, device="openreg").is_openreg)  # the name inside an identifier
        self.assertTrue(torch.openreg.is_available())

    def test_private_binding(self):
        self.assertIsNotNone(torch_openreg._C._get_default_generator(0))

    def test_backend_rename(self):
        torch.utils.rename_privateuse1_backend("openreg")
        self.assertEqual(torch._C._get_privateuse1_backend_name(), "openreg")
"""


def test_runner_counts_twins_samples_and_openreg(tmp_path):
    src = tmp_path / "pytorch"
    (src / "test").mkdir(parents=True)
    (src / "test" / "test_indexing.py").write_text(DEVICE_SUITE)
    openreg = src / "test/cpp_extensions/open_registration_extension/torch_openreg/tests"
    openreg.mkdir(parents=True)
    (openreg / "test_device.py").write_text(OPENREG_SUITE)

    def run(*extra):
        out = tmp_path / "out.json"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mytorch.testing.suites",
                "--src",
                str(src),
                "--work",
                str(tmp_path / "work"),
                "--timeout",
                "5",
                "--json",
                str(out),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return {s["suite"]: s for s in json.loads(out.read_text())["suites"]}, r.stdout

    got, stdout = run("--suite", "test_indexing", "--suite", "openreg")
    s = got["test_indexing"]
    # mytorch: add, sum x2, mul (TestOtherMYTORCH) pass; fails_everywhere, cpu_passes_mytorch_fails, hangs (timed
    # out) fail; cpu_only skips
    assert (s["passed"], s["failed"], s["skipped"]) == (4, 3, 1)
    # twins passing on the CPU: add, sum x2, mul, cpu_passes_mytorch_fails, hangs_on_mytorch, cpu_only (skipped on
    # mytorch, so out of the rate)
    assert s["cpu_passing_twins"] == 7 and s["twins_skipped"] == 1 and s["attributable_failures"] == 2
    assert abs(s["pass_rate"] - 4 / 6) < 1e-9
    ids = {f["id"].split("::")[-1]: f["message"] for f in s["failures"]}
    assert set(ids) == {"test_cpu_passes_mytorch_fails_mytorch", "test_hangs_on_mytorch_mytorch"}
    assert "MYTORCH_SUITE_TIMEOUT" in ids["test_hangs_on_mytorch_mytorch"]
    assert "| test_indexing | all | 4 | 3 | 1 | 7 | 2 | 66.7% |" in stdout

    o = got["openreg"]
    assert (o["passed"], o["failed"]) == (2, 0)  # renaming to the name it has is allowed
    assert [(i["id"].split("::")[-1], i["reason"]) for i in o["internal"]] == [
        ("test_private_binding", "uses openreg's private extension bindings")
    ]
    translated = (tmp_path / "work").glob("*/test/cpp_extensions/**/test_mytorch_device.py")
    assert 'device="mytorch"' in next(translated).read_text()

    # a seeded half keeps CPU and mytorch twins together
    run("--suite", "test_indexing", "--sample", "0.5", "--seed", "3")
    rows = [
        json.loads(line)
        for line in next((tmp_path / "work").glob("*/results-test_indexing.jsonl")).read_text().splitlines()
    ]
    kept = {}
    for r in rows:
        kept.setdefault(twin_key(r["id"]), set()).add(device_of(r["id"]))
    assert 0 < len(kept) < 8 and all(devs == {"cpu", "mytorch"} for devs in kept.values())

    # two shards at once: every test once, each shard keeping twins together, the same counts as one process
    sharded, _ = run("--suite", "test_indexing", "--shards", "2")
    assert {k: sharded["test_indexing"][k] for k in ("passed", "failed", "skipped", "cpu_passing_twins")} == {
        k: s[k] for k in ("passed", "failed", "skipped", "cpu_passing_twins")
    }
    work = next((tmp_path / "work").glob("*/"))
    shard_keys = []
    for k in range(2):
        part = [json.loads(line) for line in (work / f"results-test_indexing.{k}.jsonl").read_text().splitlines()]
        keys = {twin_key(r["id"]) for r in part}
        assert all({device_of(r["id"]) for r in part if twin_key(r["id"]) == key} == {"cpu", "mytorch"} for key in keys)
        shard_keys.append(keys)
    assert shard_keys[0] and shard_keys[1] and not shard_keys[0] & shard_keys[1]


def test_device_classes_of_both_spellings_pair_with_their_cpu_twins():
    cpu = "test_torch.py::TestTorchDeviceTypeCPU::test_x_cpu_float32"
    for cls in ("TestTorchDeviceTypePRIVATEUSE1", "TestTorchDeviceTypeMYTORCH"):
        mine = f"test_torch.py::{cls}::test_x_mytorch_float32"
        assert device_of(mine) == "mytorch" and twin_key(mine) == twin_key(cpu)
    assert device_of(cpu) == "cpu" and device_of("test_torch.py::TestTorch::test_y") == "other"
