"""Runs one OpInfo on mytorch and on the references, for each dtype it allows (the worker's job).

For each sample input: the op on the CPU at the dtype (PyTorch's own result), on the CPU at float64 (the
golden values, for floating dtypes when the op supports float64), on mytorch, and on stock torch.cuda when
the cuda runtime is live and torch has CUDA. Where the op supports autograd, the input gradients of a
vector-Jacobian product with a fixed random cotangent are compared the same way. See _compare.py for the
tolerance.
"""

from __future__ import annotations

import itertools
import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten

from .. import _C
from ._opmath import OPMATH_DTYPES, OpmathMode
from ._compare import Errors, compare_outputs, phase_aligned, same_complement, select_equivalent
from ._precise import has_precise_golden, precise_golden

# Saved statistics that CPU PyTorch keeps in the input's half dtype and CUDA PyTorch in float32 (mytorch
# follows CUDA): output indices per op (see compare_outputs).
STAT_OUTPUTS = {
    name: frozenset({1, 2})
    for name in (
        "native_layer_norm",
        "native_group_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "_batch_norm_with_update",
    )
}

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}
# Ops whose outputs have undefined values (uninitialised memory): nothing to compare but shapes.
UNDEFINED_VALUES = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted"}


_REGISTERED: set = set()


def _registered() -> set:
    """The operators with a kernel registered for the mytorch device (from the dispatcher)."""
    if not _REGISTERED:
        _REGISTERED.update(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
    return _REGISTERED


def op_key(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def seed_for(key: str, dtype: str) -> int:
    return zlib.crc32(f"{key}|{dtype}".encode()) & 0x7FFFFFFF


def _copy_tensor(t: torch.Tensor, device: str, upcast: bool) -> torch.Tensor:
    """t on `device` (64-bit if upcast), with its whole storage copied so that views keep their strides and
    offsets (samples such as as_strided's partial views rely on the storage around them)."""
    dtype = t.dtype
    if upcast and t.is_floating_point():
        dtype = torch.float64
    elif upcast and t.is_complex():
        dtype = torch.complex128
    if t.device.type == device and dtype == t.dtype:
        return t
    if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.numel() == 0:
        out = t.detach().to(device=device, dtype=dtype)
    else:
        n = t.untyped_storage().nbytes() // t.element_size()
        base = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,))
        out = base.to(device=device, dtype=dtype).as_strided(t.shape, t.stride(), t.storage_offset())
    return out.detach().requires_grad_(t.requires_grad)


def _convert(sample, device: str | None, upcast: bool):
    """(input, args, kwargs) of a sample generated on mytorch, as a reference sees it: tensors on mytorch
    moved to `device` (None keeps them), optionally upcast to 64-bit floating types. Tensors the sample
    keeps on the CPU stay there, as they would for a sample made for a CUDA device."""
    if device is None:
        return sample.input, sample.args, sample.kwargs

    def conv(x):
        if isinstance(x, torch.Tensor) and (x.device.type == "mytorch" or upcast):
            return _copy_tensor(x, device if x.device.type == "mytorch" else x.device.type, upcast)
        if isinstance(x, torch.device) and x.type == "mytorch":
            return torch.device(device)
        return x

    inp, args, kwargs = tree_map(conv, (sample.input, sample.args, sample.kwargs))
    if isinstance(kwargs.get("device"), str) and kwargs["device"].startswith("mytorch"):
        kwargs = dict(kwargs, device=device)
    return inp, args, kwargs


