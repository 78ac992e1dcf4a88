"""F.grid_sample on mytorch's own kernels (Note [Grid sampler]), with the fallback forbidden: every interpolation
and padding mode, both align_corners, 2-D and 3-D, forward and both gradients, against the CPU under the shared rule
(Note [Alignment tolerance]); the sim's input gradient has the same bits at any thread count; bad arguments raise
the CPU's errors."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from mytorch.testing._compare import assert_aligned, misalignment

DEV = "mytorch"
pytestmark = pytest.mark.native

MODES = {2: ("bilinear", "nearest", "bicubic"), 3: ("bilinear", "nearest")}
PADDINGS = ("zeros", "border", "reflection")


def make(dims, seed=0, n=2, c=3, spread=1.3):
    g = torch.Generator().manual_seed(seed)
    size_in = (n, c) + ((4, 5, 6) if dims == 3 else (7, 9))
    size_grid = (n,) + ((3, 4, 5) if dims == 3 else (5, 6)) + (dims,)
    x = torch.randn(size_in, generator=g, dtype=torch.float64)
    grid = (torch.rand(size_grid, generator=g, dtype=torch.float64) * 2 - 1) * spread  # some points outside
    return x, grid


def run(x, grid, dtype, device, mode, padding, align, cot):
    xs = x.to(dtype=dtype, device=device, copy=True).requires_grad_()
    gs = grid.to(dtype=dtype, device=device, copy=True).requires_grad_()
    y = F.grid_sample(xs, gs, mode=mode, padding_mode=padding, align_corners=align)
    y.backward(cot.to(dtype).to(device))
    return y.detach().cpu(), xs.grad.cpu(), gs.grad.cpu()


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_grid_sample_matches_the_cpu(dims, dtype):
    x, grid = make(dims)
    for mode, padding, align in itertools.product(MODES[dims], PADDINGS, (False, True)):
        what = f"{dims}-D {mode} {padding} align_corners={align}"
        cot = torch.randn(
            F.grid_sample(x, grid, mode=mode, align_corners=align).shape,
            dtype=torch.float64,
            generator=torch.Generator().manual_seed(1),
        )
        mine = run(x, grid, dtype, DEV, mode, padding, align, cot)
        cpu = run(x, grid, dtype, "cpu", mode, padding, align, cot)
        gold = run(x, grid, torch.float64, "cpu", mode, padding, align, cot)
        for name, m, r, g in zip(("output", "input gradient", "grid gradient"), mine, cpu, gold):
            assert_aligned(m, r, g, f"{what}: {name}")
        # Not vacuous: the sampled values and (bilinear, bicubic) the grid gradient are not all zero.
        assert gold[0].abs().sum() > 0 and gold[1].abs().sum() > 0, what
        if mode != "nearest":
            assert gold[2].abs().sum() > 0, what


def test_a_wrong_convention_is_caught():
    """Negative control: the rule separates the two align_corners conventions at these sizes, so the test above
    would fail a kernel that confused them."""
    x, grid = make(2)
    y = F.grid_sample(x.float().to(DEV), grid.float().to(DEV), align_corners=False).cpu()
    ref = F.grid_sample(x.float(), grid.float(), align_corners=True)
    gold = F.grid_sample(x, grid, align_corners=True)
    assert misalignment(y, ref, gold)


@pytest.mark.parametrize("dims", [2, 3])
def test_far_and_non_finite_coordinates_match_the_cpu(dims):
    """NaN and infinities (the CPU's 2-D and 3-D kernels treat them differently; mytorch follows each), points far
    outside (border padding brings them to the edge, bicubic taps included) and reflected many times over."""
    x, grid = make(dims, seed=3)
    flat = grid.view(-1, dims)
    flat[:3, 0] = torch.tensor([float("nan"), float("inf"), float("-inf")], dtype=torch.float64)
    flat[3:5, -1] = torch.tensor([float("nan"), float("-inf")], dtype=torch.float64)
    far = make(dims, seed=3)[1]
    far.view(-1, dims)[:3, 0] = torch.tensor([1e12, -5e9, 3e7], dtype=torch.float64)
    many = make(dims, seed=3)[1]  # reflected many times, within float32's integers
    many.view(-1, dims)[:3, 0] = torch.tensor([37.3, -41.9, 1001.7], dtype=torch.float64)
    for mode, padding, align in itertools.product(MODES[dims], PADDINGS, (False, True)):
        for kind, g in (("non-finite", grid), ("far", far), ("reflected", many)):
            if kind == "far" and padding == "reflection":
                continue  # 1e12 reflected in float32 is rounding noise in every implementation
            what = f"{dims}-D {kind} {mode} {padding} align_corners={align}"
            mine = F.grid_sample(x.float().to(DEV), g.float().to(DEV), mode, padding, align).cpu()
            ref = F.grid_sample(x.float(), g.float(), mode, padding, align)
            gold = F.grid_sample(x, g, mode, padding, align)
            assert_aligned(mine, ref, gold, what)


def test_non_contiguous_and_empty_inputs():
    x, grid = make(2, n=3, c=4)
    xt = x.float().to(DEV).transpose(2, 3).contiguous().transpose(2, 3)  # channels-last-like strides
    gt = grid.float().to(DEV)[:, ::2]
    assert_aligned(
        F.grid_sample(xt, gt, align_corners=False).cpu(),
        F.grid_sample(x.float(), grid.float()[:, ::2], align_corners=False),
        F.grid_sample(x, grid[:, ::2], align_corners=False),
    )
    for xs, gs in (((0, 3, 4, 5), (0, 2, 2, 2)), ((2, 0, 4, 5), (2, 2, 2, 2)), ((2, 3, 4, 5), (2, 0, 2, 2))):
        xe = torch.randn(xs, device=DEV, requires_grad=True)
        ge = torch.zeros(gs, device=DEV, requires_grad=True)
        y = F.grid_sample(xe, ge, align_corners=False)
        assert y.shape == F.grid_sample(torch.randn(xs), torch.zeros(gs), align_corners=False).shape
        y.sum().backward()
        assert xe.grad.shape == xe.shape and ge.grad.shape == ge.shape
        assert not xe.grad.abs().sum().item() and not ge.grad.abs().sum().item()


@pytest.mark.parametrize("n", [1, 4])
def test_grid_gradient_alone_matches_the_cpu(n):
    """Only the grid requires a gradient (a spatial transformer over a fixed image): the backward has no input
    gradient to write, for one batch element (channel blocks) and for several."""
    x, grid = make(2, n=n, c=6)
    grads = []
    for device, dtype in ((DEV, torch.float32), ("cpu", torch.float32), ("cpu", torch.float64)):
        g = grid.to(dtype=dtype, device=device, copy=True).requires_grad_()
        F.grid_sample(x.to(dtype=dtype, device=device), g, mode="bicubic", align_corners=False).sum().backward()
        grads.append(g.grad.cpu())
    assert grads[2].abs().sum() > 0
    assert_aligned(*grads, "grid gradient")


def test_input_gradient_bits_do_not_depend_on_the_thread_count():
    x, grid = make(2, n=1, c=8, spread=0.6)  # one batch element: the channel blocks are what splits
    cot = torch.randn(1, 8, 5, 6, generator=torch.Generator().manual_seed(2))
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(run(x, grid, torch.float32, DEV, "bicubic", "zeros", False, cot.double()))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(a, b)


@pytest.mark.parametrize("padding", PADDINGS)
def test_bilinear_bits_do_not_depend_on_the_thread_count(padding):
    """Note [Sim bilinear blocks]: a location is computed in the AVX2 form or the scalar one by its place in its
    batch element, not by where the workers' ranges fall; 37 x 41 locations per element (blocks of 8 and a short one),
    more than one grain of work, with NaN and infinite coordinates among them. Forward and both gradients at 1, 2
    and 4 threads (3 batch elements: the backward fuses the grid gradient into whole-element tasks at 1 thread, not
    at 2 or 4), and aligned with the CPU where the coordinates are finite."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 5, 23, 29, generator=g, dtype=torch.float64)
    grid = torch.rand(3, 37, 41, 2, generator=g, dtype=torch.float64) * 2.6 - 1.3
    grid.view(-1, 2)[::97, 0] = float("nan")
    grid.view(-1, 2)[5::89, 1] = float("inf")
    cot = torch.randn(3, 5, 37, 41, generator=g, dtype=torch.float64)
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            results.append(run(x, grid, torch.float32, DEV, "bilinear", padding, False, cot))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))  # NaN too
    # against the CPU on finite coordinates: torch 2.13's CPU backward segfaults on these NaN and infinite ones
    # under border and reflection padding (exit status 139 in a subprocess)
    finite = torch.nan_to_num(grid, nan=0.3, posinf=1.2)
    mine = run(x, finite, torch.float32, DEV, "bilinear", padding, False, cot)
    cpu = run(x, finite, torch.float32, "cpu", "bilinear", padding, False, cot)
    gold = run(x, finite, torch.float64, "cpu", "bilinear", padding, False, cot)
    for name, m, r, gd in zip(("output", "input gradient", "grid gradient"), mine, cpu, gold):
        assert_aligned(m, r, gd, f"{padding}: {name}")


