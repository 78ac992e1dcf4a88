"""mytorch.optimize(model): the fused ops of mytorch.ops put into a model that exists (Note [optimize]).

    model = AutoModelForCausalLM.from_pretrained(path).to("mytorch")
    model = mytorch.optimize(model)   # mytorch.optimize: LlamaForCausalLM: rms_norm x9, swiglu x4, rope (llama), cross_entropy

Note [optimize]
Each swap is made only after a check, on random inputs, that the fused form gives the module's own result within
the alignment rule's floors (mytorch._tolerance); a module that fails it, or that optimize does not know,
stays as it is, and the one-line report says what was swapped and what was left. Swaps are per instance (the
module's forward), except rope's:
- rms_norm: RMSNorm modules (a 1-d `weight` and `variance_epsilon` or `eps`) -> F.rms_norm (the fused kernel on
  mytorch), Gemma's (1 + weight) form included;
- swiglu: gated MLPs, gate_proj/up_proj/down_proj with SiLU or GELU (Llama, Mistral, Qwen2/3, Gemma, the dense and
  shared experts of DeepSeek) and packed gate_up_proj/down_proj (Phi-3) -> mytorch.ops.swiglu / geglu;
- rope: the modelling module's `apply_rotary_pos_emb` (a module attribute, as Liger Kernel patches it) ->
  mytorch.ops.rotary_embedding. The fused function checks itself on the first call of each shape against the
  original (per-element or per-pair tables: whichever reproduces it), and calls the original for tensors that are
  neither on mytorch nor on the CPU, so other models of the family are unaffected;
- moe: top-k routers (softmax: Mixtral, Qwen3-MoE, GPT-OSS; sigmoid with expert bias and groups: DeepSeek-V3) ->
  mytorch.ops.moe_topk; the experts -> experts_implementation "mytorch" (mytorch.ops.experts_forward), or with
  ep_group= sharded over the group's ranks -> "mytorch_ep" (mytorch.distributed.ep.experts_forward);
- cross_entropy: causal LMs (`lm_head`, `loss_function`) in training mode with labels -> linear_cross_entropy on
  the last hidden states (with Gemma's final softcap, the MoE auxiliary loss, num_items_in_batch and
  shift_labels as transformers'); the logits are not computed and the output's logits are None (as Liger's).
  Eval and generate() keep the logits. A model of ours with `loss(hidden, targets)` over a Linear `head` (the
  examples' GPT) gets the same swap of that method.
- rms_norm also fuses the attention's residual add into the second norm of a decoder layer written as
  transformers' Llama layer (Mistral, Qwen2/3, Gemma, Qwen3-MoE and DeepSeek-V3 share its forward word for word:
  the source is compared) -> mytorch.ops.add_rms_norm, checked on a random input with the model's rotary
  embedding. The other add (the MLP's, before the next layer's first norm) stays: fusing it would change what a
  layer returns. Layers written otherwise (Gemma-2's four norms, Phi-3's dropouts, Mixtral, GPT-OSS) stay.
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
import types
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import ops
from ._tolerance import compare_tensor

__all__ = ["optimize"]


def _same(fused, original) -> bool:
    """Whether two results (tensors or tuples of them) agree within the alignment rule's floors."""
    if isinstance(original, (tuple, list)):
        return (
            isinstance(fused, (tuple, list))
            and len(fused) == len(original)
            and all(_same(a, b) for a, b in zip(fused, original))
        )
    if not isinstance(original, torch.Tensor) or not isinstance(fused, torch.Tensor):
        return fused is None and original is None
    if fused.shape != original.shape or fused.dtype != original.dtype:
        return False
    return compare_tensor(fused, original, None).ok


def _probe(module: nn.Module, *shape: int) -> torch.Tensor:
    p = next(module.parameters())
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g).to(device=p.device, dtype=p.dtype)


