"""mytorch's fused ops in TorchTitan models, through TorchTitan's model-converter hook (issue 54; docs/torchtitan.md).

    from mytorch.torchtitan import MytorchFusedOpsConverter
    spec = model_registry("debugmodel", attn_backend="varlen", converters=[MytorchFusedOpsConverter.Config()])

TorchTitan (0.3) converts a model's config tree before the model is built (on the meta device), as its float8 and
LoRA converters do; this converter swaps, in the llama3, qwen3 and deepseek_v3 trees (any Decoder built from
TorchTitan's common modules):
- the SwiGLU feed-forwards (FeedForward: w2(silu(w1 x) * w3 x), dense layers and the MoE's shared experts) ->
  MytorchFeedForward, whose activation is mytorch.ops.swiglu (one kernel for silu, the product and their backward);
- the MoE's grouped experts (GroupedExperts: the same SwiGLU over torch._grouped_mm) -> MytorchGroupedExperts;
- the rotary embedding, complex form (ComplexRoPE: llama3, deepseek_v3) -> MytorchComplexRoPE and cos/sin form
  (CosSinRoPE: qwen3) -> MytorchCosSinRoPE, on mytorch.ops.rope's fused kernel (no complex tensors, no float32
  copies, no rotate_half concatenations);
- the MoE token dispatcher ("standard" all-to-all or "deepep") -> MytorchTokenDispatcher: with expert parallelism,
  mytorch.distributed.ep's DeepEP-shaped dispatch and combine over the EP group (one row per token and destination
  rank, symmetric memory within a host, one host synchronisation a layer); without it, TorchTitan's local dispatch.
What is fused already without it: RMSNorm (TorchTitan's is nn.RMSNorm: F.rms_norm, mytorch's fused kernel) and
attention (varlen: mytorch's flash operator; flex: torch's flex path on mytorch). The loss is not part of the model's
config tree, so the LM head + cross-entropy fusion is a loss of its own, set as the trainer's loss:
MytorchLinearCrossEntropyLoss (below), which TorchTitan's trainer hands the LM head as it does its ChunkedLossWrapper.
- the MoE router (TokenChoiceTopKRouter: softmax or sigmoid scores, the expert bias for the choice, group-limited
  choice, top-k, normalisation and scale) -> MytorchRouter: mytorch.ops.moe_topk, one kernel a token row with a
  backward for the gate's logits. TorchTitan's router also returns the full score matrix (its MoE reads it), which
  MytorchRouter makes with one softmax or sigmoid beside the fused kernel. TorchTitan's debug routing
  (_debug_force_load_balance) keeps its own forward.

Each swapped module checks itself as mytorch.optimize does (Note [optimize] in mytorch/_optimize.py): on its first
call for each input shape, dtype and device the fused result is compared with the module's own forward within the
alignment rule's floors; a module that fails keeps its own forward from then on, with a warning. The grouped experts
check once per hidden size and dtype (their token count changes every step), on a call with tokens. The dispatcher
is communication, not arithmetic: it has no self-check; mytorch.distributed.ep's own tests and test_torchtitan's
expert-parallel run against the CPU (TorchTitan's all-to-all dispatcher over Gloo) are its checks.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

import spmd_types as spmd
import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
from torchtitan.components.loss import IGNORE_INDEX, ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.distributed.utils import get_spmd_backend
from torchtitan.models.common.feed_forward import FeedForward
from torchtitan.models.common.moe import GroupedExperts, TokenChoiceTopKRouter
from torchtitan.models.common.rope import ComplexRoPE, CosSinRoPE
from torchtitan.models.common.token_dispatcher import (
    AllToAllTokenDispatcher,
    BaseEPTokenDispatcher,
    DeepEPTokenDispatcher,
    LocalTokenDispatcher,
)
from torchtitan.protocols.model import ModelConfigConverter

from . import ops
from ._optimize import _same
from ._tolerance import compare_tensor

__all__ = [
    "MytorchComplexRoPE",
    "MytorchCosSinRoPE",
    "MytorchFeedForward",
    "MytorchFusedOpsConverter",
    "MytorchGroupedExperts",
    "MytorchLinearCrossEntropyLoss",
    "MytorchRouter",
    "MytorchTokenDispatcher",
]


def _checked(module, what: str, x: torch.Tensor, fused, own, shape=None, gold=None, compare=None):
    """fused() where it gave own()'s result on the first call for x's shape (or `shape`), dtype and device (module
    doc). gold(): the same math at a higher precision, where own() computes below its result's dtype (the rule then
    allows twice own()'s error against it, Note [Alignment tolerance]). compare(fused, own): the agreement, where it
    is not the results' equality within the rule."""
    checked = module.__dict__.setdefault("_mytorch_checked", {})
    key = (tuple(x.shape) if shape is None else shape, x.dtype, x.device.type)
    ok = checked.get(key)
    if ok is None:
        with torch.no_grad():
            if compare is not None:
                ok = compare(fused(), own())
            else:
                ok = _same(fused(), own()) if gold is None else compare_tensor(fused(), own(), gold()).ok
        checked[key] = ok
        if not ok:
            warnings.warn(
                f"mytorch.torchtitan: the fused {what} of a {type(module).__name__} differs from its own forward for "
                f"inputs {key}; that module keeps its own forward",
                stacklevel=3,
            )
    return fused() if ok else own()


