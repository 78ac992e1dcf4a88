"""mytorch's fused ops beyond aten (torch.ops.mytorch.*, with autograd, fake kernels and CPU implementations):

- norm.py: the residual add fused into LayerNorm / RMSNorm (add_layer_norm, add_rms_norm);
- glu.py: SwiGLU / GeGLU (swiglu, geglu), packed gate_up or separate halves;
- rope.py: the rotary position embedding (rotary_embedding, rotary_embedding_complex);
- cross_entropy.py: the final projection and the cross-entropy without the logits (linear_cross_entropy);
- moe.py: mixture-of-experts routing (moe_topk, moe_permute, moe_unpermute) and transformers' "mytorch" experts
  implementation (experts_forward).
"""

from .cross_entropy import linear_cross_entropy
from .glu import geglu, swiglu
from .moe import experts_forward, moe_permute, moe_topk, moe_unpermute
from .norm import add_layer_norm, add_rms_norm
from .rope import rotary_embedding, rotary_embedding_complex

__all__ = [
    "add_layer_norm",
    "add_rms_norm",
    "swiglu",
    "geglu",
    "rotary_embedding",
    "rotary_embedding_complex",
    "linear_cross_entropy",
    "moe_topk",
    "moe_permute",
    "moe_unpermute",
    "experts_forward",
]