def _first_match(module: nn.Module, candidates, x: torch.Tensor, same=_same):
    """The first candidate forward f(module, x) whose result on x is the module's own; None when none is."""
    with torch.no_grad():
        want = module.forward(x)
        for fwd in candidates:
            try:
                if same(fwd(module, x), want):
                    return fwd
            except (RuntimeError, TypeError, ValueError):
                continue
    return None


# ---- norms and MLPs --------------------------------------------------------------------------------------------
def _rms_norm(m: nn.Module):
    w = getattr(m, "weight", None)
    eps = getattr(m, "variance_epsilon", getattr(m, "eps", None))
    if not isinstance(w, torch.Tensor) or w.dim() != 1 or not isinstance(eps, float):
        return None
    shape = (w.shape[0],)
    return [
        lambda self, x: F.rms_norm(x, shape, self.weight, eps),
        lambda self, x: F.rms_norm(x.float(), shape, 1.0 + self.weight.float(), eps).type_as(x),  # Gemma
    ], _probe(m, 2, 3, w.shape[0])


def _gated_mlp(m: nn.Module):
    lin = all(isinstance(getattr(m, n, None), nn.Linear) for n in ("gate_proj", "up_proj", "down_proj"))
    if lin:
        acts = [ops.swiglu, ops.geglu, lambda g, u: ops.geglu(g, u, approximate="tanh")]
        cands = [lambda self, x, a=a: self.down_proj(a(self.gate_proj(x), self.up_proj(x))) for a in acts]
        return cands, _probe(m, 2, 3, m.gate_proj.in_features)
    if isinstance(getattr(m, "gate_up_proj", None), nn.Linear) and isinstance(getattr(m, "down_proj", None), nn.Linear):
        acts = [ops.swiglu, ops.geglu, lambda gu: ops.geglu(gu, approximate="tanh")]
        cands = [lambda self, x, a=a: self.down_proj(a(self.gate_up_proj(x))) for a in acts]
        return cands, _probe(m, 2, 3, m.gate_up_proj.in_features)
    return None


def _router(m: nn.Module):
    w = getattr(m, "weight", None)
    k = getattr(m, "top_k", None)
    if not isinstance(w, torch.Tensor) or w.dim() != 2 or not isinstance(k, int) or "Router" not in type(m).__name__:
        return None
    corr = getattr(m, "e_score_correction_bias", None)

    def forward(self, hidden_states, *, float_logits, out_float, **kw):
        h = hidden_states.reshape(-1, self.weight.shape[1])
        bias = getattr(self, "bias", None)
        if float_logits:
            logits = F.linear(h.float(), self.weight.float(), bias.float() if bias is not None else None)
        else:
            logits = F.linear(h, self.weight, bias)
        if corr is not None:
            kw = dict(kw, expert_bias=self.e_score_correction_bias)
        weights, ids = ops.moe_topk(logits, self.top_k, **kw)
        return logits, weights if out_float else weights.to(logits.dtype), ids

    if corr is not None:  # DeepSeek-V3: sigmoid, expert bias, grouped, scaled
        kw = dict(
            score="sigmoid",
            n_group=getattr(m, "num_group", getattr(m, "n_group", 1)),
            topk_group=getattr(m, "topk_group", 1),
            renormalize=bool(getattr(m, "norm_topk_prob", True)),
            scaling=float(getattr(m, "routed_scaling_factor", 1.0)),
            group_score="top2",
        )
    else:
        kw = dict(score="softmax", renormalize=bool(getattr(m, "norm_topk_prob", True)))
    cands = [
        lambda self, x, f=f, o=o: forward(self, x, float_logits=f, out_float=o, **kw)
        for f in (False, True)
        for o in (True, False)
    ]
    return cands, _probe(m, 7, w.shape[1])


