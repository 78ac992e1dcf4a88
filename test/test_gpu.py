"""GPU-only checks (marked `gpu`; they skip unless the cuda runtime is live): the CUDA kernels against their
sim twins and against stock torch.cuda."""

import pytest
import torch

from conftest import run_python
from mytorch.testing._compare import assert_aligned, assert_sum_within_bound

pytestmark = pytest.mark.gpu

KERNEL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


@pytest.mark.hardware
def test_runtime_is_cuda_on_a_gpu():
    assert torch.mytorch.runtime() == "cuda"
    p = torch.mytorch.get_device_properties()
    assert p.major >= 7 and p.multi_processor_count > 1


def test_random_stream_matches_sim_twin():
    torch.mytorch.manual_seed(2024)
    u = torch.rand(4099, device="mytorch").cpu()
    n = torch.randn(4099, device="mytorch", dtype=torch.float64).cpu()
    e = torch.empty(4099, device="mytorch", dtype=torch.float64).exponential_(3.0).cpu()
    r = run_python(
        """
        import torch, mytorch
        torch.mytorch.manual_seed(2024)
        u = torch.rand(4099, device="mytorch").cpu()
        n = torch.randn(4099, device="mytorch", dtype=torch.float64).cpu()
        e = torch.empty(4099, device="mytorch", dtype=torch.float64).exponential_(3.0).cpu()
        torch.save((u, n, e), "/tmp/mytorch_sim_random.pt")
    """,
        env={"MYTORCH_RUNTIME": "sim"},
    )
    assert r.returncode == 0, r.stderr
    su, sn, se = torch.load("/tmp/mytorch_sim_random.pt")
    assert torch.equal(u, su)  # integer arithmetic: bit-identical
    assert_aligned(n, sn, None, "normal")  # libm vs CUDA math: last-bit differences
    assert_aligned(e, se, None, "exponential")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA build of torch as the reference")
@pytest.mark.parametrize("dst", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("src", KERNEL_DTYPES, ids=str)
def test_cast_kernel_matches_torch_cuda(src, dst):
    x = (torch.randn(37, 53, dtype=torch.float64) * 100).to(src)
    ref = x.cuda().t().to(dst).cpu()
    out = x.to("mytorch").t().to(dst).cpu()
    assert torch.equal(out.contiguous().view(-1).view(torch.uint8), ref.contiguous().view(-1).view(torch.uint8))


def test_large_copies_and_fill():
    x = torch.randn(64, 1024, 1024)
    d = x.to("mytorch")
    assert torch.equal(d.cpu(), x)
    d[:, ::2].fill_(3.0)
    assert d[:, ::2].cpu().eq(3).all() and torch.equal(d[:, 1::2].cpu(), x[:, 1::2])


def test_non_blocking_pinned_upload_is_stream_ordered():
    x = torch.randn(32, 1024, 1024).pin_memory()
    s = torch.mytorch.Stream()
    with torch.mytorch.stream(s):
        d = x.to("mytorch", non_blocking=True)
        y = d * 2
    s.synchronize()
    assert torch.equal(y.cpu(), x * 2)


# The same inputs through every kernel family on both runtimes: the CUDA kernels against their sim twins.
TWIN_BATTERY = """
import torch, mytorch
torch.manual_seed(0)
x = torch.randn(257, 129)
i = torch.randint(0, 257, (300,))
f = torch.randn(1000).half()
def run(dev):
    a = x.to(dev); ii = i.to(dev)
    return {
        "add": (a + 2 * a.t().contiguous().t()).cpu(), "exp": a.exp().cpu(), "where": torch.where(a > 0, a, -a).cpu(),
        "clamp": a.clamp(-0.5, 0.5).cpu(), "floordiv": (a // 0.3).cpu(), "int_rem": ((a * 10).int() % 7).cpu(),
        "half_mul": (f.to(dev) * 3).cpu(), "sum": a.sum(1).cpu(), "var": a.var(0).cpu(), "amax": a.amax(1).cpu(),
        "argmax": a.argmax(0).cpu(), "cumsum": a.cumsum(1).cpu(), "index_select": a.index_select(0, ii).cpu(),
        "scatter_add": torch.zeros(257, device=dev).scatter_add_(0, ii, torch.ones(300, device=dev)).cpu(),
        "sort": a.sort(1).values.cpu(), "topk": a.topk(5, 1).values.cpu(), "nonzero": (a > 1).nonzero().cpu(),
        "arange": torch.arange(0, 10, 0.25, device=dev).cpu(), "flip": a.flip(0).cpu(),
        "isin": torch.isin(ii, ii[::7] * 2).cpu(),
        "histc": torch.histc(a, bins=13, min=-2, max=2).cpu(),
        "bincount": torch.bincount(ii).cpu(), "bincount_w": torch.bincount(ii, weights=a[0, :1].expand(300).double()).cpu(),
    } | ({} if dev == "cpu" else {  # the CPU has no integer histc (CUDA and mytorch have)
        "histc_int": torch.histc(ii.int(), bins=9, min=0, max=256).cpu()})
"""


def test_kernel_families_match_sim_twins(tmp_path):
    ns = {}
    exec(TWIN_BATTERY, ns)
    mine = ns["run"]("mytorch")
    path = tmp_path / "sim.pt"
    r = run_python(TWIN_BATTERY + f"\ntorch.save(run('mytorch'), {str(path)!r})\n", env={"MYTORCH_RUNTIME": "sim"})
    assert r.returncode == 0, r.stderr
    sim = torch.load(path)
    # Reductions differ from the sequential twin by their order: bound them by their condition, against float64.
    assert_sum_within_bound(mine.pop("sum"), ns["x"], 1)
    sim.pop("sum")
    cpu = ns["run"]("cpu")  # the inputs are drawn once, at exec: every run sees the same
    for k, v in sim.items():
        assert_aligned(mine[k], v, None, k, extra_refs=(cpu[k],) if k in cpu else ())


def test_a_device_index_past_the_last_raises():
    """On the GPU machine (one H100, torch 2.11) a script using mytorch:1 ended with a segmentation fault and no
    message; on sim and emu it raises. Every runtime must raise an error naming the valid range."""
    r = run_python("""
        import torch, mytorch
        n = torch.mytorch.device_count()
        for make in (lambda: torch.randn(3, device=f"mytorch:{n}"), lambda: torch.arange(4).to(f"mytorch:{n}"),
                     lambda: torch.full((5,), 7, device=f"mytorch:{n}")):
            try:
                make()
                raise SystemExit("no error")
            except RuntimeError as e:
                assert "device index" in str(e) or "invalid device" in str(e).lower(), e
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stderr[-2000:])
