"""mytorch's fused ops beyond aten (torch.ops.mytorch.*, with autograd, fake kernels and CPU implementations), one
module per family, each op defined once (Note [A fused op, defined once] in _define.py; schemas in
csrc/ops/Library.cpp). A module's __all__ is what mytorch.ops exports of it:

- norm.py: the residual add fused into LayerNorm / RMSNorm (add_layer_norm, add_rms_norm);
- glu.py: gated MLP activations (swiglu, geglu), packed gate_up or separate halves;
- rope.py: the rotary position embedding (rotary_embedding, rotary_embedding_complex);
- cross_entropy.py: the final projection and the cross-entropy without the logits (linear_cross_entropy);
- moe.py: mixture-of-experts routing (moe_topk, moe_permute, moe_unpermute) and transformers' "mytorch" experts
  implementation (experts_forward).
"""

from . import cross_entropy, glu, moe, norm, rope
from .cross_entropy import *  # noqa: F401,F403
from .glu import *  # noqa: F401,F403
from .moe import *  # noqa: F401,F403
from .norm import *  # noqa: F401,F403
from .rope import *  # noqa: F401,F403

__all__ = [*norm.__all__, *glu.__all__, *rope.__all__, *cross_entropy.__all__, *moe.__all__]
