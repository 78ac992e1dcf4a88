"""Graph capture and replay on mytorch (issue 53): torch.accelerator.Graph / torch.mytorch.MytorchGraph, graph,
make_graphed_callables, graph pools, what a capture refuses, and random numbers per replay. A replay runs the same
kernels as eager code, so results are compared bit for bit with an eager twin."""

import copy
import gc

import pytest
import torch

import mytorch  # noqa: F401

ON_SIM = torch.mytorch.runtime() == "sim"
# torch.accelerator.Graph came with torch 2.12; the lent GPU machines' torch 2.11 builds mytorch without graphs
pytestmark = pytest.mark.skipif(
    not hasattr(torch.accelerator, "Graph"), reason="torch < 2.12: no torch.accelerator.Graph"
)
# every runtime: the sim's recording in the main suite; CUDA's stream capture on the emulated runtime (under ASan in
# the test command's emulated battery) and on a GPU
EVERY = pytest.mark.every_runtime
SIM_ONLY = pytest.mark.skipif(not ON_SIM, reason="the sim's host routes, and a model too slow to emulate")


def side_stream_warmup(fn, n=3):
    s = torch.mytorch.Stream()
    s.wait_stream(torch.mytorch.current_stream())
    with torch.mytorch.stream(s):
        for _ in range(n):
            fn()
    torch.mytorch.current_stream().wait_stream(s)


@EVERY
def test_accelerator_graph_records_without_running_and_replays():
    x = torch.zeros(1000, device="mytorch")
    g = torch.accelerator.Graph()
    with torch.mytorch.stream(torch.mytorch.Stream()), g:
        x.add_(1)
        y = x * 2
    assert torch.equal(x.cpu(), torch.zeros(1000))  # captured, not run (a record that ran would read 1)
    g.replay()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((1000,), 2.0))
    assert torch.equal(y.cpu(), torch.full((1000,), 4.0))


@EVERY
def test_capture_on_the_default_stream_is_refused():
    g = torch.mytorch.MytorchGraph()
    with pytest.raises(RuntimeError, match="side stream"):
        g.capture_begin()


@EVERY
def test_training_step_with_fused_adamw_equals_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to("mytorch")
    twin = copy.deepcopy(model)
    x, y = torch.randn(8, 16, device="mytorch"), torch.randn(8, 4, device="mytorch")

    def stepper(m):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, capturable=True, fused=True)

        def step():
            opt.zero_grad(set_to_none=False)
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    step, eager = stepper(model), stepper(twin)
    side_stream_warmup(step)
    for _ in range(3):
        eager()
    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        loss = step()
    losses = []
    for _ in range(4):
        g.replay()
        losses.append(loss.item())
    want = [eager().item() for _ in range(4)]
    assert losses == want
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.equal(p.cpu(), q.cpu())


