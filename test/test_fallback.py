"""The CPU fallback: modes, counters, warn-once, errors naming the op, and results that match the CPU."""

import warnings

import pytest
import torch

from conftest import run_python

# Ops that fall back to the CPU, as (the aten overload the fallback counts, a call on a float tensor). histogram and
# histogramdd first: PyTorch has no device kernel for them at all, so they stay; eig (torch.cuda computes it on the
# host too) may gain one, and then leave the list's live part without any test edit (complex division,
# multilabel_margin_loss and the LDL factorization were here until they gained theirs).
_CANDIDATES = (
    ("aten::histogram.bin_ct", lambda d: torch.histogram(d, bins=4)),
    ("aten::_histogramdd_bin_edges", lambda d: torch.histogramdd(d.view(-1, 1), bins=[3])),
    ("aten::linalg_eig", lambda d: torch.linalg.eigvals(torch.diag(d))),
)


def _falls_back(key, fn):
    torch.mytorch.reset_fallback_stats()
    mode = torch.mytorch.get_fallback_mode()
    torch.mytorch.set_fallback_mode("silent")
    try:
        fn(torch.ones(3, device="mytorch"))
    finally:
        torch.mytorch.set_fallback_mode(mode)
    found = key in torch.mytorch.fallback_stats()
    torch.mytorch.reset_fallback_stats()
    return found


def fallback_ops(k):
    """k ops that still run through the CPU fallback: (counted name, call)."""
    ops = [(key, fn) for key, fn in _CANDIDATES if _falls_back(key, fn)]
    assert len(ops) >= k, f"need {k} ops that still fall back, found {[key for key, _ in ops]}: add to _CANDIDATES"
    return ops[:k]


def test_counters_and_reset():
    ((name, op),) = fallback_ops(1)
    torch.mytorch.reset_fallback_stats()
    x = torch.randn(8, 8)
    d = x.to("mytorch")
    y = op(d)  # no native kernel: runs the CPU's, so results are equal
    torch.testing.assert_close(tuple(t.cpu() for t in y), tuple(op(x)), rtol=0, atol=0, equal_nan=True)
    stats = torch.mytorch.fallback_stats()
    assert stats[name]["calls"] == 1
    op(d)
    assert torch.mytorch.fallback_stats()[name]["calls"] == 2
    torch.mytorch.reset_fallback_stats()
    assert torch.mytorch.fallback_stats() == {}


def test_native_ops_are_not_counted():
    torch.mytorch.reset_fallback_stats()
    d = torch.empty(10, device="mytorch")
    d.fill_(1.0)
    d.zero_()
    e = d.to(torch.float64).view(2, 5).t().contiguous()
    e.cpu()
    torch.randn(5, device="mytorch")
    assert torch.mytorch.fallback_stats() == {}


def test_bytes_moved_are_counted():
    ((name, op),) = fallback_ops(1)
    torch.mytorch.reset_fallback_stats()
    d = torch.randn(1000, device="mytorch")
    op(d)
    s = torch.mytorch.fallback_stats()[name]
    assert s["calls"] == 1
    if torch.mytorch.runtime() == "sim":
        assert s["bytes_to_cpu"] == 0  # zero-copy view of the device memory
    else:
        assert s["bytes_to_cpu"] >= 4000
    assert s["bytes_to_cpu"] + s["bytes_to_device"] >= 0


def test_error_mode_names_the_op():
    torch.mytorch.set_fallback_mode("error")
    assert torch.mytorch.get_fallback_mode() == "error"
    ((name, op),) = fallback_ops(1)
    d = torch.ones(3, device="mytorch")
    with pytest.raises(NotImplementedError, match=rf"{name}.*MYTORCH_FALLBACK=error"):
        op(d)
    assert torch.cos(d).device.type == "mytorch"  # a native kernel is unaffected
    d.fill_(2.0)  # native ops still work
    assert d.cpu().tolist() == [2.0, 2.0, 2.0]


def test_error_mode_from_environment():
    ((name, _),) = fallback_ops(1)
    assert name == "aten::histogram.bin_ct"  # the call below; PyTorch has no device kernel for it
    r = run_python(
        f"""
        import torch, mytorch
        try:
            t = torch.ones(2, device="mytorch")
            torch.histogram(t, bins=4)
            print("no error")
        except NotImplementedError as e:
            print("raised", "{name}" in str(e))
    """,
        env={"MYTORCH_FALLBACK": "error"},
    )
    assert "raised True" in r.stdout, r.stdout + r.stderr


def test_warn_once_per_op():
    torch.mytorch.set_fallback_mode("warn")
    torch.mytorch.reset_fallback_stats()
    (a, op_a), (b, op_b) = fallback_ops(2)
    torch.mytorch.set_fallback_mode("warn")
    torch.mytorch.reset_fallback_stats()
    d = torch.ones(3, device="mytorch")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        op_a(d)
        op_a(d)
        op_b(d)
    msgs = [str(x.message) for x in w if "mytorch" in str(x.message)]
    assert sum(a in m for m in msgs) == 1
    assert sum(b in m for m in msgs) == 1