class MytorchFeedForward(FeedForward):
    """TorchTitan's FeedForward with mytorch.ops.swiglu as its activation (self-checked, see the module doc)."""

    @dataclass(kw_only=True, slots=True)
    class Config(FeedForward.Config):
        pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _checked(self, "SwiGLU", x, lambda: self._fused(x), lambda: super(MytorchFeedForward, self).forward(x))

    def _fused(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(ops.swiglu(self.w1(x), self.w3(x)))


class _MytorchRoPE:
    """apply_rotary_emb on mytorch.ops.rope's kernel (the subclass's _fused_rope), self-checked against the
    TorchTitan class it extends (_own_rope; see the module doc). An instance method: TorchTitan's forward calls it on
    self."""

    _own_rope: type

    def apply_rotary_emb(self, query, key, rope_cache):
        return _checked(
            self,
            "RoPE",
            query,
            lambda: self._fused_rope(query, key, rope_cache),
            lambda: self._own_rope.apply_rotary_emb(query, key, rope_cache),
        )


class MytorchComplexRoPE(_MytorchRoPE, ComplexRoPE):
    """TorchTitan's ComplexRoPE on mytorch.ops.rope's kernel (self-checked, see the module doc)."""

    _own_rope = ComplexRoPE

    @dataclass(kw_only=True, slots=True)
    class Config(ComplexRoPE.Config):
        pass

    @staticmethod
    def _fused_rope(query, key, rope_cache):
        return ops.rotary_embedding_complex(query, rope_cache), ops.rotary_embedding_complex(key, rope_cache)


class MytorchCosSinRoPE(_MytorchRoPE, CosSinRoPE):
    """TorchTitan's CosSinRoPE (rotate-half convention, qwen3) on mytorch.ops.rope's kernel (self-checked)."""

    _own_rope = CosSinRoPE

    @dataclass(kw_only=True, slots=True)
    class Config(CosSinRoPE.Config):
        pass

    @staticmethod
    def _fused_rope(query, key, rope_cache):
        d = query.shape[-1]  # the cache holds cos then sin, one value per rotated element
        return ops.rotary_embedding(query, key, rope_cache[..., :d], rope_cache[..., d:], unsqueeze_dim=None)


class MytorchGroupedExperts(GroupedExperts):
    """TorchTitan's GroupedExperts (SwiGLU experts on torch._grouped_mm, bfloat16 as TorchTitan computes them) with
    mytorch.ops.swiglu joining the two up-projections (self-checked once per hidden size and dtype)."""

    @dataclass(kw_only=True, slots=True)
    class Config(GroupedExperts.Config):
        pass

    def forward(self, x_RD: torch.Tensor, num_tokens_per_expert_E: torch.Tensor) -> torch.Tensor:
        own = lambda: super(MytorchGroupedExperts, self).forward(x_RD, num_tokens_per_expert_E)  # noqa: E731
        if (get_spmd_backend() == "spmd_types" and spmd.is_type_checking()) or x_RD.shape[0] == 0:
            return own()  # SPMD type checking retypes the offsets in TorchTitan's own body
        counts = num_tokens_per_expert_E
        return _checked(
            self,
            "SwiGLU experts",
            x_RD,
            lambda: self._fused(x_RD, counts),
            own,
            shape=tuple(x_RD.shape[1:]),
            gold=lambda: self._reference(x_RD, counts),
        )

    def _weights(self):
        return (w.to_local() if isinstance(w, DTensor) else w for w in (self.w1_EFD, self.w2_EDF, self.w3_EFD))

    def _fused(self, x_RD: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """TorchTitan's expert math in bfloat16 with the fused activation."""
        w1, w2, w3 = self._weights()
        offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
        x = x_RD.bfloat16()
        h = ops.swiglu(
            self._grouped_mm(A=x, B_t=w1.bfloat16().transpose(-2, -1), offs=offs),
            self._grouped_mm(A=x, B_t=w3.bfloat16().transpose(-2, -1), offs=offs),
        )
        return self._grouped_mm(A=h, B_t=w2.bfloat16().transpose(-2, -1), offs=offs).type_as(x_RD)

    def _reference(self, x_RD: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """The self-check's gold: TorchTitan's own formula (not the fused one) on the same bfloat16 operands, in
        float32 throughout."""
        w1, w2, w3 = (w.bfloat16().float().transpose(-2, -1) for w in self._weights())
        offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
        x = x_RD.bfloat16().float()
        h = F.silu(torch._grouped_mm(x, w1, offs=offs)) * torch._grouped_mm(x, w3, offs=offs)
        return torch._grouped_mm(h, w2, offs=offs).type_as(x_RD)


class MytorchRouter(TokenChoiceTopKRouter):
    """TorchTitan's token-choice top-k router on mytorch.ops.moe_topk (module doc). Self-checked on its first call
    per input shape and dtype: the same experts a token (in any order: TorchTitan's top-k is unsorted) with the same
    scores, by the shared rule."""

    @dataclass(kw_only=True, slots=True)
    class Config(TokenChoiceTopKRouter.Config):
        pass

    def forward(self, x_BLD: torch.Tensor, expert_bias_E: torch.Tensor | None = None):
        own = lambda: super(MytorchRouter, self).forward(x_BLD, expert_bias_E)  # noqa: E731
        if self._debug_force_load_balance or isinstance(x_BLD, DTensor):
            return own()
        return _checked(self, "router", x_BLD, lambda: self._fused(x_BLD, expert_bias_E), own, compare=_same_routing)

    def _fused(self, x_BLD: torch.Tensor, expert_bias_E: torch.Tensor | None):
        with torch.autocast(device_type=x_BLD.device.type, dtype=torch.float32):
            logits = self.gate(x_BLD)
        scores = torch.sigmoid(logits) if self.score_func == "sigmoid" else F.softmax(logits, dim=-1)
        weights, ids = ops.moe_topk(
            logits,
            self.top_k,
            self.score_func,
            self.route_norm,
            expert_bias_E,
            self.num_expert_groups,
            self.num_limited_groups,
            self.route_scale,
            group_score="top2",  # TorchTitan ranks the groups by their two best scores
        )
        return weights, ids, scores


def _same_routing(fused, own) -> bool:
    """The routers' results agree: the same experts a token, and their scores (sorted by expert id: TorchTitan's
    top-k is unsorted), and the full score matrix."""
    (w, ids, scores), (w0, ids0, scores0) = fused, own
    ids, order = ids.sort(-1)
    ids0, order0 = ids0.sort(-1)
    return torch.equal(ids, ids0) and _same(w.gather(-1, order), w0.gather(-1, order0)) and _same(scores, scores0)


_BUFFERS: dict = {}  # (group name, hidden, dtype, top-k) -> mytorch.distributed.ep.Buffer, shared by the layers


class MytorchTokenDispatcher(BaseEPTokenDispatcher):
    """TorchTitan's token dispatcher on mytorch.distributed.ep (module doc). dispatch returns the rows grouped by
    local expert (rank-major, token order inside an expert) and the rows per local expert; combine sums each token's
    expert rows weighted by its routing scores (float32, rounded once) back on its home rank. Differentiable in the
    tokens and the scores."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseEPTokenDispatcher.Config):
        num_max_tokens_per_rank: int | None = None
        """The buffer's bound on a rank's tokens per call; None: sized by the first call (and grown as needed)."""

    def __init__(self, config: Config):
        super().__init__(config)
        self.num_max_tokens_per_rank = config.num_max_tokens_per_rank

    def _buffer(self, x_TD: torch.Tensor):
        from .distributed import ep

        group = self.ep_mesh.get_group()
        key = (group.group_name, x_TD.shape[1], x_TD.dtype, self.top_k)
        buf = _BUFFERS.get(key)
        # Every rank calls with the same token count (TorchTitan pads the sequence before routing), so every rank
        # makes the same choice here: the buffer's construction is collective.
        if buf is None or buf.max_tokens < x_TD.shape[0]:
            tokens = max(x_TD.shape[0], self.num_max_tokens_per_rank or 0)
            buf = _BUFFERS[key] = ep.Buffer(group, tokens, x_TD.shape[1], self.top_k, x_TD.dtype)
        return buf

    def dispatch(self, x_TD, topk_scores_TK, topk_expert_ids_TK, num_local_tokens_per_expert_E):
        if self.ep_mesh is None:  # EP = 1: TorchTitan's local reordering
            return LocalTokenDispatcher.dispatch(
                self, x_TD, topk_scores_TK, topk_expert_ids_TK, num_local_tokens_per_expert_E
            )
        buf = self._buffer(x_TD)
        recv_x, _, _, handle, _ = buf.dispatch(x_TD, topk_expert_ids_TK, topk_scores_TK, self.num_experts)
        counts = torch.diff(handle.offsets, prepend=handle.offsets.new_zeros(1))
        return recv_x, counts, (buf, handle)

    def combine(self, routed_output_RD, metadata, x_TD):
        if self.ep_mesh is None:
            return LocalTokenDispatcher.combine(self, routed_output_RD, metadata, x_TD)
        buf, handle = metadata
        return buf.combine(routed_output_RD.to(buf.dtype), handle)[0]


class MytorchLinearCrossEntropyLoss(ChunkedLossWrapper):
    """TorchTitan's cross-entropy with the LM head fused into it: mytorch.ops.linear_cross_entropy (Note [Fused linear
    cross-entropy]) never makes the [tokens, vocabulary] logits. Set it as the trainer's loss (`config.loss =
    MytorchLinearCrossEntropyLoss.Config()`): being a ChunkedLossWrapper, TorchTitan's trainer gives it the LM head
    (set_lm_head) and has the model return hidden states (_skip_lm_head), PP's last stage included. The head is called
    as a module with its forward replaced for the call, so FSDP2's hooks gather its weight and reduce its gradient as
    for any forward. Self-checked on its first call per input shape and dtype against the head's logits and
    TorchTitan's cross-entropy. Where the head's weight is a DTensor inside the forward (tensor parallelism, loss
    parallel), the hidden states are a DTensor, the inner loss is not cross-entropy or extra loss inputs come, it is
    TorchTitan's chunked loss unchanged."""

    @dataclass(kw_only=True, slots=True)
    class Config(ChunkedLossWrapper.Config):
        pass

    def __call__(self, pred, labels, global_valid_tokens=None, **loss_inputs):
        head = self.lm_head
        if (
            loss_inputs
            or isinstance(pred, DTensor)
            or type(self.loss_fn) is not CrossEntropyLoss
            or getattr(head, "bias", None) is not None
        ):
            return ChunkedLossWrapper.__call__(self, pred, labels, global_valid_tokens, **loss_inputs)

        def forward(h, y):
            w = head.weight
            own = lambda: self.loss_fn.fn(F.linear(h, w), y)  # noqa: E731  TorchTitan's: logits, then sum CE
            if isinstance(w, DTensor):
                return own()
            fused = lambda: ops.linear_cross_entropy(h, w, y, ignore_index=IGNORE_INDEX, reduction="sum")  # noqa
            return _checked(self, "linear cross-entropy", h, fused, own)

        head.forward = forward
        try:
            loss = head(pred, labels)
        finally:
            del head.forward
        if global_valid_tokens is not None:
            loss = loss / global_valid_tokens
        return loss, {}


def _replace(model_config, parent, attr, new):
    if parent is None:
        return new
    if isinstance(parent, list):
        parent[attr] = new
    else:
        setattr(parent, attr, new)
    return model_config


class MytorchFusedOpsConverter(ModelConfigConverter):
    """Swaps TorchTitan modules for ones running mytorch's fused ops (the module doc says which)."""

    @dataclass(kw_only=True, slots=True)
    class Config(ModelConfigConverter.Config):
        swiglu: bool = True
        """SwiGLU feed-forwards -> mytorch.ops.swiglu."""

        rope: bool = True
        """The rotary embeddings (complex and cos/sin forms) -> mytorch.ops.rope's kernel."""

        grouped_experts: bool = True
        """The MoE's grouped SwiGLU experts -> mytorch.ops.swiglu between the grouped GEMMs."""

        router: bool = True
        """The MoE's token-choice top-k router -> mytorch.ops.moe_topk."""

        token_dispatcher: bool = True
        """The MoE token dispatcher (standard all-to-all or DeepEP) -> mytorch.distributed.ep."""

    def __init__(self, config: Config):
        self.config = config
        self.swapped: dict[str, int] = {}

    def convert(self, model_config):
        swaps = []
        if self.config.swiglu:
            swaps.append(("swiglu", FeedForward.Config, MytorchFeedForward.Config))
        if self.config.rope:
            swaps.append(("rope", ComplexRoPE.Config, MytorchComplexRoPE.Config))
            swaps.append(("rope", CosSinRoPE.Config, MytorchCosSinRoPE.Config))
        if self.config.grouped_experts:
            swaps.append(("grouped_experts", GroupedExperts.Config, MytorchGroupedExperts.Config))
        if self.config.router:
            swaps.append(("router", TokenChoiceTopKRouter.Config, MytorchRouter.Config))
        if self.config.token_dispatcher:
            swaps.append(("token_dispatcher", AllToAllTokenDispatcher.Config, MytorchTokenDispatcher.Config))
            swaps.append(("token_dispatcher", DeepEPTokenDispatcher.Config, MytorchTokenDispatcher.Config))
        for kind, old, new_cls in swaps:
            for _fqn, cfg, parent, attr in list(model_config.traverse(old)):
                if type(cfg) is not old:  # subclasses (gated variants, ...) have forwards of their own
                    continue
                kept = {f.name for f in fields(new_cls)}
                new = new_cls(**{f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name in kept})
                model_config = _replace(model_config, parent, attr, new)
                self.swapped[kind] = self.swapped.get(kind, 0) + 1
        return model_config