@EVERY
def test_make_graphed_callables_mlp_equals_eager():
    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)).to("mytorch")
    twin = copy.deepcopy(mlp)
    sample = torch.randn(4, 8, device="mytorch", requires_grad=True)
    graphed = torch.mytorch.make_graphed_callables(mlp, (sample,))
    for seed in range(3):
        torch.manual_seed(100 + seed)
        x = torch.randn(4, 8, device="mytorch", requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        out, ref = graphed(x), twin(x2)
        assert torch.equal(out.cpu(), ref.cpu())
        (out * out).sum().backward()
        (ref * ref).sum().backward()
        assert torch.equal(x.grad.cpu(), x2.grad.cpu())
        for p, q in zip(mlp.parameters(), twin.parameters()):
            assert torch.equal(p.grad.cpu(), q.grad.cpu())
            p.grad = None
            q.grad = None


@EVERY
def test_dropout_advances_per_replay_and_matches_eager():
    z = torch.ones(64, device="mytorch")
    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        d = torch.nn.functional.dropout(z, 0.5)
        r = torch.rand(5, device="mytorch")
    torch.manual_seed(7)
    replays = []
    for _ in range(3):
        g.replay()
        replays.append((d.cpu().clone(), r.cpu().clone()))
    torch.manual_seed(7)
    eager = [(torch.nn.functional.dropout(z, 0.5).cpu(), torch.rand(5, device="mytorch").cpu()) for _ in range(3)]
    assert not torch.equal(replays[0][0], replays[1][0])  # fresh numbers per replay
    for (dg, rg), (de, re) in zip(replays, eager):
        assert torch.equal(dg, de) and torch.equal(rg, re)
    # the generator moved on exactly as the eager calls move it
    torch.manual_seed(7)
    g.replay()
    after_replay = torch.rand(3, device="mytorch").cpu()
    torch.manual_seed(7)
    torch.nn.functional.dropout(z, 0.5), torch.rand(5, device="mytorch")
    assert torch.equal(after_replay, torch.rand(3, device="mytorch").cpu())


@EVERY
def test_a_private_generator_in_a_capture():
    gen = torch.Generator(device="mytorch").manual_seed(3)
    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        r = torch.randn(6, device="mytorch", generator=gen)
    g.replay()
    first = r.cpu().clone()
    g.replay()
    second = r.cpu().clone()
    want = torch.Generator(device="mytorch").manual_seed(3)
    assert torch.equal(first, torch.randn(6, device="mytorch", generator=want).cpu())
    assert torch.equal(second, torch.randn(6, device="mytorch", generator=want).cpu())


# (call, what the error says on sim, on a CUDA runtime)
FORBIDDEN = {
    "item (a host read)": (lambda x: x.sum().item(), "to the host", "capturing"),
    "cpu()": (lambda x: x.cpu(), "to the host", "capturing"),
    "stream synchronize": (lambda x: torch.mytorch.current_stream().synchronize(), "synchroniz", "capturing"),
    "device synchronize": (lambda x: torch.mytorch.synchronize(), "synchroniz", "capturing"),
    "pageable upload": (lambda x: torch.ones(4).to("mytorch"), "pageable", "capturing"),
    "CPU fallback": (lambda x: torch.histogram(x, bins=4), "fallback", "fallback"),
    "host route": (lambda x: torch.linalg.inv(x.view(4, 4) + 4 * torch.eye(4, device="mytorch")), "host route", None),
}


@EVERY
@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_forbidden_calls_raise_and_invalidate_the_capture(name):
    fn, on_sim, on_cuda = FORBIDDEN[name]
    message = on_sim if ON_SIM else on_cuda
    if message is None:
        pytest.skip("the sim's host routes only")
    x = torch.randn(16, device="mytorch")
    if name == "CPU fallback":  # its warning outside the capture; and it must be an op that still falls back
        calls = mytorch._C._fallback_totals()[0]
        FORBIDDEN[name][0](x)
        assert mytorch._C._fallback_totals()[0] > calls, "the op no longer falls back: choose another for this case"
    g = torch.mytorch.MytorchGraph()
    with pytest.raises(RuntimeError, match=message):
        with torch.mytorch.graph(g):
            fn(x)
    assert not torch.mytorch.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="before a capture ended"):
        g.replay()  # the invalidated capture left no graph
    # the device and the allocator work on
    assert torch.equal((x + 1).cpu(), x.cpu() + 1)


@EVERY
def test_pinned_upload_is_recorded():
    src = torch.arange(8.0).pin_memory()
    dst = torch.zeros(8, device="mytorch")
    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        dst.copy_(src, non_blocking=True)
    assert torch.equal(dst.cpu(), torch.zeros(8))
    src.add_(10)
    g.replay()
    assert torch.equal(dst.cpu(), torch.arange(8.0) + 10)


@EVERY
def test_pools_shared_kept_alive_and_released():
    torch.mytorch.empty_cache()
    base = torch.mytorch.memory_reserved()
    pool = torch.mytorch.graph_pool_handle()
    x = torch.ones(1 << 18, device="mytorch")
    g1, g2 = torch.mytorch.MytorchGraph(), torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g1, pool=pool):
        a = x * 2
    with torch.mytorch.graph(g2, pool=pool):
        b = x * 3
    assert g1.pool() == g2.pool() == pool
    ptr_a = a.data_ptr()
    del a  # the graph still writes there: the memory is not handed to other tensors
    c = torch.empty(1 << 18, device="mytorch")
    assert c.data_ptr() != ptr_a
    g1.replay()
    g2.replay()
    assert torch.equal(b.cpu(), torch.full((1 << 18,), 3.0))
    held = torch.mytorch.memory_reserved()
    assert held > base
    del b, c
    g1.reset()
    g2.reset()
    del g1, g2
    gc.collect()
    torch.mytorch.empty_cache()
    assert torch.mytorch.memory_reserved() <= base + (2 << 20)  # x's segment stays


@EVERY
def test_debug_dump_lists_the_recorded_launches(tmp_path):
    x = torch.ones(4, device="mytorch")
    g = torch.mytorch.MytorchGraph()
    g.enable_debug_mode()
    with torch.mytorch.graph(g):
        x.mul_(3).add_(1)
    path = tmp_path / "graph.txt"
    g.debug_dump(str(path))
    lines = path.read_text().splitlines()
    if ON_SIM:
        assert lines[0].startswith("# mytorch sim graph: 2 nodes")
        assert [ln.split()[1] for ln in lines[1:]] == ["elementwise", "elementwise"]
    else:  # CUDA's DOT file: two kernel nodes in order
        assert lines[0].startswith("digraph") and sum("->" in ln for ln in lines) == 1