def _run(op, sample, triple, want_grad: bool, cot_seed: int, probe=None):
    inp, args, kwargs = triple
    if probe is not None:
        with probe:
            out = op(inp, *args, **kwargs)
    else:
        out = op(inp, *args, **kwargs)
    if not want_grad:
        return out, None
    outs = [
        t
        for t in tree_leaves(sample.output_process_fn_grad(out))
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]
    inputs = [t for t in tree_leaves(triple) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not inputs:
        return out, None
    g = torch.Generator().manual_seed(cot_seed)
    cots = []
    for o in outs:
        c = torch.randn(o.shape, generator=g, dtype=torch.complex128 if o.is_complex() else torch.float64)
        cots.append(c.to(o.dtype).to(o.device))
    grads = torch.autograd.grad(outs, inputs, cots, allow_unused=True)
    return out, [gr.detach() if gr is not None else None for gr in grads]


# Ops whose index outputs may order ties differently on any two correct implementations (unstable sorts).
TIE_ORDER_OPS = {"sort", "argsort", "msort", "topk"}
# Ops that select one element per slice and return its index (their ties: select_equivalent in _compare.py).
SELECT_OPS = {"median", "nanmedian", "kthvalue", "mode", "masked.median"}


def _tie_equivalent(inp: torch.Tensor, dev_idx: torch.Tensor, ref_idx: torch.Tensor, same_set: bool = True) -> bool:
    """dev_idx is as good as ref_idx: along some dimension both select the same values from `inp`, and each
    slice of dev_idx holds the same set of positions as ref_idx's (same_set) or distinct positions (topk,
    where ties at the k-th value may pick different elements)."""
    dev_idx, ref_idx, inp = dev_idx.cpu(), ref_idx.cpu(), inp.detach().cpu()
    if dev_idx.shape != ref_idx.shape or inp.dim() != dev_idx.dim():
        return False
    for d in range(max(inp.dim(), 1)):
        try:
            a = inp.gather(d, dev_idx) if inp.dim() else inp
            b = inp.gather(d, ref_idx) if inp.dim() else inp
        except (RuntimeError, IndexError):
            continue
        same_values = (
            torch.equal(a.isnan(), b.isnan()) and torch.equal(a[~a.isnan()], b[~b.isnan()])
            if a.is_floating_point()
            else torch.equal(a, b)
        )
        if not same_values:
            continue
        if same_set and torch.equal(dev_idx.sort(d).values, ref_idx.sort(d).values):
            return True
        if not same_set:
            srt = dev_idx.sort(d).values
            if srt.size(d) < 2 or not bool(
                (srt.narrow(d, 1, srt.size(d) - 1) == srt.narrow(d, 0, srt.size(d) - 1)).any()
            ):
                return True
    return False


def _canonical_topk(sample, out):
    """topk(sorted=False) has no defined order: sort values (and their indices) along the op's dim."""
    args, kw = sample.args, sample.kwargs
    dim = args[1] if len(args) > 1 else kw.get("dim", -1)
    values, indices = out
    if values.dim() == 0:
        return out
    order = values.detach().cpu().argsort(dim=dim, stable=True)
    return values.cpu().gather(dim, order), indices.cpu().gather(dim, order)


# Decompositions whose vectors are defined up to a unit factor per column: (U column index, the factor holding V,
# whether V is stored as Vh, i.e. by rows).
VECTOR_OPS = {"linalg.eigh": (1, None, False), "linalg.svd": (0, 2, True), "svd": (0, 2, False)}


def _settle_vectors(key: str, dev_out, ref_out):
    """Eigen- and singular vectors turned by the unit factors that match the reference's (phase_aligned), extra
    columns of full factors taken from the reference when they span the same complement. Returns (dev_out,
    settled): settled when a factor changed (gradients of the vectors then depend on the choice: not compared)."""
    u_at, v_at, v_rows = VECTOR_OPS[key]
    if not (isinstance(dev_out, tuple) and isinstance(ref_out, tuple) and len(dev_out) == len(ref_out)):
        return dev_out, False
    outs = [t.detach().cpu() for t in dev_out]
    refs = [t.detach().cpu() for t in ref_out]
    if any(a.shape != b.shape for a, b in zip(outs, refs)) or outs[u_at].numel() == 0:
        return dev_out, False
    k = outs[1].shape[-1] if key != "linalg.eigh" else outs[0].shape[-1]
    u, phase = phase_aligned(outs[u_at], refs[u_at], k)
    if u.shape[-1] > k and same_complement(outs[u_at], refs[u_at], k):
        u[..., k:] = refs[u_at][..., k:]
    new = list(outs)
    new[u_at] = u
    if v_at is not None:
        v = outs[v_at].mH if v_rows else outs[v_at]
        rv = refs[v_at].mH if v_rows else refs[v_at]
        v = v.clone()
        v[..., :k] = v[..., :k] * phase.unsqueeze(-2)
        if v.shape[-1] > k and same_complement(v, rv, k):
            v[..., k:] = rv[..., k:]
        new[v_at] = v.mH if v_rows else v
    changed = any(not torch.equal(a, b) for a, b in zip(new, outs))
    device = dev_out[0].device
    return type(dev_out)(t.to(device) for t in new), changed


def _settle_ties(key: str, sample, dev_out, ref_out):
    """For unstable sorts, index outputs that are tie-equivalent to the reference's count as equal. Returns
    (dev_out, ref_out, settled): settled when indices differed only in the order of ties."""
    base = key.split(".")[0]
    if key in VECTOR_OPS:
        dev_out, settled = _settle_vectors(key, dev_out, ref_out)
        return dev_out, ref_out, settled
    if not isinstance(sample.input, torch.Tensor):
        return dev_out, ref_out, False
    if key in SELECT_OPS or base in SELECT_OPS:
        if not (isinstance(dev_out, tuple) and len(dev_out) == 2 and isinstance(ref_out, tuple)):
            return dev_out, ref_out, False
        d_idx, r_idx = dev_out[1], ref_out[1]
        if torch.equal(d_idx.cpu(), r_idx.cpu()) or not select_equivalent(sample.input, d_idx, r_idx):
            return dev_out, ref_out, False
        return type(dev_out)((dev_out[0], r_idx.to(d_idx.device))), ref_out, True
    if base not in TIE_ORDER_OPS:
        return dev_out, ref_out, False
    if base == "topk":
        dev_out, ref_out = _canonical_topk(sample, dev_out), _canonical_topk(sample, ref_out)
    flat_dev, spec = tree_flatten(dev_out)
    flat_ref, _ = tree_flatten(ref_out)
    if len(flat_dev) != len(flat_ref):
        return dev_out, ref_out, False
    settled, changed = [], False
    for d, r in zip(flat_dev, flat_ref):
        idx = len(flat_dev) == 1 or d is flat_dev[-1]  # argsort's only output; sort/topk's second
        if (
            idx
            and isinstance(d, torch.Tensor)
            and isinstance(r, torch.Tensor)
            and d.dtype == torch.int64
            and not torch.equal(d.cpu(), r.cpu())
            and _tie_equivalent(sample.input, d, r, base != "topk")
        ):
            settled.append(r)
            changed = True
        else:
            settled.append(d)
    # Values alone (msort) carry no indices to settle, but their gradients still follow the tie order.
    inp = sample.input.detach().cpu()
    has_ties = inp.numel() > 1 and torch.unique(inp).numel() < inp.numel()
    return tree_unflatten(settled, spec), ref_out, changed or has_ties


def _message(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def run_op(op, dtypes: list[str], max_samples: int, cuda_reference: bool) -> list[dict]:
    key = op_key(op)
    cases = []
    cpu_dtypes = op.supported_dtypes("cpu")
    for dname in dtypes:
        dtype = DTYPES[dname]
        if dtype not in cpu_dtypes:
            continue
        cases.append(_run_case(op, key, dname, dtype, max_samples, cuda_reference, cpu_dtypes))
    return cases


def _run_case(op, key, dname, dtype, max_samples, cuda_reference, cpu_dtypes) -> dict:
    case = {
        "op": key,
        "dtype": dname,
        "verdict": "aligned",
        "native": False,
        "samples": 0,
        "detail": "",
        "forward": None,
        "backward": None,
        "fallback_ops": [],
        "native_kernels": [],
        "host_route": [],
    }
    seed = seed_for(key, dname)
    torch.manual_seed(seed)
    torch.mytorch.manual_seed(seed)
    want_grad = bool(
        op.supports_autograd
        and (dtype.is_floating_point or dtype.is_complex)
        and dtype in op.supported_backward_dtypes("cpu")
    )
    # Samples are made on mytorch, as PyTorch's own device tests make them on the device under test (so
    # arguments an op wants on the CPU stay there); the references get copies.
    try:
        with torch.mytorch.device(0):
            samples = list(
                itertools.islice(op.sample_inputs("mytorch", dtype, requires_grad=want_grad), max_samples or None)
            )
    except Exception as e:
        case.update(verdict="error", detail=f"making the OpInfo's samples on mytorch failed: {_message(e)}")
        return case
    if not samples:
        case.update(verdict="unsupported", detail="OpInfo gives no samples at this dtype")
        return case
    golden = dtype.is_floating_point and dtype != torch.float64 and torch.float64 in cpu_dtypes
    precise = has_precise_golden(key) and dtype.is_floating_point  # the function itself (_precise.py)
    opmath = golden and dtype in OPMATH_DTYPES
    fwd, bwd = Errors(), Errors()
    native_kernels, fallback_ops, host_routes = set(), set(), set()
    ref_failures = dev_errors = both_raised = 0
    first_ref_error = first_dev_error = None
    fallback_calls = 0
    ties = 0
    for i, s in enumerate(samples):
        cot_seed = seed + 7919 * (i + 1)
        torch.manual_seed(seed + i)
        probe = _SeededProbe()
        try:
            ref_out, ref_grads = _run(op, s, _convert(s, "cpu", False), want_grad, cot_seed, probe)
            ref_exc = None
        except Exception as e:
            ref_exc = e
        if ref_exc is None:
            # Random draws (PyTorch tags them nondeterministic_seeded) come from different generators on
            # mytorch and on the CPU; uninitialised outputs have no values to compare.
            if key.split(".")[0] in UNDEFINED_VALUES or probe.random:
                case.update(
                    verdict="skipped",
                    detail="outputs are random or uninitialised: values not comparable",
                    samples=len(samples),
                )
                return case
        gold_out = gold_grads = None
        if ref_exc is None and (golden or precise):
            try:
                gold_out, gold_grads = _run(op, s, _convert(s, "cpu", True), want_grad, cot_seed)
                if precise:
                    gold_out = precise_golden(key, s.input, gold_out)
            except Exception:
                gold_out = gold_grads = None
        extra_out, extra_grads = (), ()
        if ref_exc is None and (cuda_reference or opmath):
            # PyTorch's other numerics: torch.cuda itself, or without a GPU its opmath emulation (Note [Opmath
            # reference]); a reference that raises adds nothing.
            try:
                if cuda_reference:
                    c_out, c_grads = _run(op, s, _convert(s, "cuda", False), want_grad, cot_seed)
                else:
                    with OpmathMode():
                        c_out, c_grads = _run(op, s, _convert(s, "cpu", False), want_grad, cot_seed)
                extra_out, extra_grads = (c_out,), ((c_grads,) if c_grads is not None else ())
            except Exception:
                pass
        stats0 = _C._fallback_stats()
        routes0 = _C._host_route_stats()
        torch.manual_seed(seed + i)
        _C._op_trace_start()
        try:
            dev_out, dev_grads = _run(op, s, _convert(s, None, False), want_grad, cot_seed)
            torch.mytorch.synchronize()  # an error recorded on the device is this sample's (Note [Device-side errors])
            dev_exc = None
        except Exception as e:
            dev_exc = e
        finally:
            native_kernels.update(k for k in _C._op_trace_stop() if k in _registered())
        host_routes.update(k for k, v in _C._host_route_stats().items() if v != routes0.get(k, 0))
        for k, v in _C._fallback_stats().items():
            if v["calls"] != stats0.get(k, {}).get("calls", 0):
                fallback_ops.add(k)
                fallback_calls += v["calls"] - stats0.get(k, {}).get("calls", 0)
        if ref_exc is not None:
            ref_failures += 1
            first_ref_error = first_ref_error or _message(ref_exc)
            if dev_exc is not None:
                both_raised += 1
            else:
                fwd.problems.append(f"sample {i}: mytorch succeeded where the CPU raised ({_message(ref_exc)})")
            continue
        if dev_exc is not None:
            dev_errors += 1
            first_dev_error = first_dev_error or f"sample {i}: {_message(dev_exc)}"
            continue
        case["samples"] += 1
        dev_out, ref_cmp, tie_settled = _settle_ties(key, s, dev_out, ref_out)
        fwd.merge(
            compare_outputs(
                dev_out,
                ref_cmp,
                gold_out if not tie_settled and key.split(".")[0] != "topk" else None,
                extra_out,
                STAT_OUTPUTS.get(key.split(".")[0], frozenset()),
            )
        )
        if tie_settled:
            ties += 1  # gradients follow the tie order, which is implementation-defined: not compared
        elif want_grad and ref_grads is not None:
            bwd.merge(compare_outputs(dev_grads, ref_grads, gold_grads, extra_grads))
    case["native_kernels"] = sorted(native_kernels)
    case["fallback_ops"] = sorted(fallback_ops)
    case["host_route"] = sorted(host_routes)  # Note [Sim host route]: native, with a CPU library's loops
    case["native"] = fallback_calls == 0
    case["forward"] = fwd.as_dict()
    case["backward"] = bwd.as_dict() if want_grad and bwd.total else None
    if ref_failures == len(samples):
        case.update(verdict="unsupported", detail=f"the CPU reference raised on every sample: {first_ref_error}")
    elif dev_errors:
        case.update(
            verdict="error", detail=f"{dev_errors} of {len(samples)} samples raised on mytorch; {first_dev_error}"
        )
    elif not fwd.ok or not bwd.ok:
        which = "forward" if not fwd.ok else "backward"
        problems = fwd.problems or bwd.problems
        case.update(
            verdict="mismatch",
            detail=f"{which}: "
            + ("; ".join(problems) if problems else f"{(fwd if not fwd.ok else bwd).bad} elements out of tolerance"),
        )
    elif both_raised:
        case["detail"] = f"{both_raised} samples raise on both (same behaviour)"
    if ties and case["verdict"] == "aligned":
        case["detail"] = (
            case["detail"] + "; " if case["detail"] else ""
        ) + f"{ties} samples order ties differently (equivalent); their gradients are not compared"
    return case


class _SeededProbe(TorchDispatchMode):
    """Notes whether any aten op that draws random numbers ran."""

    def __init__(self):
        super().__init__()
        self.random = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.random = True
        return func(*args, **(kwargs or {}))
