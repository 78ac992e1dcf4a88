"""Autograd and optimizers through the fallback: an MLP trained 50 steps on mytorch ends with the same loss
as on the CPU (fp32, relative difference under 1e-5), and gradients match."""

import copy

import pytest
import torch
import torch.nn as nn

from mytorch.testing._compare import assert_aligned


def make_problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 16, generator=g)
    y = torch.randn(64, 4, generator=g)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    return model, x, y


def train(model, x, y, device, opt_name, steps=50):
    model = copy.deepcopy(model).to(device)
    x, y = x.to(device), y.to(device)
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item(), model


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_mlp_50_steps_matches_cpu(opt_name):
    model, x, y = make_problem()
    cpu_loss, cpu_model = train(model, x, y, "cpu", opt_name)
    dev_loss, dev_model = train(model, x, y, "mytorch", opt_name)
    _, gold_model = train(copy.deepcopy(model).double(), x.double(), y.double(), "cpu", opt_name)  # golden values
    assert abs(dev_loss - cpu_loss) / abs(cpu_loss) < 1e-5, (dev_loss, cpu_loss)
    for i, (p_cpu, p_dev, p_gold) in enumerate(
        zip(cpu_model.parameters(), dev_model.parameters(), gold_model.parameters())
    ):
        assert p_dev.device.type == "mytorch"
        assert_aligned(p_dev.detach(), p_cpu.detach(), p_gold.detach(), f"parameter {i}")


def test_gradients_match_cpu():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 3, generator=g, dtype=torch.float64)
    b = torch.randn(3, 4, generator=g, dtype=torch.float64)
    ad = a.to("mytorch").requires_grad_()
    bd = b.to("mytorch").requires_grad_()
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    for p, q in ((ad, bd), (ac, bc)):
        ((p @ q).sin() * 3).sum().backward()
    torch.testing.assert_close(ad.grad.cpu(), ac.grad, rtol=0, atol=0)
    torch.testing.assert_close(bd.grad.cpu(), bc.grad, rtol=0, atol=0)
    assert ad.grad.device.type == "mytorch"


def test_gradcheck_float64():
    x = torch.randn(4, 3, dtype=torch.float64, device="mytorch", requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: (t.exp() * t.tanh()).sum(1), (x,))


def test_state_dict_moves_between_devices():
    model, x, y = make_problem()
    dev = copy.deepcopy(model).to("mytorch")
    sd = {k: v.cpu() for k, v in dev.state_dict().items()}
    for k, v in model.state_dict().items():
        assert torch.equal(sd[k], v)
    back = nn.Sequential(*[copy.deepcopy(m) for m in model]).to("mytorch")
    back.load_state_dict(dev.state_dict())
    torch.testing.assert_close(back(x.to("mytorch")).cpu(), model(x))  # native tanh: last-bit differences


def test_convolutions_are_native():
    # Regression (found by the alignment suite): PrivateUse1 convolutions go to convolution_overrideable,
    # which the boxed fallback cannot run, so every conv on mytorch raised. Every rank is native now.
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.ConvTranspose2d(6, 2, 2, stride=2, groups=2))
    dev = copy.deepcopy(ref).to("mytorch")
    x = torch.randn(2, 3, 8, 8)
    torch.mytorch.reset_fallback_stats()
    out, out_d = ref(x), dev(x.to("mytorch"))
    gold = copy.deepcopy(ref).double()
    out_g = gold(x.double())
    assert_aligned(out_d.detach(), out.detach(), out_g.detach(), "output")
    out.square().sum().backward()
    out_d.square().sum().backward()
    out_g.square().sum().backward()
    for (name, p), q, pg in zip(ref.named_parameters(), dev.parameters(), gold.parameters()):
        assert_aligned(q.grad, p.grad, pg.grad, name)
    conv3d = nn.Conv3d(2, 3, 2)
    v = torch.randn(1, 2, 4, 4, 4)
    torch.mytorch.set_fallback_mode("error")
    y = conv3d.to("mytorch")(v.to("mytorch"))
    assert_aligned(y.detach(), conv3d.cpu()(v).detach(), None, "conv3d")
    stats = torch.mytorch.fallback_stats()
    assert "aten::convolution_overrideable" not in stats and "aten::convolution_backward_overrideable" not in stats
