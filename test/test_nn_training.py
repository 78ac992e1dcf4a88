"""Training without a single CPU fallback: an MLP, the GPT-style example model and a small ResNet-style CNN
each train for 20 steps on mytorch (SGD with momentum, AdamW foreach, AdamW fused) with MYTORCH_FALLBACK=error
and follow the CPU run's losses (fp32: 1e-4 relative; bf16 autocast: bf16 tolerance)."""

import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from train_gpt import GPT  # noqa: E402

STEPS = 20


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(32, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.GELU(),
            nn.Dropout(0.0),
            nn.Linear(64, 64),
            nn.SiLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class CNN(nn.Module):
    """ResNet-style: stem conv + BN + max-pool, two residual blocks, a strided conv, GroupNorm, upsampling,
    average pools and a linear head."""

    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.res1, self.res2 = Residual(8), Residual(8)
        self.down, self.gn = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GroupNorm(4, 16)
        self.head = nn.Linear(16, 10)

    def forward(self, x, y):
        x = F.max_pool2d(F.relu(self.bn(self.stem(x))), 2)
        x = self.res2(self.res1(x))
        x = F.leaky_relu(self.gn(self.down(x)), 0.1)
        x = F.interpolate(x, scale_factor=2, mode="nearest") + F.avg_pool2d(
            F.interpolate(x, scale_factor=4, mode="bilinear"), 2
        )
        return F.cross_entropy(self.head(F.adaptive_avg_pool2d(x, 1).flatten(1)), y)


def _data(kind, seed):
    # Two fixed batches in turn: the models can memorise them, so the loss must fall.
    g = torch.Generator().manual_seed(seed)
    if kind == "mlp":
        batches = [(torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(2)]
    elif kind == "cnn":
        batches = [(torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 10, (4,), generator=g)) for _ in range(2)]
    else:
        batches = [
            (torch.randint(0, 256, (4, 32), generator=g), torch.randint(0, 256, (4, 32), generator=g)) for _ in range(2)
        ]
    return [batches[i % 2] for i in range(STEPS)]


def _model(kind):
    torch.manual_seed(0)
    if kind == "mlp":
        return MLP()
    if kind == "cnn":
        return CNN()
    return GPT(block_size=32, n_layer=2, n_head=2, n_embd=32)


OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.1, foreach=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.1, fused=True),
}


def _train(model, device, opt_name, data, autocast=None):
    model = copy.deepcopy(model).to(device)
    opt = OPTIMIZERS[opt_name](model.parameters())
    losses = []
    for x, y in data:
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast is not None):
            loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("kind", ["mlp", "gpt", "cnn"])
def test_trains_natively_and_matches_cpu(kind, opt_name):
    model, data = _model(kind), _data(kind, 1)
    torch.mytorch.reset_fallback_stats()
    torch.mytorch.set_fallback_mode("error")
    try:
        dev = _train(model, "mytorch", opt_name, data)
    finally:
        torch.mytorch.set_fallback_mode("silent")
    assert torch.mytorch.fallback_stats() == {}
    cpu = _train(model, "cpu", opt_name, data)
    rel = max(abs(a - b) / abs(b) for a, b in zip(dev, cpu))
    assert rel <= 1e-4, f"losses diverge from the CPU run: max relative difference {rel:.2e}"
    assert dev[-1] < dev[0]  # it learns


@pytest.mark.parametrize("kind", ["mlp", "gpt"])
def test_bf16_autocast_training_matches_cpu(kind):
    model, data = _model(kind), _data(kind, 2)[:8]
    torch.mytorch.set_fallback_mode("error")
    try:
        dev = _train(model, "mytorch", "adamw_fused", data, autocast=torch.bfloat16)
    finally:
        torch.mytorch.set_fallback_mode("silent")
    cpu = _train(model, "cpu", "adamw_fused", data, autocast=torch.bfloat16)
    rel = max(abs(a - b) / abs(b) for a, b in zip(dev, cpu))
    assert rel <= 2e-2, f"bf16 losses diverge from the CPU's bf16 run: {rel:.2e}"  # a few bf16 ULPs of the loss
