"""A case per CUDA kernel family of issue 28 (docs/gpu.md, "Kernel families"), on whatever runtime runs.

    python benchmarks/gpu_families.py [--only family,...] [--list]       (MYTORCH_ATTN_MMA=0: CUDA-core attention)

- cuda runtime on a GPU: mytorch against torch.cuda, interleaved (mytorch.testing.bench), the ratio and the
  achieved fraction of the H100's peak (bytes / 3.35 TB/s, or FLOPs / 990 TFLOP/s for attention and GEMMs);
- emu runtime (the emulated CUDA build): no timing; every launch of one call is traced by the GPU performance
  model (mytorch.testing.gpu_model) and the case reports the model's H100 estimate, its fraction of peak at
  scale (without the launches' fixed cost: the emulated inputs are small), the launches' shapes and traffic
  against the case's minimum;
- sim runtime: mytorch against torch CPU at small sizes (a smoke run of the cases).

The minimum traffic of a case (`min_bytes`) is what any kernel must move: each input read once, each output
written once, at the case's dtypes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


@dataclass
class Case:
    family: str
    name: str
    build: Callable  # build(device) -> a callable running the op once
    min_bytes: float = 0.0
    flops: float = 0.0
    backward: bool = False  # runs autograd: on a GPU its torch.cuda reference is timed in another process


def _inputs(*specs, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=d) for s, d in specs]


def cases(size: str) -> list[Case]:
    """size: 'gpu' (H100-sized), 'emu' (large enough for two waves, small enough to emulate), 'sim' (smoke)."""
    big = {"gpu": 1, "emu": 0, "sim": 0}[size]
    f32, bf16 = torch.float32, torch.bfloat16
    out: list[Case] = []

    def add(family, name, build, min_bytes=0.0, flops=0.0, backward=False):
        out.append(Case(family, name, build, min_bytes, flops, backward))

    n = 1 << 26 if big else 1 << 20
    (x,) = _inputs(((n,), f32))
    add("reduce_full", f"sum of {n} f32", lambda d, x=x: (lambda t=x.to(d): lambda: t.sum())(), 4 * n)
    r, c = (8192, 4096) if big else (16384, 512)
    (m,) = _inputs(((r, c), f32))
    add("reduce_leading", f"sum(0) of {r}x{c} f32", lambda d, m=m: (lambda t=m.to(d): lambda: t.sum(0))(), 4 * r * c)
    rows, L = (16, 1 << 20) if big else (4, 1 << 20)
    (s,) = _inputs(((rows, L), f32))
    add("scan", f"cumsum of {rows}x{L} f32", lambda d, s=s: (lambda t=s.to(d): lambda: t.cumsum(-1))(), 8 * rows * L)
    add("scan", f"cummax of {rows}x{L} f32", lambda d, s=s: (lambda t=s.to(d): lambda: t.cummax(-1))(), 16 * rows * L)
    add(
        "scan",
        f"logcumsumexp of {rows}x{L} f32",
        lambda d, s=s: (lambda t=s.to(d): lambda: t.logcumsumexp(-1))(),
        8 * rows * L,
    )
    sn = 1 << 22 if big else 1 << 16
    (sv,) = _inputs(((sn,), f32))
    add("sort", f"sort of {sn} f32", lambda d, sv=sv: (lambda t=sv.to(d): lambda: torch.sort(t))(), 16 * sn)
    ui = torch.randint(0, sn // 4, (sn,), generator=torch.Generator().manual_seed(6))
    add("sort", f"unique of {sn} int64", lambda d, ui=ui: (lambda t=ui.to(d): lambda: torch.unique(t))(), 16 * sn)
    vb, vocab = (8, 131072) if big else (2, 131072)
    (lg,) = _inputs(((vb, vocab), f32))
    add(
        "topk",
        f"topk 50 of {vb}x{vocab} f32",
        lambda d, lg=lg: (lambda t=lg.to(d): lambda: t.topk(50, -1))(),
        4 * vb * vocab,
    )
    probs = torch.softmax(lg, -1)
    add(
        "topk",
        f"multinomial(p, 1) of {vb}x{vocab}",
        lambda d, p=probs: (lambda t=p.to(d): lambda: torch.multinomial(t, 1))(),
        4 * vb * vocab,
    )
    T, H = (16384, 1024) if big else (2048, 256)
    xs, dy = _inputs(((T, H), f32), ((T, H), f32))

    def ln_bwd(d, xs=xs, dy=dy, H=H):
        x = xs.to(d).requires_grad_()
        w = torch.ones(H, device=d, requires_grad=True)
        b = torch.zeros(H, device=d, requires_grad=True)
        y = F.layer_norm(x, (H,), w, b)
        g = dy.to(d)
        return lambda: torch.autograd.grad(y, (x, w, b), g, retain_graph=True)

    add("norm_backward", f"layer_norm backward {T}x{H} f32", ln_bwd, 12 * T * H, backward=True)
    N, C, HW = (64, 256, 28) if big else (8, 64, 64)
    (im,) = _inputs(((N, C, HW, HW), f32))

    def bn(d, im=im, C=C):
        t, w, b = im.to(d), torch.ones(C, device=d), torch.zeros(C, device=d)
        return lambda: F.batch_norm(t, None, None, w, b, training=True)

    def bn_bwd(d, im=im, C=C):
        t, w, b = im.to(d).requires_grad_(), torch.ones(C, device=d, requires_grad=True), torch.zeros(C, device=d)
        y = F.batch_norm(t, None, None, w, b.requires_grad_(), training=True)
        g = torch.ones_like(y)
        return lambda: torch.autograd.grad(y, (t, w, b), g, retain_graph=True)

    add("batch_group_norm", f"batch_norm train {N}x{C}x{HW}x{HW} f32", bn, 8 * im.numel())
    add("batch_group_norm", f"batch_norm backward {N}x{C}x{HW}x{HW} f32", bn_bwd, 12 * im.numel(), backward=True)
    add(
        "batch_group_norm",
        f"group_norm 32 groups {N}x{C}x{HW}x{HW} f32",
        lambda d, im=im: (lambda t=im.to(d): lambda: F.group_norm(t, 32))(),
        8 * im.numel(),
    )
    V, D, ntok = (50257, 768, 8192) if big else (8192, 256, 2048)
    (emb,) = _inputs(((V, D), f32))
    idx = torch.randint(0, V, (ntok,), generator=torch.Generator().manual_seed(1))
    add(
        "index",
        f"embedding {ntok} of {V}x{D} f32",
        lambda d, e=emb, i=idx: (lambda w=e.to(d), j=i.to(d): lambda: F.embedding(j, w))(),
        8 * ntok * D,
    )

    def emb_bwd(d, e=emb, i=idx):
        w = e.to(d).requires_grad_()
        y = F.embedding(i.to(d), w)
        g = torch.ones_like(y)
        return lambda: torch.autograd.grad(y, w, g, retain_graph=True)

    add("index", f"embedding backward {ntok} of {V}x{D} f32", emb_bwd, 8 * ntok * D + 4 * V * D, backward=True)
    add(
        "index",
        f"index_select {ntok} rows of {V}x{D} f32",
        lambda d, e=emb, i=idx: (lambda w=e.to(d), j=i.to(d): lambda: w.index_select(0, j))(),
        8 * ntok * D,
    )
    lrows, lv = (4096, 50257) if big else (256, 8192)
    (logits,) = _inputs(((lrows, lv), f32))
    tgt = torch.randint(0, lv, (lrows,), generator=torch.Generator().manual_seed(2))
    lsm = F.log_softmax(logits, -1)
    add(
        "index",
        f"nll_loss {lrows}x{lv} f32",
        lambda d, a=lsm, t=tgt: (lambda x=a.to(d), y=t.to(d): lambda: F.nll_loss(x, y))(),
        12 * lrows,
    )
    # on emu also a grid of more than a wave (the model's fraction of peak needs the SMs full; ~3 minutes emulated)
    # on a GPU Llama-7B's heads (head dim 128) at sequence 2k and 8k
    shapes = (
        [(4, 16, 2048, 128), (1, 32, 8192, 128)]
        if big
        else [(1, 2, 256, 64)] + ([(1, 48, 512, 64)] if size == "emu" else [])
    )
    for B, nh, S, hd in shapes:
        q, k, v = _inputs(((B, nh, S, hd), bf16), ((B, nh, S, hd), bf16), ((B, nh, S, hd), bf16))
        fl = 4.0 * B * nh * S * S * hd / 2  # causal

        def attn(d, q=q, k=k, v=v):
            a, b_, c = q.to(d), k.to(d), v.to(d)
            return lambda: F.scaled_dot_product_attention(a, b_, c, is_causal=True)

        def attn_bwd(d, q=q, k=k, v=v):
            a, b_, c = (t.to(d).requires_grad_() for t in (q, k, v))
            o = F.scaled_dot_product_attention(a, b_, c, is_causal=True)
            g = torch.ones_like(o)
            return lambda: torch.autograd.grad(o, (a, b_, c), g, retain_graph=True)

        add("attention", f"sdpa causal fwd {B}x{nh}x{S}x{hd} bf16", attn, flops=fl)
        add("attention", f"sdpa causal bwd {B}x{nh}x{S}x{hd} bf16", attn_bwd, flops=2.5 * fl, backward=True)
    # on emu also a grid of more than a wave (about a minute emulated)
    shapes = (
        [(8, 8192, 2048, 2048)] if big else [(4, 512, 256, 256)] + ([(8, 4096, 512, 1024)] if size == "emu" else [])
    )
    for E, tok, K, Nn in shapes:
        a_, bw = _inputs(((tok, K), bf16), ((E, Nn, K), bf16))
        offs = torch.arange(1, E + 1, dtype=torch.int32) * (tok // E)

        def gmm(d, a_=a_, bw=bw, offs=offs):
            a, b, o = a_.to(d), bw.to(d).transpose(-2, -1), offs.to(d)  # transposed expert weights, as in MoE layers
            return lambda: torch._grouped_mm(a, b, offs=o)

        add("grouped_gemm", f"_grouped_mm {E} experts {tok}x{K}x{Nn} bf16", gmm, flops=2.0 * tok * K * Nn)
    sq = 4096 if big else 1024
    xa, xb = _inputs(((sq, sq), f32), ((sq, sq), f32))
    add(
        "strided_elementwise",
        f"x.t() + y {sq}x{sq} f32",
        lambda d, a=xa, b=xb: (lambda p=a.to(d), q=b.to(d): lambda: p.t() + q)(),
        12 * sq * sq,
    )
    cube = (64, 256, 1024) if big else (16, 64, 256)
    (xc,) = _inputs((cube, f32))
    add(
        "strided_elementwise",
        f"permute(2,0,1).contiguous() {'x'.join(map(str, cube))} f32",
        lambda d, a=xc: (lambda p=a.to(d): lambda: p.permute(2, 0, 1).contiguous())(),
        8 * xc.numel(),
    )
    (xd,) = _inputs(((n,), f32))
    add(
        "dropout",
        f"dropout 0.1 of {n} f32",
        lambda d, a=xd: (lambda p=a.to(d): lambda: F.dropout(p, 0.1, training=True))(),
        8 * n,
    )
    nparams, psz = (64, 1 << 20) if big else (16, 1 << 14)

    def adamw(d, nparams=nparams, psz=psz):
        ps = [torch.randn(psz, device=d, requires_grad=True) for _ in range(nparams)]
        for p in ps:
            p.grad = torch.randn(psz, device=d)
        opt = torch.optim.AdamW(ps, lr=1e-3, foreach=True)
        return opt.step

    add("optimizer", f"AdamW foreach {nparams}x{psz} f32", adamw, 28.0 * nparams * psz)

    def unscale(d, nparams=nparams, psz=psz):
        gs = [torch.randn(psz, device=d) for _ in range(nparams)]
        found, inv = torch.zeros(1, device=d), torch.ones(1, device=d)
        return lambda: torch._amp_foreach_non_finite_check_and_unscale_(gs, found, inv)

    add("optimizer", f"AMP unscale {nparams}x{psz} f32", unscale, 8.0 * nparams * psz)
    sn2, tgt_n = (1 << 24, 1 << 20) if big else (1 << 18, 1 << 14)
    (src,) = _inputs(((sn2,), f32))
    sidx = torch.randint(0, tgt_n, (sn2,), generator=torch.Generator().manual_seed(3))

    def scatter(d, src=src, sidx=sidx, tgt_n=tgt_n):
        s, i, o = src.to(d), sidx.to(d), torch.zeros(tgt_n, device=d)
        return lambda: o.scatter_add_(0, i, s)

    add("scatter_add", f"scatter_add_ {sn2} into {tgt_n} f32", scatter, 12.0 * sn2)
    srow, sv2 = (4096, 50257) if big else (2304, 12288)
    (ls,) = _inputs(((srow, sv2), f32))
    add(
        "softmax_long",
        f"log_softmax {srow}x{sv2} f32",
        lambda d, a=ls: (lambda p=a.to(d): lambda: F.log_softmax(p, -1))(),
        8 * srow * sv2,
    )
    fused_llm_cases(add, big)
    return out


def fused_llm_cases(add, big: int) -> None:
    """The fused LLM ops of mytorch.ops (issue 29): their kernels alone, on tensors made beforehand. On another
    device (the reference: torch.cuda, the CPU) each case runs the aten composition the op replaces."""
    import mytorch

    def on(d, fused, plain):
        return fused if torch.device(d).type == "mytorch" else plain

    bf16 = torch.bfloat16
    T, inter = (16384, 8192) if big else (2048, 1024)
    (gu,) = _inputs(((T, 2 * inter), bf16))

    def glu(d, gu=gu):
        p = gu.to(d)
        return on(d, lambda: mytorch.ops.swiglu(p), lambda: F.silu(p[:, :inter]) * p[:, inter:])

    add("fused_glu", f"swiglu packed {T}x{2 * inter} bf16", glu, 2 * 3 * T * inter)
    B, Hq, S, D = (8, 32, 2048, 128) if big else (2, 16, 256, 64)
    q, ang = _inputs(((B, Hq, S, D), bf16), ((B, S, D // 2), torch.float32))
    cos = torch.cat([ang.cos()] * 2, -1).to(bf16).unsqueeze(1)
    sin = torch.cat([ang.sin()] * 2, -1).to(bf16).unsqueeze(1)

    def rope(d, q=q):
        p, c, s_ = q.to(d), cos.to(d), sin.to(d)
        return on(
            d,
            lambda: mytorch.ops.rotary_embedding(p, None, c, s_, unsqueeze_dim=None),
            lambda: p * c + torch.cat([-p[..., D // 2 :], p[..., : D // 2]], -1) * s_,
        )

    add("fused_rope", f"rotary_embedding q {B}x{Hq}x{S}x{D} bf16", rope, 2 * 2 * q.numel() + 2 * 2 * cos.numel())
    R, V = (8192, 128256) if big else (256, 32768)
    (lg,) = _inputs(((R, V), bf16))
    tgt = torch.randint(0, V, (R,), generator=torch.Generator().manual_seed(9))

    def ce_rows(d, lg=lg, tgt=tgt):
        p, t = lg.to(d), tgt.to(d)
        return on(
            d,
            lambda: torch.ops.mytorch.cross_entropy_rows_(p, t, None, None, -100, 0.0, 0.0, 0.0, 1.0, True),
            lambda: (F.cross_entropy(p.float(), t, reduction="none"), F.softmax(p.float(), -1) - F.one_hot(t, V)),
        )

    add("fused_ce_rows", f"cross_entropy_rows_ (loss + grad in place) {R}x{V} bf16", ce_rows, 2 * 2 * R * V)
    tok, E, k, Hd = (65536, 128, 8, 4096) if big else (8192, 64, 8, 256)
    (rl,) = _inputs(((tok, E), torch.float32))

    def topk(d, rl=rl):
        p = rl.to(d)
        return on(d, lambda: mytorch.ops.moe_topk(p, k), lambda: torch.topk(p.softmax(-1), k))

    add("moe_topk", f"moe_topk {tok}x{E} k={k} f32", topk, 4 * tok * E + 12 * tok * k)
    tk = tok // 8
    rows, w = _inputs(((tk * k, Hd), bf16), ((tk, k), torch.float32))
    pos = torch.randperm(tk * k, generator=torch.Generator().manual_seed(4)).view(tk, k)

    def combine(d, rows=rows, w=w, pos=pos):
        r, p, ww = rows.to(d), pos.to(d), w.to(d)
        return on(
            d,
            lambda: mytorch.ops.moe_unpermute(r, p, ww),
            lambda: (r[p].float() * ww.unsqueeze(-1)).sum(1).to(r.dtype),
        )

    add("moe_combine", f"moe_unpermute {tk}x{k}x{Hd} bf16", combine, 2 * rows.numel() + 2 * tk * Hd + 12 * tk * k)


PEAK_BYTES = 3.35e12
PEAK_FLOPS = 990e12


def fraction(case: Case, seconds: float) -> float:
    ideal = case.flops / PEAK_FLOPS if case.flops else case.min_bytes / PEAK_BYTES
    return ideal / seconds if seconds > 0 else 0.0


def run_model(cs: list[Case], args) -> None:
    from mytorch.testing import gpu_model

    rows = []
    for c in cs:
        fn = c.build("mytorch")
        fn()  # warm: caches, lazily built state
        torch.mytorch.synchronize()
        launches = gpu_model.trace(fn)
        est = gpu_model.total_us(launches) * 1e-6
        moved = gpu_model.traffic(launches)
        frac = gpu_model.fraction_of_peak(launches, c.min_bytes, c.flops)
        row = {
            "family": c.family,
            "case": c.name,
            "est_us": est * 1e6,
            "launches": len(launches),
            "bytes": moved,
            "dram_bytes": gpu_model.dram_bytes(launches),
            "min_bytes": c.min_bytes,
            "flops": c.flops,
            "fraction_of_peak": frac,
            "fraction_of_peak_with_launches": gpu_model.fraction_of_peak(launches, c.min_bytes, c.flops, False),
            "kernels": gpu_model.summarize(launches),
        }
        rows.append(row)
        vs = f"traffic {moved / c.min_bytes:6.2f}x min" if c.min_bytes else f"{c.flops / 1e9:8.2f} GFLOP"
        print(
            f"{c.family:20s} {c.name:48s} est {est * 1e6:10.1f} us  {len(launches):3d} launches  {vs}  "
            f"{frac:6.1%} of peak at scale",
            flush=True,
        )
    write(args, {"mode": "model", "rows": rows})


def _bench_module():
    """mytorch.testing.bench loaded from its file, without importing the mytorch package (whose import registers
    the device: the reference process of a backward case must not)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "mytorch", "testing", "bench.py")
    spec = importlib.util.spec_from_file_location("mytorch_bench_standalone", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference_in_subprocess(c: Case, args):
    """The torch.cuda side of a backward case, timed in a process that never imports mytorch: since PyTorch 2.8
    a registered PrivateUse1 backend becomes the process's accelerator and every CUDA backward then fails in the
    autograd engine (pytorch/pytorch#161129; docs/gpu.md)."""
    import subprocess

    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--reference-case",
        c.name,
        "--repeat",
        str(args.repeat),
        "--warmup",
        str(args.warmup),
        "--min-sample-ms",
        str(args.min_sample_ms),
        "--malloc",
        "default",
    ]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"reference process failed: {r.stderr[-500:]}")
    data = json.loads(r.stdout.strip().splitlines()[-1])
    return _bench_module().Stats(data["wall"], data["cpu"])