def _router_same(fused, want) -> bool:
    """Routers: the same logits and picks, weights alike (the picks' order within a row may differ: sorted=False)."""
    fl, fw, fi = fused
    wl, ww, wi = want
    if not _same(fl, wl) or fw.dtype != ww.dtype:
        return False
    fi, wi, fw, ww = fi.cpu(), wi.cpu(), fw.cpu(), ww.cpu()
    fo, wo = fi.sort(-1), wi.sort(-1)
    return torch.equal(fo.values, wo.values) and _same(fw.gather(-1, fo.indices), ww.gather(-1, wo.indices))


def _swap(module: nn.Module, fwd) -> None:
    """The module's forward becomes fwd(module, ...), bound: a deep copy of the model binds it to the copy."""
    fwd.mytorch_fused = True
    module.forward = types.MethodType(fwd, module)


# ---- the residual add fused into the second norm of a decoder layer --------------------------------------------
def _body(fn) -> str | None:
    """A function's body as one whitespace-normalised line (its signature dropped), None without its source."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    start = src.find(") ->")
    start = src.find(":\n", start if start >= 0 else src.find("):"))
    return re.sub(r"\s+", " ", src[start + 2 :]).strip() if start >= 0 else None


_PRE_NORM_LAYER = None  # the body of transformers' LlamaDecoderLayer.forward, read once


def _pre_norm_layer(layer: nn.Module) -> bool:
    """Whether the layer's forward is transformers' pre-norm decoder layer as Llama writes it (norm, attention,
    add, norm, MLP, add: Mistral, Qwen2/3, Gemma, Qwen3-MoE, DeepSeek-V3 share it word for word)."""
    global _PRE_NORM_LAYER
    if not type(layer).__name__.endswith("DecoderLayer"):
        return False
    if _PRE_NORM_LAYER is None:
        try:
            from transformers.models.llama.modeling_llama import LlamaDecoderLayer
        except ImportError:
            return False
        _PRE_NORM_LAYER = _body(LlamaDecoderLayer.forward) or ""
    return bool(_PRE_NORM_LAYER) and _body(type(layer).forward) == _PRE_NORM_LAYER


def _layer_forward(gemma: bool):
    """The pre-norm layer with the attention's residual add fused into post_attention_layernorm
    (mytorch.ops.add_rms_norm: the sum written once, the norm reading it from registers)."""

    def forward(self, hidden_states, *args, **kwargs):
        if args:
            return type(self).forward(self, hidden_states, *args, **kwargs)
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        h, _ = self.self_attn(hidden_states=h, **kwargs)
        norm = self.post_attention_layernorm
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
        w = 1.0 + norm.weight if gemma else norm.weight
        h, residual = ops.add_rms_norm(h, residual, (w.shape[0],), w, eps)
        return residual + self.mlp(h)

    return forward


def _fuse_residual_norms(model: nn.Module, done: Counter) -> None:
    layers = [m for m in model.modules() if _pre_norm_layer(m)]
    rotary = next((m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")), None)
    if not layers or rotary is None:
        return
    for layer in layers:
        if getattr(layer.forward, "mytorch_fused", False):
            continue
        p = next(layer.parameters())
        g = torch.Generator().manual_seed(0)
        h = torch.randn(1, 5, layer.post_attention_layernorm.weight.shape[0], generator=g).to(p.device, p.dtype)
        pos = torch.arange(5, device=p.device).unsqueeze(0)
        kw = dict(position_ids=pos, position_embeddings=rotary(h, pos), attention_mask=None)
        fwd = None
        with torch.no_grad():
            want = type(layer).forward(layer, h, **kw)
            for cand in (_layer_forward(False), _layer_forward(True)):
                try:
                    if _same(cand(layer, h, **kw), want):
                        fwd = cand
                        break
                except (RuntimeError, TypeError, ValueError):
                    continue
        if fwd is None:
            done[f"left:{type(layer).__name__}"] += 1
        else:
            _swap(layer, fwd)
            done["residual_rms_norm"] += 1


# ---- rope ------------------------------------------------------------------------------------------------------
def _fused_rope(original):
    decided: dict = {}

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1, **kwargs):
        if kwargs or q.device.type not in ("mytorch", "cpu") or q.dim() != 4 or k.dim() != 4:
            return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim, **kwargs)
        key = (tuple(cos.shape), q.shape[-1], q.dtype, q.device.type, unsqueeze_dim)
        rot = decided.get(key)
        if rot is None:
            rot = 0
            with torch.no_grad():
                want = original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
                for r in (cos.shape[-1], 2 * cos.shape[-1]):
                    if r <= q.shape[-1] and r % 2 == 0:
                        got = ops.rotary_embedding(q, k, cos, sin, rotary_dim=r, unsqueeze_dim=unsqueeze_dim)
                        if _same(got, want):
                            rot = r
                            break
            decided[key] = rot
        if rot == 0:
            return original(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
        return ops.rotary_embedding(q, k, cos, sin, rotary_dim=rot, unsqueeze_dim=unsqueeze_dim)

    apply_rotary_pos_emb.__wrapped__ = original
    apply_rotary_pos_emb.mytorch_fused = True
    return apply_rotary_pos_emb


def _patch_rope(model: nn.Module) -> list[str]:
    names = []
    for modname in sorted({type(m).__module__ for m in model.modules()}):
        mod = sys.modules.get(modname)
        fn = getattr(mod, "apply_rotary_pos_emb", None) if mod is not None else None
        if not isinstance(fn, types.FunctionType):
            continue
        if not getattr(fn, "mytorch_fused", False):
            mod.apply_rotary_pos_emb = _fused_rope(fn)
        names.append(modname.rsplit(".", 1)[-1].removeprefix("modeling_"))
    return names


# ---- cross-entropy ----------------------------------------------------------------------------------------------
def _fused_causal_lm_forward(self, *args, labels=None, **kwargs):
    """A causal LM's forward (bound to the model) with the loss on linear_cross_entropy in training."""
    original = types.MethodType(type(self).forward, self)
    if labels is None or not self.training or kwargs.get("return_dict") is False:
        return original(*args, labels=labels, **kwargs)
    head = self.lm_head
    num_items = kwargs.pop("num_items_in_batch", None)
    shift = kwargs.pop("shift_labels", None)
    captured = []

    def capture(h):
        captured.append(h)
        return h.new_zeros(*h.shape[:-1], 0)

    head.forward = capture
    try:
        out = original(*args, labels=None, **kwargs)
    finally:
        del head.forward
    h = captured[-1]
    if shift is None:
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
    loss = ops.linear_cross_entropy(
        h,
        head.weight,
        shift.to(h.device),
        head.bias,
        reduction="sum" if num_items is not None else "mean",
        softcap=getattr(self.config, "final_logit_softcapping", None),
    )
    if num_items is not None:
        loss = loss / num_items
    aux = getattr(out, "aux_loss", None)
    if aux is not None:
        loss = loss + getattr(self, "router_aux_loss_coef", 0.0) * aux.to(loss.device)
    out.loss = loss
    out.logits = None
    return out


