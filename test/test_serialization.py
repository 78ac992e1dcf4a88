"""torch.save / torch.load of mytorch tensors, modules and optimizers; map_location; across processes and
runtimes (the file records only "mytorch:N"); corrupted files raise."""

import io

import pytest
import torch

from conftest import run_python


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kw), buf.getvalue()


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex64, torch.uint8]
)
def test_tensor_roundtrip_bit_exact(dtype):
    x = (torch.randn(5, 6) * 10).to(dtype).to("mytorch")
    back, _ = roundtrip({"x": x, "view": x[1:, ::2]})
    assert back["x"].device == torch.device("mytorch", 0)
    assert torch.equal(back["x"].cpu().view(torch.uint8), x.cpu().view(torch.uint8))
    assert back["view"].untyped_storage().data_ptr() == back["x"].untyped_storage().data_ptr()  # sharing kept
    assert torch.equal(back["view"].cpu(), x[1:, ::2].cpu())


def test_map_location():
    x = torch.randn(3).to("mytorch")
    assert roundtrip(x, map_location="cpu")[0].device.type == "cpu"
    assert roundtrip(x.cpu(), map_location="mytorch")[0].device.type == "mytorch"
    if torch.mytorch.device_count() > 1:
        assert roundtrip(x, map_location="mytorch:1")[0].device == torch.device("mytorch", 1)
        assert roundtrip(x, map_location={"mytorch:0": "mytorch:1"})[0].device.index == 1


def test_module_and_optimizer_state():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("mytorch")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        m(torch.randn(5, 4, device="mytorch")).sum().backward()
        opt.step()
    state, _ = roundtrip({"model": m.state_dict(), "opt": opt.state_dict()})
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("mytorch")
    m2.load_state_dict(state["model"])
    opt2 = torch.optim.AdamW(m2.parameters(), lr=1e-2)
    opt2.load_state_dict(state["opt"])
    for p, q in zip(m.parameters(), m2.parameters()):
        assert torch.equal(p.cpu(), q.cpu())
        assert torch.equal(opt.state[p]["exp_avg_sq"].cpu(), opt2.state[q]["exp_avg_sq"].cpu())
        assert opt2.state[q]["exp_avg"].device.type == "mytorch"


def test_file_from_another_process_and_runtime_configuration(tmp_path):
    path = tmp_path / "saved.pt"
    r = run_python(
        f"""
        import torch, mytorch
        torch.manual_seed(5)
        torch.save({{"w": torch.randn(4, 4).to("mytorch")}}, {str(path)!r})
        print(torch.mytorch.runtime())
    """,
        env={"MYTORCH_RUNTIME": "sim", "MYTORCH_SIM_DEVICES": "1"},
    )
    assert r.returncode == 0, r.stderr
    torch.manual_seed(5)
    expected = torch.randn(4, 4)
    loaded = torch.load(path)
    assert loaded["w"].device.type == "mytorch" and torch.equal(loaded["w"].cpu(), expected)


def test_truncated_and_corrupted_files_raise_and_process_stays_healthy():
    _, raw = roundtrip({"x": torch.randn(100).to("mytorch")})
    with pytest.raises(RuntimeError, match="zip archive|central directory"):
        torch.load(io.BytesIO(raw[: len(raw) // 2]))
    bad = bytearray(raw)
    bad[100:160] = b"\x00" * 60
    with pytest.raises(Exception):  # noqa: B017 - any error will do: what matters is no crash and no garbage
        torch.load(io.BytesIO(bytes(bad)))
    assert torch.ones(2, device="mytorch").sum().item() == 2