@EVERY
def test_index_error_in_a_replay_raises():
    w = torch.randn(10, 4, device="mytorch")
    idx = torch.tensor([1, 2], device="mytorch")
    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        out = torch.nn.functional.embedding(idx, w)
    g.replay()
    assert torch.equal(out.cpu(), w.cpu()[[1, 2]])
    idx.fill_(12)
    with pytest.raises(IndexError, match="index 12 is out of bounds"):  # checked after the replay, as eager
        g.replay()
        torch.mytorch.synchronize()  # a GPU reports it at the next synchronisation


@SIM_ONLY
def test_llama_decode_step_with_static_cache_equals_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(cfg).eval().to("mytorch")

    def decode(graphed: bool, steps: int = 12) -> list:
        cache = transformers.StaticCache(config=cfg, max_batch_size=1, max_cache_len=32)
        tok = torch.tensor([[5]], device="mytorch")
        pos = torch.tensor([0], device="mytorch")

        def step():
            return model(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True).logits

        tokens = []
        with torch.no_grad():
            if graphed:
                side_stream_warmup(step, 2)
                cache.reset()
                g = torch.mytorch.MytorchGraph()
                with torch.mytorch.graph(g):
                    logits = step()
            for _ in range(steps):
                if graphed:
                    g.replay()
                else:
                    logits = step()
                nxt = logits[0, -1].argmax()
                tokens.append(int(nxt))
                tok.fill_(nxt)
                pos.add_(1)
        return tokens

    assert decode(True) == decode(False)


@EVERY
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("draw", ["rand", "randn", "bernoulli", "randint"])
def test_a_later_offset_draws_the_matching_slice(draw, dtype):
    """Note [Philox layout]: element i of a call at offset o is element o + i of one stream, so a call at offset
    o + d equals the first call's elements from d on (what DTensor's RNG tracker relies on)."""
    if draw == "randint":
        dtype = torch.int64 if dtype == torch.float64 else torch.int32
    make = {
        "rand": lambda n, g: torch.rand(n, device="mytorch", dtype=dtype, generator=g),
        "randn": lambda n, g: torch.randn(n, device="mytorch", dtype=dtype, generator=g),
        "bernoulli": lambda n, g: torch.full((n,), 0.4, device="mytorch", dtype=dtype).bernoulli_(generator=g),
        "randint": lambda n, g: torch.randint(0, 1000, (n,), device="mytorch", dtype=dtype, generator=g),
    }[draw]
    g = torch.Generator(device="mytorch").manual_seed(11)
    start = g.get_offset()
    whole = make(100, g).cpu()
    assert g.get_offset() == start + 100  # the element count, rounded up to 4
    make(1, g)
    assert g.get_offset() == start + 104
    g.manual_seed(11)
    g.set_offset(start + 40)
    assert torch.equal(make(60, g).cpu(), whole[40:])
    g.manual_seed(12)  # a negative control: another seed draws other numbers
    assert not torch.equal(make(100, g).cpu(), whole)


def test_dtensor_random_shards_are_slices_of_the_replicated_tensor(tmp_path):
    import json

    if not mytorch.distributed.is_available():
        pytest.skip("torch.distributed needed")
    from mytorch.testing import _dist_workers as W
    from mytorch.testing import _rng_workers as R

    W.launch(R.dtensor_random_worker, 2, str(tmp_path), W.free_port(), timeout_s=120)
    for r in range(2):
        for name, res in json.loads((tmp_path / f"rank{r}.json").read_text()).items():
            assert res["replicated_is_single"], (name, res)
            assert res["sharded_is_replicated"], (name, res)  # before the layout change: differed by up to 2.9
            assert res["same_state_after"], (name, res)


@EVERY
def test_attention_dropout_in_a_capture_matches_eager():
    q, k, v = (torch.randn(1, 2, 8, 16, device="mytorch") for _ in range(3))

    def attend():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.3)

    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        out = attend()
    torch.manual_seed(3)
    replays = []
    for _ in range(2):
        g.replay()
        replays.append(out.cpu().clone())
    torch.manual_seed(3)
    eager = [attend().cpu() for _ in range(2)]
    assert not torch.equal(replays[0], replays[1])
    assert all(torch.equal(r, e) for r, e in zip(replays, eager))
