"""Fused LayerNorm / RMSNorm of mytorch against the reference in the same process, and a PNG plot.

For rows x width shapes and dtypes it times forward and backward of F.layer_norm and F.rms_norm on mytorch
and on the reference (torch.cuda on a GPU, torch CPU on sim). It prints the achieved GB/s — bytes that must
move: forward reads x and writes y; backward reads x and dy and writes dx (parameters and per-row
statistics are negligible) — as a fraction of the device's measured copy bandwidth (a device-to-device
copy of the same bytes), and the ratio reference_time / mytorch_time (above 1: mytorch is faster), then
plots both. On a GPU the default grid is the issue's (rows 4k-64k, widths 512-16k, fp32/bf16/fp16).

    python benchmarks/layernorm.py                     # reduced grid on sim, full grid on a GPU
    python benchmarks/layernorm.py --plot out.png --rows 4096 --widths 1024,4096 --dtypes bfloat16
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import mytorch  # noqa: F401
from _timing import timed


def copy_bandwidth(dev: str, sync, nbytes: int, repeat: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), sync, repeat)
    return 2 * nbytes / t / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", default="")
    p.add_argument("--widths", default="")
    p.add_argument("--dtypes", default="")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--plot", default="docs/layernorm_benchmark.png")
    args = p.parse_args()
    torch.mytorch.set_fallback_mode("silent")
    rt = torch.mytorch.runtime()
    ref = "cuda" if rt == "cuda" and torch.cuda.is_available() else "cpu"
    gpu = rt == "cuda"
    rows = [int(r) for r in args.rows.split(",") if r] or ([4096, 16384, 65536] if gpu else [1024])
    widths = [int(w) for w in args.widths.split(",") if w] or ([512, 1024, 2048, 4096, 8192, 16384] if gpu else [512, 2048, 8192])
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",") if d] or [torch.float32, torch.bfloat16, torch.float16]
    syncs = {"mytorch": torch.mytorch.synchronize, "cuda": getattr(torch.cuda, "synchronize", None), "cpu": lambda: None}
    bw = copy_bandwidth("mytorch", syncs["mytorch"], 256 << 20 if gpu else 64 << 20, args.repeat)
    print(f"mytorch fused norms: runtime={rt}, device={torch.mytorch.get_device_name()}, reference={ref}, "
          f"torch {torch.__version__}; measured device copy bandwidth {bw:.1f} GB/s")
    print(f"{'norm':5s} {'dtype':9s} {'rows':>6s} {'width':>6s} | {'fwd GB/s':>9s} {'of copy':>7s} {'vs ref':>7s} | "
          f"{'bwd GB/s':>9s} {'of copy':>7s} {'vs ref':>7s} | {'f+b vs ref':>10s}")
    results = []
    for norm in ("layer", "rms"):
        for dtype in dtypes:
            for r in rows:
                for w in widths:
                    t = {}
                    for dev in ("mytorch", ref):
                        x = torch.randn(r, w, dtype=dtype, device=dev, requires_grad=True)
                        wt = torch.ones(w, dtype=dtype, device=dev, requires_grad=True)
                        b = torch.zeros(w, dtype=dtype, device=dev, requires_grad=True)
                        dy = torch.randn(r, w, dtype=dtype, device=dev)
                        fwd = (lambda: F.layer_norm(x, (w,), wt, b)) if norm == "layer" else (lambda: F.rms_norm(x, (w,), wt))
                        y = fwd()
                        t[dev, "f"] = timed(fwd, syncs[dev], args.repeat)
                        t[dev, "b"] = timed(lambda: torch.autograd.grad(y, (x, wt), dy, retain_graph=True), syncs[dev], args.repeat)
                    nb = r * w * dtype.itemsize
                    fg, bg = 2 * nb / t["mytorch", "f"] / 1e9, 3 * nb / t["mytorch", "b"] / 1e9
                    fr, br = t[ref, "f"] / t["mytorch", "f"], t[ref, "b"] / t["mytorch", "b"]
                    both = (t[ref, "f"] + t[ref, "b"]) / (t["mytorch", "f"] + t["mytorch", "b"])
                    results.append((norm, dtype, r, w, fg, bg, fr, br, both))
                    print(f"{norm:5s} {str(dtype)[6:]:9s} {r:6d} {w:6d} | {fg:9.1f} {fg / bw:6.0%} {fr:6.2f}x | "
                          f"{bg:9.1f} {bg / bw:6.0%} {br:6.2f}x | {both:9.2f}x", flush=True)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for norm, ax in zip(("layer", "rms"), axes):
        for dtype in dtypes:
            for r in rows:
                pts = [x for x in results if x[0] == norm and x[1] == dtype and x[2] == r]
                ws = [x[3] for x in pts]
                ax.plot(ws, [x[4] / bw for x in pts], marker="o", label=f"fwd {str(dtype)[6:]} rows={r}")
                ax.plot(ws, [x[5] / bw for x in pts], marker="x", linestyle="--", label=f"bwd {str(dtype)[6:]} rows={r}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("width")
        ax.set_ylabel("fraction of device copy bandwidth")
        ax.set_title(f"{'LayerNorm' if norm == 'layer' else 'RMSNorm'} on mytorch ({rt}); copy = {bw:.0f} GB/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