def reference_case_main(name: str, args) -> None:
    bench = _bench_module()
    (c,) = [c for c in cases("gpu") if c.name == name]
    fn = c.build("cuda")
    s = bench.measure({"ref": (fn, torch.cuda.synchronize)}, args.repeat, args.warmup, args.min_sample_ms / 1e3)
    print(json.dumps({"wall": s["ref"].wall, "cpu": s["ref"].cpu}))


def run_timed(cs: list[Case], args, gpu: bool) -> None:
    from mytorch.testing.bench import Bench, make_row, measure

    b = Bench(args.name, args, "issue 28's kernel families, mytorch against " + ("torch.cuda" if gpu else "torch CPU"))
    ref = "cuda" if gpu else "cpu"
    for c in cs:
        try:
            if gpu and c.backward:
                mine = c.build("mytorch")
                m = measure({"m": (mine, b.sync["mytorch"])}, args.repeat, args.warmup, args.min_sample_ms / 1e3)["m"]
                r = reference_in_subprocess(c, args)
                row = make_row(f"{c.family}: {c.name}", m, r, "torch.cuda in another process (pytorch#161129)")
                b.add(row)
            else:
                mine, theirs = c.build("mytorch"), c.build(ref)
                row = b.compare(f"{c.family}: {c.name}", mine, theirs)
        except (RuntimeError, NotImplementedError, AttributeError) as e:  # an op a torch build lacks: named, not fatal
            b.note(f"{c.name}: not run ({type(e).__name__}: {str(e)[:200]})")
            continue
        if gpu:
            row.extra["fraction_of_peak"] = fraction(c, row.mytorch_ms * 1e-3)
            row.extra["reference_fraction_of_peak"] = fraction(c, row.reference_ms * 1e-3)
    b.finish()


