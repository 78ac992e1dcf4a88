"""mytorch's fused ops in TorchTitan models, through TorchTitan's model-converter hook (issue 54; docs/torchtitan.md).

    from mytorch.torchtitan import MytorchFusedOpsConverter
    spec = model_registry("debugmodel", attn_backend="varlen", converters=[MytorchFusedOpsConverter.Config()])

TorchTitan (0.3) converts a model's config tree before the model is built (on the meta device), as its float8 and
LoRA converters do; this converter swaps, in the llama3, qwen3 and deepseek_v3 trees (any Decoder built from
TorchTitan's common modules):
- the SwiGLU feed-forwards (FeedForward: w2(silu(w1 x) * w3 x), dense layers and the MoE's shared experts) ->
  MytorchFeedForward, whose activation is mytorch.ops.swiglu (one kernel for silu, the product and their backward);
- the complex rotary embedding (ComplexRoPE: query and key pairs times the complex cache, llama3 and deepseek_v3)
  -> MytorchComplexRoPE, on mytorch.ops.rope's fused kernel (no complex tensors, no float32 copies).
What is fused already without it: RMSNorm (TorchTitan's is nn.RMSNorm: F.rms_norm, mytorch's fused kernel) and
attention (varlen: mytorch's flash operator). What it does not swap (said, not hidden): RoPE in its cos/sin form
(qwen3's), the loss (TorchTitan computes logits then cross-entropy; a linear + cross-entropy fusion needs the trainer's
loss to take hidden states), and the MoE router and grouped experts.

Each swapped module checks itself as mytorch.optimize does (Note [optimize] in mytorch/_optimize.py): on its first
call for each input shape, dtype and device the fused result is compared with the module's own forward within the
alignment rule's floors; a module that fails keeps its own forward from then on, with a warning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

import torch
from torchtitan.models.common.feed_forward import FeedForward
from torchtitan.models.common.rope import ComplexRoPE
from torchtitan.protocols.model import ModelConfigConverter

from . import ops
from ._optimize import _same

__all__ = ["MytorchComplexRoPE", "MytorchFeedForward", "MytorchFusedOpsConverter"]


def _checked(module, what: str, x: torch.Tensor, fused, own):
    """fused() where it gave own()'s result on the first call for x's shape, dtype and device (module doc)."""
    checked = module.__dict__.setdefault("_mytorch_checked", {})
    key = (tuple(x.shape), x.dtype, x.device.type)
    ok = checked.get(key)
    if ok is None:
        with torch.no_grad():
            ok = _same(fused(), own())
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


class MytorchComplexRoPE(ComplexRoPE):
    """TorchTitan's ComplexRoPE on mytorch.ops.rope's kernel (self-checked, see the module doc)."""

    @dataclass(kw_only=True, slots=True)
    class Config(ComplexRoPE.Config):
        pass

    def apply_rotary_emb(self, query, key, rope_cache):  # an instance method here: forward calls it on self
        def fused():
            return ops.rotary_embedding_complex(query, rope_cache), ops.rotary_embedding_complex(key, rope_cache)

        return _checked(self, "RoPE", query, fused, lambda: ComplexRoPE.apply_rotary_emb(query, key, rope_cache))


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
        """The complex rotary embedding -> mytorch.ops.rotary_embedding_complex."""

    def __init__(self, config: Config):
        self.config = config
        self.swapped: dict[str, int] = {}

    def convert(self, model_config):
        swaps = []
        if self.config.swiglu:
            swaps.append(("swiglu", FeedForward.Config, MytorchFeedForward.Config))
        if self.config.rope:
            swaps.append(("rope", ComplexRoPE.Config, MytorchComplexRoPE.Config))
        for kind, old, new_cls in swaps:
            for _fqn, cfg, parent, attr in list(model_config.traverse(old)):
                if type(cfg) is not old:  # subclasses (gated variants, ...) have forwards of their own
                    continue
                new = new_cls(**{f.name: getattr(cfg, f.name) for f in fields(cfg)})
                model_config = _replace(model_config, parent, attr, new)
                self.swapped[kind] = self.swapped.get(kind, 0) + 1
        return model_config