def test_silent_mode_does_not_warn():
    ((name, op),) = fallback_ops(1)
    torch.mytorch.set_fallback_mode("silent")
    torch.mytorch.reset_fallback_stats()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        op(torch.ones(3, device="mytorch"))
    assert not [x for x in w if "mytorch" in str(x.message)]
    assert torch.mytorch.fallback_stats()[name]["calls"] == 1


def test_bad_mode():
    with pytest.raises(ValueError, match="warn, silent, error"):
        torch.mytorch.set_fallback_mode("loud")


def test_no_cpu_kernel_either():
    d = torch.ones(4, 4, device="mytorch")
    with pytest.raises(NotImplementedError, match=r"aten::_cslt_compress.*CPU fallback has no CPU kernel"):
        torch.ops.aten._cslt_compress(d)  # cuSPARSELt: CUDA only


def test_fallback_semantics_match_cpu():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 7, generator=g)
    idx = torch.tensor([0, 2, 5])
    d = x.to("mytorch")
    checks = [
        (lambda t: t.sum(1), None),
        (lambda t: t.max(0), None),
        (lambda t: t[idx.to(t.device)], None),
        (lambda t: torch.cat([t, t], 0), None),
        (lambda t: t.sort(1).values, None),
        (lambda t: t.unbind(1)[3], None),
        (lambda t: t.split(3, 1)[1], None),
        (lambda t: t.diagonal(), None),
        (lambda t: torch.where(t > 0, t, -t), None),
        (lambda t: t.masked_fill(t < 0, 0), None),
    ]
    for f, _ in checks:
        ref, out = f(x), f(d)
        # Native kernels may sum in another order than the CPU: float32 closeness, exact integers.
        if isinstance(ref, tuple):
            for r, o in zip(ref, out):
                torch.testing.assert_close(o.cpu(), r)
        else:
            assert out.device.type == "mytorch"
            torch.testing.assert_close(out.cpu(), ref)


def test_views_from_fallback_alias_device_memory():
    d = torch.zeros(4, 6, device="mytorch")
    parts = d.split(2, 1)  # views returned by a fallback op
    parts[1].fill_(1.0)
    assert d.cpu()[:, 2:4].eq(1).all() and d.cpu()[:, :2].eq(0).all()


def test_out_arguments_are_resized():
    out = torch.empty(0, device="mytorch")
    torch.add(torch.ones(3, device="mytorch"), 1, out=out)
    assert out.shape == (3,) and out.cpu().tolist() == [2.0, 2.0, 2.0]
    out2 = torch.empty(10, device="mytorch").t()
    torch.mul(torch.ones(2, 5, device="mytorch"), 3, out=out2.view(2, 5))
    assert out2.view(2, 5).cpu().eq(3).all()


def test_foreach_lists():
    ts = [torch.full((3,), float(i), device="mytorch") for i in range(4)]
    torch._foreach_add_(ts, 1.0)
    assert [t.cpu().tolist() for t in ts] == [[float(i + 1)] * 3 for i in range(4)]
    res = torch._foreach_mul(ts, 2.0)
    assert all(r.device.type == "mytorch" for r in res)
    assert [r.cpu()[0].item() for r in res] == [2.0, 4.0, 6.0, 8.0]


def test_mixing_devices_in_one_op(two_devices):
    a = torch.ones(3, device="mytorch:0")
    b = torch.ones(3, device="mytorch:1")
    with pytest.raises(RuntimeError, match="device"):
        a + b
    with pytest.raises(RuntimeError, match="device"):
        a + torch.ones(3)


@pytest.mark.every_runtime
def test_the_sims_host_route_is_counted_apart_from_the_fallback():
    """Note [Sim host route]: a GEMM on sim runs the CPU BLAS on host views of device memory: mytorch's registration,
    counted per family as the host route and not as a fallback; on cuda and emu the route is never taken (cuBLASLt)."""
    torch.mytorch.reset_host_route_stats()
    torch.mytorch.reset_fallback_stats()
    a = torch.randn(8, 8)
    got = (a.to("mytorch") @ a.to("mytorch")).cpu()
    torch.testing.assert_close(got, a @ a)
    stats = torch.mytorch.host_route_stats()
    if torch.mytorch.runtime() == "sim":
        assert stats.get("gemm", 0) >= 1, stats
    else:
        assert stats == {}, stats
    assert not any("mm" in op for op in torch.mytorch.fallback_stats()), torch.mytorch.fallback_stats()
    torch.mytorch.reset_host_route_stats()
    assert torch.mytorch.host_route_stats() == {}
