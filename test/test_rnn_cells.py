"""The fused LSTM and GRU cells (Note [Fused RNN cells]: _thnn_fused_lstm_cell, _thnn_fused_gru_cell and their
backwards, one kernel each way) and the whole-sequence layers built on them (Note [Whole-sequence RNN layers]),
against the CPU's composite cells and float64, on every runtime (the CUDA kernels on the emulated build)."""

import pytest
import torch
import torch.nn as nn

from mytorch.testing._compare import assert_aligned

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

DEV = "mytorch"
DTYPES = [torch.float32, torch.bfloat16, torch.float64]


def cell_inputs(kind, batch, hidden, inp, bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    chunks = 4 if kind == "lstm" else 3
    ts = {
        "x": torch.randn(batch, inp, generator=g),
        "h": torch.randn(batch, hidden, generator=g),
        "w_ih": torch.randn(chunks * hidden, inp, generator=g) * 0.5,
        "w_hh": torch.randn(chunks * hidden, hidden, generator=g) * 0.5,
    }
    if kind == "lstm":
        ts["c"] = torch.randn(batch, hidden, generator=g)
    if bias:
        ts["b_ih"] = torch.randn(chunks * hidden, generator=g)
        ts["b_hh"] = torch.randn(chunks * hidden, generator=g)
    return ts


def run_cell(kind, ts, use_cy=True):
    """torch.lstm_cell / torch.gru_cell (torch's RNN code: the fused cell on the device, the composite on the CPU),
    and a loss over its outputs with fixed weights."""
    b = (ts.get("b_ih"), ts.get("b_hh"))
    if kind == "lstm":
        hy, cy = torch.lstm_cell(ts["x"], (ts["h"], ts["c"]), ts["w_ih"], ts["w_hh"], *b)
        outs = [hy, cy]
    else:
        outs = [torch.gru_cell(ts["x"], ts["h"], ts["w_ih"], ts["w_hh"], *b)]
    weights = [torch.linspace(-1, 1, o.numel(), dtype=o.dtype, device=o.device).view_as(o) for o in outs]
    loss = (outs[0] * weights[0]).sum()
    if len(outs) > 1 and use_cy:
        loss = loss + (outs[1] * weights[1]).sum()
    return outs, loss


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "kind,bias,use_cy",
    [("lstm", True, True), ("lstm", False, True), ("lstm", True, False), ("gru", True, True), ("gru", False, True)],
)
def test_fused_cells_match_the_cpu(kind, dtype, bias, use_cy):
    """Forward and every gradient (gates, states, weights, biases), with and without biases, and the LSTM with no
    gradient flowing into cy (the backward's null grad_cy)."""
    ts = cell_inputs(kind, 5, 24, 10, bias)
    results = {}
    for name, dev, dt in (("cpu", "cpu", dtype), ("dev", DEV, dtype), ("gold", "cpu", torch.float64)):
        leaves = {k: v.detach().clone().to(dt).to(dev).requires_grad_() for k, v in ts.items()}
        outs, loss = run_cell(kind, leaves, use_cy)
        loss.backward()
        results[name] = [o.detach() for o in outs] + [leaves[k].grad for k in sorted(leaves)]
    names = [f"out{i}" for i in range(len(results["cpu"]) - len(ts))] + sorted(ts)
    for n, cpu, dev, gold in zip(names, results["cpu"], results["dev"], results["gold"]):
        assert_aligned(dev, cpu, gold, f"{kind} {n}")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cells_run_as_one_kernel_each_way(kind):
    """The cell is the fused op, not a composition (no sigmoid or tanh kernel runs), forward and backward."""
    ts = {k: v.to(DEV).requires_grad_() for k, v in cell_inputs(kind, 3, 8, 4, True).items()}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run_cell(kind, ts)[1].backward()
    names = {e.name for e in prof.events()}
    assert f"aten::_thnn_fused_{kind}_cell" in names
    assert not names & {"aten::sigmoid", "aten::tanh", "aten::sigmoid_backward", "aten::tanh_backward"}


def test_fused_cells_refuse_bad_arguments():
    """Shapes, dtypes and biases that do not fit raise with what was expected and what was given."""
    g = torch.randn(3, 16, device=DEV)
    c = torch.randn(3, 4, device=DEV)
    with pytest.raises(RuntimeError, match="one 2-D shape"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g[:, :12], c)
    with pytest.raises(RuntimeError, match=r"gates of shape \[batch, 4 \* hidden\]"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(3, 5, device=DEV))
    with pytest.raises(RuntimeError, match="dtype"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g.double(), c)
    with pytest.raises(RuntimeError, match=r"bias of shape \[16\]"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, c, torch.randn(12, device=DEV))
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ops.aten._thnn_fused_gru_cell(g[:, :12].long(), g[:, :12].long(), c.long())
    with pytest.raises(RuntimeError, match=r"workspace of shape \[batch, 5 \* hidden\]"):
        torch.ops.aten._thnn_fused_gru_cell_backward(c, g, True)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layers_match_the_cpu(kind, dtype):
    """nn.LSTM / nn.GRU of two bidirectional layers over the whole-sequence path: output, final states and every
    gradient against the CPU and float64."""
    torch.manual_seed(0)
    ref = getattr(nn, kind)(6, 8, num_layers=2, bidirectional=True)
    x = torch.randn(9, 4, 6)
    results = []
    for dev, dt in (("cpu", dtype), (DEV, dtype), ("cpu", torch.float64)):
        m = getattr(nn, kind)(6, 8, num_layers=2, bidirectional=True)
        m.load_state_dict(ref.state_dict())
        m = m.to(dev, dt)
        xi = x.detach().clone().to(dt).to(dev).requires_grad_()
        out, state = m(xi)
        states = list(state) if isinstance(state, tuple) else [state]
        loss = sum((t * torch.linspace(-1, 1, t.shape[-1], dtype=dt, device=dev)).sum() for t in [out] + states)
        loss.backward()
        results.append([out.detach(), *(s.detach() for s in states), xi.grad] + [p.grad for p in m.parameters()])
    for i, (cpu, dev, gold) in enumerate(zip(*results)):
        assert_aligned(dev, cpu, gold, f"{kind} result {i}")
