"""Fused LayerNorm / RMSNorm of mytorch against the reference, in the same process (mytorch.testing.bench),
and a plot.

For rows x width shapes and dtypes it times forward and backward of F.layer_norm and F.rms_norm on mytorch
and on the reference (torch.cuda on a GPU, torch CPU on sim). It prints the achieved GB/s — bytes that must
move: forward reads x and writes y; backward reads x and dy and writes dx (parameters and per-row
statistics are negligible) — as a fraction of the device's measured copy bandwidth (a device-to-device
copy of the same bytes), and the ratio reference time / mytorch time, then plots both. On a GPU the default grid is the issue's (rows 4k-64k, widths 512-16k, fp32/bf16/fp16).

    python benchmarks/layernorm.py                     # reduced grid on sim, full grid on a GPU
    python benchmarks/layernorm.py --rows 4096 --widths 1024,4096 --dtypes bfloat16 --docs
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from mytorch.testing.bench import Bench, add_args, measure, parse_args


def copy_bandwidth(b: Bench, nbytes: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="mytorch")
    dst = torch.empty_like(src)
    stats = measure(
        {"copy": (lambda: dst.copy_(src), b.sync["mytorch"])}, b.args.repeat, b.args.warmup, b.args.min_sample_ms / 1e3
    )
    return 2 * nbytes / stats["copy"].median / 1e9


def main():
    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=7)
    p.add_argument("--rows", default="")
    p.add_argument("--widths", default="")
    p.add_argument("--dtypes", default="")
    args = parse_args(p)
    b = Bench("layernorm", args, "F.layer_norm / F.rms_norm forward and backward; rate = GB/s")
    gpu = b.gpu
    rows = [int(r) for r in args.rows.split(",") if r] or ([4096, 16384, 65536] if gpu else [1024])
    widths = [int(w) for w in args.widths.split(",") if w] or (
        [512, 1024, 2048, 4096, 8192, 16384] if gpu else [512, 2048, 8192]
    )
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",") if d] or [torch.float32, torch.bfloat16, torch.float16]
    bw = copy_bandwidth(b, 256 << 20 if gpu else 64 << 20)
    b.note(f"measured device copy bandwidth {bw:.1f} GB/s (the roof of these memory-bound kernels)")
    results = []
    for norm in ("layer", "rms"):
        for dtype in dtypes:
            for r in rows:
                for w in widths:
                    fns = {}
                    for dev in ("mytorch", b.ref):
                        x = torch.randn(r, w, dtype=dtype, device=dev, requires_grad=True)
                        wt = torch.ones(w, dtype=dtype, device=dev, requires_grad=True)
                        bias = torch.zeros(w, dtype=dtype, device=dev, requires_grad=True)
                        dy = torch.randn(r, w, dtype=dtype, device=dev)
                        fwd = (
                            (lambda x=x, wt=wt, bias=bias: F.layer_norm(x, (w,), wt, bias))
                            if norm == "layer"
                            else (lambda x=x, wt=wt: F.rms_norm(x, (w,), wt))
                        )
                        y = fwd()
                        bwd = lambda y=y, x=x, wt=wt, dy=dy: torch.autograd.grad(y, (x, wt), dy, retain_graph=True)  # noqa: E731
                        fns[dev] = (fwd, bwd)
                    nb = r * w * dtype.itemsize
                    label = f"{norm} {str(dtype)[6:]} {r}x{w}"
                    f = b.compare(f"{label} fwd", fns["mytorch"][0], fns[b.ref][0], work=2 * nb / 1e9, unit="GB/s")
                    bk = b.compare(f"{label} bwd", fns["mytorch"][1], fns[b.ref][1], work=3 * nb / 1e9, unit="GB/s")
                    results.append((norm, dtype, r, w, f.mytorch_rate, bk.mytorch_rate))
    plot(b, results, dtypes, rows, bw)
    b.finish()


def plot(b: Bench, results, dtypes, rows, bw) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        b.note("matplotlib is not installed: no plot")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for norm, ax in zip(("layer", "rms"), axes):
        for dtype in dtypes:
            for r in rows:
                pts = [x for x in results if x[0] == norm and x[1] == dtype and x[2] == r]
                ws = [x[3] for x in pts]
                ax.plot(ws, [x[4] / bw for x in pts], marker="o", label=f"fwd {str(dtype)[6:]} rows={r}")
                ax.plot(
                    ws, [x[5] / bw for x in pts], marker="x", linestyle="--", label=f"bwd {str(dtype)[6:]} rows={r}"
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("width")
        ax.set_ylabel("fraction of device copy bandwidth")
        ax.set_title(f"{'LayerNorm' if norm == 'layer' else 'RMSNorm'} on mytorch ({b.runtime}); copy = {bw:.0f} GB/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    b.save_plot(fig, "layernorm_benchmark.png")


if __name__ == "__main__":
    main()