def test_bad_arguments_raise_the_cpus_errors():
    x = torch.randn(2, 3, 4, 5)
    cases = [
        (x, torch.zeros(2, 3, 3, 3), {}, "grid to have size 2 in last dimension"),
        (x, torch.zeros(3, 3, 3, 2), {}, "same batch size"),
        (x.unsqueeze(2), torch.zeros(2, 1, 3, 3, 3), {"mode": "bicubic"}, "bicubic interpolation only supports 4D"),
        (x, torch.zeros(2, 3, 3, 2, dtype=torch.float64), {}, "dtype"),
        (torch.randn(2, 3, 0, 5), torch.zeros(2, 3, 3, 2), {}, "non-empty spatial dimensions"),
    ]
    for xi, gi, kw, message in cases:
        with pytest.raises(RuntimeError, match=message):
            F.grid_sample(xi.to(DEV), gi.to(DEV), align_corners=False, **kw)
    with pytest.raises(RuntimeError, match="interpolation_mode"):
        torch.grid_sampler_2d(x.to(DEV), torch.zeros(2, 3, 3, 2, device=DEV), 7, 0, False)
    with pytest.raises(RuntimeError, match="padding_mode"):
        torch.grid_sampler_2d(x.to(DEV), torch.zeros(2, 3, 3, 2, device=DEV), 0, -1, False)
