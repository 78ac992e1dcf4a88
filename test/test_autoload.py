"""PyTorch's backend autoload: `import torch` alone brings the device; it can be disabled; a plugin that
cannot initialise never breaks `import torch`."""

import os

from conftest import run_python


def test_import_torch_alone_gives_the_device():
    r = run_python(
        """
        import torch
        x = torch.ones(3, device="mytorch")
        print(x.device, torch.mytorch.is_available(), float(x.sum()))
    """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["mytorch:0", "True", "3.0"]


def test_autoload_can_be_disabled():
    r = run_python("import torch; print(hasattr(torch, 'mytorch'))", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_device_that_cannot_initialise_reports_unavailable():
    r = run_python(
        """
        import torch
        print(torch.mytorch.is_available(), torch.mytorch.device_count())
    """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1", "MYTORCH_RUNTIME": "cuda"},
    )
    assert r.returncode == 0, r.stderr
    import torch

    expected = "True" if torch.mytorch.runtime() == "cuda" else "False"
    assert r.stdout.split()[0] == expected


def test_broken_plugin_does_not_break_import_torch(tmp_path):
    fake = tmp_path / "mytorch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('simulated broken installation')\n")
    r = run_python(
        """
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import torch
        print("imported", hasattr(torch, "mytorch"), any("could not be loaded" in str(x.message) for x in w))
    """,
        env={
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "1",
            "PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        },
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["imported", "False", "True"]