def write(args, data) -> None:
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{args.name}.json")
    json.dump(data, open(path, "w"), indent=1)
    print(f"results: {path}")


def main() -> None:
    if "--reference-case" in sys.argv:  # the torch.cuda side of a backward case; mytorch is never imported
        p = argparse.ArgumentParser()
        p.add_argument("--reference-case")
        p.add_argument("--repeat", type=int, default=5)
        p.add_argument("--warmup", type=int, default=1)
        p.add_argument("--min-sample-ms", type=float, default=20.0)
        p.add_argument("--malloc", default="default")
        args = p.parse_args()
        reference_case_main(args.reference_case, args)
        return
    from mytorch.testing.bench import add_args, parse_args

    p = add_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]), repeat=5)
    p.add_argument("--only", default="", help="comma-separated families")
    p.add_argument("--name", default="gpu_families")
    p.add_argument("--list", action="store_true")
    p.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    args = parse_args(p)
    import mytorch  # noqa: F401

    torch.use_deterministic_algorithms(args.deterministic)

    runtime = torch.mytorch.runtime()
    gpu = runtime == "cuda" and torch.cuda.is_available()
    cs = cases("gpu" if gpu else ("emu" if runtime == "emu" else "sim"))
    if args.only:
        keep = set(args.only.split(","))
        cs = [c for c in cs if c.family in keep]
    if args.list:
        for c in cs:
            print(f"{c.family:20s} {c.name}")
        return
    if runtime == "emu":
        run_model(cs, args)
    else:
        run_timed(cs, args, gpu)


if __name__ == "__main__":
    main()
