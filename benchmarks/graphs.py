"""Graph capture and replay on mytorch (issue 53): a small Llama's decode step (batch 1, static cache) and a tiny
training step (MLP forward, backward, fused AdamW), each replayed from a captured graph, against the same step run
eagerly on mytorch and eagerly on torch's CPU backend, in one process (mytorch.testing.bench; ratio = reference
time / mytorch time, above 1: the replayed graph is faster).

    python benchmarks/graphs.py
    python benchmarks/graphs.py --threads 2
"""

from __future__ import annotations

import argparse
import copy

import torch

from mytorch.testing.bench import Bench, add_args, parse_args


def decode_steps(b: Bench) -> None:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
    )
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    dev = copy.deepcopy(cpu).to("mytorch")

    def stepper(model, device):
        cache = transformers.StaticCache(config=cfg, max_batch_size=1, max_cache_len=128)
        tok = torch.tensor([[7]], device=device)
        pos = torch.tensor([16], device=device)  # a short context: position 16 of a 128-slot cache

        def step():
            # transformers' StaticLayer writes at its own device counter (cumulative_length), which each step
            # advances: held at position 16, so every timed call decodes the same step
            for layer in cache.layers:
                if getattr(layer, "is_initialized", False):
                    layer.cumulative_length.fill_(16)
            return model(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True).logits

        return step

    eager, ref = stepper(dev, "mytorch"), stepper(cpu, "cpu")
    with torch.no_grad():
        graphed_step = stepper(dev, "mytorch")
        side = torch.mytorch.Stream()
        with torch.mytorch.stream(side):
            graphed_step()
        g = torch.mytorch.MytorchGraph()
        with torch.mytorch.graph(g):
            logits = graphed_step()
        eager()  # the lazy cache set-up, as the graphed step's warm-up did
        g.replay()
        same = torch.equal(logits.cpu(), eager().cpu())
        b.note(f"decode step: replayed logits equal eager's: {same}")
        if not same:
            raise AssertionError("the replayed decode step differs from the eager one")
        b.compare("decode step: replayed graph vs eager mytorch", g.replay, {"eager mytorch": eager})
        b.compare("decode step: replayed graph vs torch CPU", g.replay, {"torch CPU": ref})
        b.compare("decode step: eager mytorch vs torch CPU", eager, {"torch CPU": ref})


def train_steps(b: Bench) -> None:
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.LayerNorm(64)]
    cpu = torch.nn.Sequential(*layers)

    def stepper(model, device, capturable):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True, capturable=capturable)
        x, y = torch.randn(16, 64, device=device), torch.randn(16, 64, device=device)

        def step():
            opt.zero_grad(set_to_none=False)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    dev_g, dev_e = copy.deepcopy(cpu).to("mytorch"), copy.deepcopy(cpu).to("mytorch")
    graphed_step, eager, ref = (
        stepper(dev_g, "mytorch", True),
        stepper(dev_e, "mytorch", False),
        stepper(cpu, "cpu", False),
    )
    side = torch.mytorch.Stream()
    side.wait_stream(torch.mytorch.current_stream())
    with torch.mytorch.stream(side):
        for _ in range(3):
            graphed_step()
    torch.mytorch.current_stream().wait_stream(side)
    g = torch.mytorch.MytorchGraph()
    with torch.mytorch.graph(g):
        graphed_step()
    b.compare("training step (12 tiny layers + AdamW): graph vs eager mytorch", g.replay, {"eager mytorch": eager})
    b.compare("training step: replayed graph vs torch CPU", g.replay, {"torch CPU": ref})


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=11)
    args = parse_args(p)
    b = Bench("graphs", args, "replayed graphs against eager mytorch and torch CPU; ratio = reference / mytorch")
    decode_steps(b)
    train_steps(b)
    b.finish()


if __name__ == "__main__":
    main()
