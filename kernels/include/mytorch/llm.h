// Fused LLM family (Note [Fused LLM ops]): the gated-MLP activations (SwiGLU, GeGLU), the rotary position
// embedding and the cross-entropy rows of the fused linear + cross-entropy, ops beyond aten that mytorch.ops exposes. The per-element math is here once, shared by the CUDA
// kernels (cuda/llm.cu) and their sim twins (sim/llm.cpp); the activations are the pointwise table's functors.
#pragma once

#include <cstdint>

#include "mytorch/device_error.h"
#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"

namespace mytorch {

// Note [Fused LLM ops]
// A decoder layer spends its memory where aten leaves the math unfused: silu(gate) * up keeps silu(gate) for the
// backward besides gate and up, and q * cos + rotate_half(q) * sin keeps rotate_half(q) and two products. The fused
// ops keep only their inputs and recompute the rest in the backward (one pass over memory each way):
// - glu: y = act(gate) * up; dgate = dy * up * act'(gate), dup = dy * act(gate). Rows of `cols` contiguous elements,
//   each operand's rows at its own stride, so a packed gate_up projection (one GEMM) passes its halves as views and
//   the backward writes both gradients into one packed buffer.
// - rope: per pair (j, partner(j)) of the first `rot` elements of a head: out[j] = x[j] cos[j] + sign(j) x[p] sin[j],
//   sign -1 on the pair's first element; the inverse rotation (the backward) uses sin at the partner with the
//   opposite sign. Pairs are (j, j + rot/2) (Llama/NeoX) or (2i, 2i+1) (GPT-J, interleaved; the complex form of
//   DeepSeek-V2). cos/sin give a value per element (width rot) or per pair (width rot/2); elements past rot are
//   copied. One thread owns a pair, so the op may run in place.

// Sigmoid: aten::glu's a * sigmoid(b) (csrc/aten/tensor/Composed.cpp); mytorch::glu takes the other three.
enum class GluAct : int { Silu = 0, Gelu = 1, GeluTanh = 2, Sigmoid = 3 };

struct GluArgs {
  const void* gate = nullptr;
  const void* up = nullptr;
  void* y = nullptr; // forward
  const void* dy = nullptr; // backward: dy in, dgate and dup out
  void* dgate = nullptr;
  void* dup = nullptr;
  int64_t rows = 0, cols = 0;
  // row strides in elements (elements within a row are contiguous)
  int64_t gate_ld = 0, up_ld = 0, y_ld = 0, dy_ld = 0, dgate_ld = 0, dup_ld = 0;
  DType dtype = DType::Float;
  GluAct act = GluAct::Silu;
};

namespace llm {

// The activation and its derivative, in opmath O for stored dtype T: the pointwise table's functors.
template <typename T, typename O>
MT_HOST_DEVICE inline O glu_act(GluAct act, O g) {
  const EwParams p{};
  switch (act) {
    case GluAct::Gelu: return ew::Fn<EwOp::Gelu>::template f<T, O>(g, p);
    case GluAct::GeluTanh: return ew::Fn<EwOp::GeluTanh>::template f<T, O>(g, p);
    case GluAct::Sigmoid: return ew::Fn<EwOp::Sigmoid>::template f<T, O>(g, p);
    default: return ew::Fn<EwOp::Silu>::template f<T, O>(g, p);
  }
}
// dy * act'(g): the table's activation backwards (grad, x)
template <typename T, typename O>
MT_HOST_DEVICE inline O glu_act_backward(GluAct act, O dy, O g) {
  const EwParams p{};
  switch (act) {
    case GluAct::Gelu: return ew::Fn<EwOp::GeluBackward>::template f<T, O>(dy, g, p);
    case GluAct::GeluTanh: return ew::Fn<EwOp::GeluTanhBackward>::template f<T, O>(dy, g, p);
    case GluAct::Sigmoid:
      return ew::Fn<EwOp::SigmoidBackward>::template f<T, O>(dy, ew::Fn<EwOp::Sigmoid>::template f<T, O>(g, p), p);
    default: return ew::Fn<EwOp::SiluBackward>::template f<T, O>(dy, g, p);
  }
}

} // namespace llm

// x viewed as [n[0]][n[1]][n[2]][head_dim] (leading dims collapsed by the glue), the head contiguous.
struct RopeArgs {
  const void* x = nullptr;
  void* out = nullptr; // may be x (in place)
  const void* cos = nullptr;
  const void* sin = nullptr; // the same layout as cos
  const int64_t* pos = nullptr; // position ids: cos/sin row pos[...] of a table of pos_limit rows, else by cs_st
  int64_t n[3] = {1, 1, 1};
  int64_t x_st[3] = {}, out_st[3] = {}, cs_st[3] = {}, pos_st[3] = {}; // elements; 0 where broadcast
  int64_t cs_row = 0, pos_limit = 0;
  int64_t head_dim = 0, rot = 0, cs_width = 0; // cs_width: rot (a value per element) or rot / 2 (per pair)
  bool interleaved = false, inverse = false;
  DType dtype = DType::Float, cs_dtype = DType::Float; // cos/sin: x's dtype or float32
  ErrorSite error; // a position id outside [0, pos_limit): recorded, the row left unwritten
};

namespace llm {

// Element j's partner and where cos/sin hold j's value.
MT_HOST_DEVICE inline int64_t rope_partner(const RopeArgs& a, int64_t j) {
  const int64_t half = a.rot / 2;
  return a.interleaved ? (j ^ 1) : (j < half ? j + half : j - half);
}
MT_HOST_DEVICE inline int64_t rope_cs_index(const RopeArgs& a, int64_t j) {
  if (a.cs_width == a.rot) return j;
  return a.interleaved ? j / 2 : j % (a.rot / 2);
}
// The pair k of a row (k < rot / 2): its first element (sign -1) and second.
MT_HOST_DEVICE inline void rope_pair(const RopeArgs& a, int64_t k, int64_t* j0, int64_t* j1) {
  *j0 = a.interleaved ? 2 * k : k;
  *j1 = rope_partner(a, *j0);
}
// Where cos/sin's row for x's row (i0, i1, i2) starts: by their strides, or by the row's position id; false (the
// error recorded, the row to be left alone) for a position id outside the table.
MT_HOST_DEVICE inline bool rope_cs_row(const RopeArgs& a, int64_t i0, int64_t i1, int64_t i2, int64_t* cs) {
  if (!a.pos) {
    *cs = i0 * a.cs_st[0] + i1 * a.cs_st[1] + i2 * a.cs_st[2];
    return true;
  }
  const int64_t p = a.pos[i0 * a.pos_st[0] + i1 * a.pos_st[1] + i2 * a.pos_st[2]];
  if (p < 0 || p >= a.pos_limit) {
    record_error(a.error, p);
    return false;
  }
  *cs = p * a.cs_row;
  return true;
}
// The pair's two outputs from its inputs x0, x1 and cos/sin at both elements.
template <typename O>
MT_HOST_DEVICE inline void rope_rotate(bool inverse, O x0, O x1, O c0, O s0, O c1, O s1, O* y0, O* y1) {
  if (!inverse) {
    *y0 = x0 * c0 - x1 * s0;
    *y1 = x1 * c1 + x0 * s1;
  } else { // the transpose: dx0 = dy0 c0 + dy1 s1, dx1 = dy1 c1 - dy0 s0
    *y0 = x0 * c0 + x1 * s1;
    *y1 = x1 * c1 - x0 * s0;
  }
}

} // namespace llm

// Cross-entropy over rows of logits, the chunks of mytorch.ops.linear_cross_entropy (Note [Fused linear
// cross-entropy] in python/mytorch/ops/cross_entropy.py): per row the loss and the logsumexp of the (soft-capped)
// logits and, with grad, dL/dlogits written over the logits, so a chunk's logits are the only [rows x vocab]
// buffer. Loss of row r with target t: (1 - eps)(lse - c_t) + eps (lse - mean_j c_j) + z lse^2, c = cap * tanh(x /
// cap) with a softcap (else x); rows whose target is ignore_index give 0 and a zero gradient.
struct CeRowsArgs {
  void* logits = nullptr; // [rows][vocab], rows at stride ld
  int64_t rows = 0, vocab = 0, ld = 0;
  const int64_t* target = nullptr;
  float* loss = nullptr; // [rows]
  float* lse = nullptr; // [rows]
  const float* divisor = nullptr; // device scalar or null: the gradient divided by it (the mean's count)
  const float* row_scale = nullptr; // [rows] or null: the gradient of row r times row_scale[r]
  double grad_scale = 1, label_smoothing = 0, softcap = 0, z_loss = 0;
  int64_t ignore_index = -100;
  bool grad = false;
  DType dtype = DType::Float;
  ErrorSite error; // a target outside [0, vocab) that is not ignore_index: recorded, the row ignored
};

namespace llm {

template <typename A>
MT_HOST_DEVICE inline A ce_cap(A x, A cap) {
  return cap > A(0) ? cap * std::tanh(x / cap) : x;
}
template <typename A>
MT_HOST_DEVICE inline A ce_row_loss(const CeRowsArgs& a, A lse, A ct, A csum) {
  const A eps = A(a.label_smoothing);
  return (A(1) - eps) * (lse - ct) + eps * (lse - csum / A(a.vocab)) + A(a.z_loss) * lse * lse;
}
// dL/dx_j from the probability p_j = exp(c_j - lse) of the capped logit c_j, leaving out the target's term
// (ce_target_grad): scale (p_j (1 + 2 z lse) - eps / V) (1 - (c_j / cap)^2). Branch-free, so a row's loop
// vectorises; the caller adds the target's term to its element.
template <typename A>
MT_HOST_DEVICE inline A ce_grad(const CeRowsArgs& a, A p, A c, A lse, A scale) {
  A g = p * (A(1) + A(2) * A(a.z_loss) * lse) - A(a.label_smoothing) / A(a.vocab);
  if (a.softcap > 0) {
    const A t = c / A(a.softcap);
    g *= A(1) - t * t;
  }
  return g * scale;
}
// The target's term of its gradient: -scale (1 - eps) (1 - (c_t / cap)^2).
template <typename A>
MT_HOST_DEVICE inline A ce_target_grad(const CeRowsArgs& a, A ct, A scale) {
  A g = -(A(1) - A(a.label_smoothing));
  if (a.softcap > 0) {
    const A t = ct / A(a.softcap);
    g *= A(1) - t * t;
  }
  return g * scale;
}
// The row's gradient factor: grad_scale / divisor * row_scale[r].
MT_HOST_DEVICE inline float ce_scale(const CeRowsArgs& a, int64_t r) {
  float s = static_cast<float>(a.grad_scale);
  if (a.divisor) s /= *a.divisor;
  if (a.row_scale) s *= a.row_scale[r];
  return s;
}

} // namespace llm

// The launchers' checks of what the glue passes (both runtimes): an even rotary dim within the head, tables of
// one value per element or per pair.
inline rt::Status rope_check(const RopeArgs& a) {
  if (a.rot % 2 != 0 || a.rot > a.head_dim || (a.cs_width != a.rot && 2 * a.cs_width != a.rot))
    return rt::report(rt::Status::InvalidValue, "rope: expected an even rotary dim within the head");
  return rt::Status::Success;
}

MT_LAUNCHER(glu_forward, (const GluArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(glu_backward, (const GluArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(rope, (const RopeArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(cross_entropy_rows, (const CeRowsArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
