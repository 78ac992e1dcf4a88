// The attention families' one core (csrc/aten/nn/Attention.cpp): every attention operator mytorch registers — the
// SDPA hook's overrideable op, torch.cuda's flash and memory-efficient SDPA ops and the varlen flash op
// (AttentionVariants.cpp) — runs the kernels of Note [Fused attention] through these two calls, so strides,
// masks, GQA, dropout and graph capture are handled in one place.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace mytorch::attn {

// A call's Philox state: drawn once per forward, handed back to the backward (which redraws nothing).
struct Philox { uint64_t seed = 0, offset = 0; };

// Advances the device's default generator by `elements` dropout draws (Note [Philox layout]).
Philox drawPhilox(const at::Tensor& like, uint64_t elements);

// The accumulation dtype of the logsumexp (and of the backward's row sums) for inputs of `t`.
at::ScalarType accType(at::ScalarType t);

// q (B, Hq, Lq, E), k (B, Hkv, Lk, E), v (B, Hkv, Lk, Ev), any strides; Hq a multiple of Hkv. `bias`: undefined,
// or additive/boolean broadcastable to (B, Hq, Lq, Lk). Writes out (B, Hq, Lq, Ev), any strides, and lse
// (B, Hq, Lq), contiguous, accType. Causal masking is top-left aligned, as scaled_dot_product_attention's.
void forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias, bool causal,
             std::optional<double> scale, double dropout_p, const Philox& philox, at::Tensor& out, at::Tensor& lse);

// The gradients of forward() for the same arguments, `out` and `lse` from it; dq, dk, dv are written (any strides).
void backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
              const at::Tensor& out, const at::Tensor& lse, const at::Tensor& bias, bool causal,
              std::optional<double> scale, double dropout_p, const Philox& philox, at::Tensor& dq, at::Tensor& dk,
              at::Tensor& dv);

} // namespace mytorch::attn