def _fused_head_loss(self, h, targets):
    """A model's loss(hidden, targets) over its Linear head (the examples' GPT), on linear_cross_entropy."""
    return ops.linear_cross_entropy(h, self.head.weight, targets, self.head.bias).to(h.dtype)


def _head_loss_matches(model: nn.Module) -> bool:
    head = model.head
    g = torch.Generator().manual_seed(0)
    p = head.weight
    h = torch.randn(2, 3, head.in_features, generator=g).to(device=p.device, dtype=p.dtype)
    t = torch.randint(0, head.out_features, (2, 3), generator=g).to(p.device)
    with torch.no_grad():
        return _same(_fused_head_loss(model, h, t), model.loss(h, t))


# ---- the entry point ---------------------------------------------------------------------------------------------
def optimize(
    model: nn.Module,
    rope: bool = True,
    swiglu: bool = True,
    cross_entropy: bool = True,
    rms_norm: bool = True,
    moe: bool = True,
    verbose: bool = True,
    ep_group=None,
    ep_max_tokens: int = 4096,
) -> nn.Module:
    """Swaps the model's norms, gated MLPs, rotary embedding, MoE routers and experts and causal-LM loss for
    mytorch's fused ops where each gives the module's own result (Note [optimize]), in place, and returns the model,
    as ipex.optimize and torch.compile are used: `model = mytorch.optimize(model)`. What was swapped (counts per
    kind, and `left:` for the candidates that failed their check) is printed (verbose) and kept on the model as
    `model.mytorch_optimized`: the counts of this call. Idempotent.

    ep_group (a process group): the experts are sharded over its ranks instead (mytorch.distributed.ep.shard_experts:
    each rank keeps num_experts / world of them; tokens are dispatched to their experts' ranks and combined back,
    at most ep_max_tokens tokens a rank a layer). Collective: every rank of the group calls it."""
    done: Counter = Counter()
    for m in list(model.modules()):
        if getattr(m.forward, "mytorch_fused", False):
            continue
        name = type(m).__name__
        plan = None
        if rms_norm and name.endswith("RMSNorm"):
            plan, kind = _rms_norm(m), "rms_norm"
        elif swiglu and name.endswith("MLP") and not hasattr(m, "experts"):
            plan, kind = _gated_mlp(m), "swiglu"
        elif moe and "Router" in name:
            plan, kind = _router(m), "moe_router"
        if plan is None:
            continue
        cands, x = plan
        fwd = _first_match(m, cands, x, _router_same if kind == "moe_router" else _same)
        if fwd is None:
            done[f"left:{name}"] += 1
            continue
        _swap(m, fwd)
        done[kind] += 1
    if rms_norm:
        _fuse_residual_norms(model, done)
    if (
        moe
        and hasattr(model, "set_experts_implementation")
        and any("Experts" in type(m).__name__ for m in model.modules())
    ):
        try:
            if ep_group is not None:
                from .distributed import ep

                done["moe_experts_ep"] += ep.shard_experts(model, ep_group, ep_max_tokens)
            else:
                ops.moe.register_experts()
                model.set_experts_implementation("mytorch")
                done["moe_experts"] += 1
        except (ValueError, KeyError, AttributeError):
            if ep_group is not None:
                raise  # a half-sharded model must not train on
            done["left:experts"] += 1
    rope_mods = _patch_rope(model) if rope else []
    if rope_mods:
        done["rope"] += len(rope_mods)
    if cross_entropy:
        if hasattr(model, "lm_head") and hasattr(model, "loss_function") and isinstance(model.lm_head, nn.Linear):
            if not getattr(model.forward, "mytorch_fused", False):
                model.forward = types.MethodType(_fused_causal_lm_forward, model)
            done["cross_entropy"] += 1
        elif isinstance(getattr(model, "head", None), nn.Linear) and callable(getattr(model, "loss", None)):
            if getattr(model.loss, "mytorch_fused", False):
                done["cross_entropy"] += 1
            elif _head_loss_matches(model):
                model.loss = types.MethodType(_fused_head_loss, model)
                done["cross_entropy"] += 1
            else:
                done["left:loss"] += 1
    if verbose:
        swapped = [f"{k} x{v}" for k, v in done.items() if not k.startswith("left:")]
        if rope_mods:
            swapped = [s if not s.startswith("rope") else f"rope ({', '.join(rope_mods)})" for s in swapped]
        left = [f"{k[5:]} x{v}" for k, v in done.items() if k.startswith("left:")]
        line = f"mytorch.optimize: {type(model).__name__}: " + (", ".join(swapped) or "nothing swapped")
        if left:
            line += f"; left as they were: {', '.join(left)}"
        print(line)
    model.mytorch_optimized = dict(done)
    return model


_fused_causal_lm_forward.mytorch_fused = True
_fused_head_loss.mytorch_fused = True
