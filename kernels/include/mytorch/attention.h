// Attention family: scaled-dot-product attention forward and backward in the FlashAttention manner —
// keys visited in tiles with an online softmax, fp32 accumulation (fp64 for double), the row's logsumexp saved for the
// backward, which recomputes the probabilities: no L x S matrix in memory.
//
// Note [Fused attention]
// Layout: q [B, Hq, L, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] with element strides for B, H and the
// sequence (the last dimension is contiguous); grouped-query attention maps q head h to kv head
// h / (Hq / Hkv). Scores are scale * q.k, plus an optional additive bias (any broadcast: strides may be 0),
// with keys j > i masked when causal (PyTorch's top-left alignment: row i sees keys 0..i). Dropout keeps
// element (b, h, i, j) when Philox(seed, counter = its flat index, offset) draws u >= p and scales kept
// probabilities by 1 / (1 - p); the backward regenerates the same mask. The logsumexp excludes dropout.
// A row whose every key is masked (a boolean mask all False, or an additive one all -inf: left padding under a
// causal mask makes such rows) gives output 0 and logsumexp +inf, as PyTorch's kernels (the CPU's and CUDA's
// flash attention; the math path's safe softmax gives the same 0): the backward's P = exp(s - lse) is then 0
// on the row and its gradients are 0, not NaN (row_lse below, the one rule for every path).
// The backward: D_i = dO_i . O_i; P_ij = exp(s_ij - lse_i); dV_j += Z_ij P_ij dO_i; dP_ij = Z_ij dO_i . v_j;
// dS_ij = P_ij (dP_ij - D_i); dQ_i += scale dS_ij k_j; dK_j += scale dS_ij q_i (Z: the dropout factor).
// dK/dV of a kv head sum over its query heads in a fixed order: deterministic.
// Decoding (q_len = 1, a long KV cache): the keys are split into chunks of kAttnSplitChunk, each chunk
// yields (max m_c, sum l_c, unnormalised output acc_c), and a second pass combines them per row:
// M = max m_c, L = sum l_c e^(m_c - M), O = sum acc_c e^(m_c - M) / L, lse = M + log L — flash decoding.
// sim/ runs the tiled algorithm in loops (tiles of 64 keys) — the C++ reference. cuda/ runs, for fp16/bf16 with head
// dims 64/128 (attention_tensor_cores below), FlashAttention-2's schedule on tensor cores (mma.sync with ldmatrix
// fragments from swizzled tiles that cp.async stages double-buffered): the forward (attention_mma.cu) and the 5-GEMM
// backward with an fp32 dQ accumulated by atomics (attention_mma_bwd.cu; the 7-GEMM kernels without atomics under
// torch.use_deterministic_algorithms); every other shape runs CUDA-core kernels with a warp per query row (forward,
// dQ) and per key row (dK, dV). The Hopper (wgmma/TMA) kernels are the performance work still to come.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/random.h"
#include "mytorch/launch.h"

namespace mytorch {

struct AttnTensor {
  void* data = nullptr;
  int64_t sb = 0, sh = 0, ss = 0;  // element strides of batch, head, sequence
};

struct AttentionArgs {
  DType dtype = DType::Float;        // q, k, v, out, grads
  int64_t b = 0, hq = 0, hkv = 0, lq = 0, lk = 0, d = 0, dv = 0;
  AttnTensor q, k, v, out;
  void* lse = nullptr;               // [B, Hq, L] contiguous, in the accumulation type
  const void* bias = nullptr;        // additive, of `bias_dtype`, strides (b, h, i, j) in elements
  DType bias_dtype = DType::Float;
  int64_t bias_sb = 0, bias_sh = 0, bias_si = 0, bias_sj = 0;
  double scale = 1;
  bool causal = false;
  double dropout_p = 0;
  uint64_t seed = 0, offset = 0;
  const uint64_t* philox_dev = nullptr;  // as RandomArgs::philox_dev (a CUDA graph's per-replay Philox state)
  // decoding (split-KV): when set, the keys of each query row are split into chunks of `split_chunk`
  // processed independently (partial max, sum and output per chunk), then combined per row
  void* split_ws = nullptr;          // attention_split_workspace_bytes(...) bytes
  int64_t split_chunk = 0;
  // backward
  AttnTensor dout, dq, dk, dvv;       // dvv: the gradient of v
  void* delta = nullptr;             // [B, Hq, L] scratch in the accumulation type (cuda)
  void* dq_accum = nullptr;          // cuda: attention_backward_workspace_bytes(*this) bytes, from the glue
  bool deterministic = false;        // torch.use_deterministic_algorithms: no atomics (cuda)
};

// The cuda runtime's tensor-core kernels (attention_mma.cu, attention_mma_bwd.cu) take fp16/bf16 with head dims 64
// or 128 (d == dv), no bias, no dropout, no split, and every row of q, k, v, out (and for the backward dout and the
// gradients) 16-byte aligned: cp.async and 16-byte stores. The default; MYTORCH_ATTN_MMA=0 turns them off.
inline bool attention_mma_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MYTORCH_ATTN_MMA");
    return !(v && v[0] == '0');
  }();
  return on;
}
inline bool attention_tensor_cores(const AttentionArgs& a, bool backward) {
  if (!attention_mma_enabled() || a.bias || a.dropout_p > 0 || a.split_ws || a.d != a.dv) return false;
  if ((a.d != 64 && a.d != 128) || (a.dtype != DType::Half && a.dtype != DType::BFloat16)) return false;
  if (a.b * a.hq * a.lq == 0 || a.lk == 0) return false;
  auto aligned = [](const AttnTensor& t) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.sb % 8 == 0 && t.sh % 8 == 0 && t.ss % 8 == 0;
  };
  if (!aligned(a.q) || !aligned(a.k) || !aligned(a.v) || !aligned(a.out)) return false;
  return !backward || (aligned(a.dout) && aligned(a.dq) && aligned(a.dk) && aligned(a.dvv));
}
// The tensor-core backward's dQ accumulator: fp32 [B, Hq, Lq, D], zeroed by its first kernel, summed into with
// atomics by the key tiles (FlashAttention-2's 5-GEMM backward); none for the deterministic kernels.
inline size_t attention_backward_workspace_bytes(const AttentionArgs& a) {
  if (a.deterministic || !attention_tensor_cores(a, true)) return 0;
  return static_cast<size_t>(a.b * a.hq * a.lq * a.d) * sizeof(float);
}

// Decoding: one query row per (batch, head) against a long KV cache splits the keys across blocks.
constexpr int64_t kAttnSplitChunk = 256;
// (not when causal: with PyTorch's top-left alignment a single causal query sees key 0 only)
inline bool attention_use_split(int64_t lq, int64_t lk, bool causal) {
  return lq == 1 && !causal && lk >= 4 * kAttnSplitChunk;
}
inline size_t attention_split_workspace_bytes(int64_t rows, int64_t lk, int64_t dv, bool dbl) {
  const int64_t chunks = (lk + kAttnSplitChunk - 1) / kAttnSplitChunk;
  return static_cast<size_t>(rows * chunks * (dv + 2)) * (dbl ? sizeof(double) : sizeof(float));
}

namespace attn {

// Accumulation type: fp32, or fp64 for double inputs.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T, typename A = acc_t<T>>
MT_HOST_DEVICE inline A ld(const AttnTensor& t, int64_t b, int64_t h, int64_t s, int64_t e) {
  return static_cast<A>(static_cast<const T*>(t.data)[b * t.sb + h * t.sh + s * t.ss + e]);
}

MT_HOST_DEVICE inline float bias_at(const AttentionArgs& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (!a.bias) return 0.f;
  const int64_t off = b * a.bias_sb + h * a.bias_sh + i * a.bias_si + j * a.bias_sj;
  switch (a.bias_dtype) {
    case DType::Half: return static_cast<float>(static_cast<const c10::Half*>(a.bias)[off]);
    case DType::BFloat16: return static_cast<float>(static_cast<const c10::BFloat16*>(a.bias)[off]);
    case DType::Double: return static_cast<float>(static_cast<const double*>(a.bias)[off]);
    default: return static_cast<const float*>(a.bias)[off];
  }
}

// The dropout factor of element (b, h, i, j): 0 when dropped, 1 / (1 - p) when kept (1 without dropout).
MT_HOST_DEVICE inline float dropout_factor(const AttentionArgs& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (a.dropout_p <= 0) return 1.f;
  const uint64_t idx = static_cast<uint64_t>(((b * a.hq + h) * a.lq + i) * a.lk + j);
  uint64_t seed = a.seed, offset = a.offset;
  philox_resolve(a.philox_dev, seed, offset);
  const Philox4x32 r = philox_block(seed, offset, static_cast<int64_t>(idx), 1, PhiloxLane::Attention);
  return u32_to_unit_float(r.c[0]) >= static_cast<float>(a.dropout_p) ? static_cast<float>(1.0 / (1.0 - a.dropout_p))
                                                                      : 0.f;
}

MT_HOST_DEVICE inline int64_t kv_head(const AttentionArgs& a, int64_t h) { return h / (a.hq / a.hkv); }

// The logsumexp of a row from its running max m and sum l (Note [Fused attention]: +inf for a fully masked row,
// whose output is 0).
template <typename A>
MT_HOST_DEVICE inline A row_lse(A m, A l) {
  using std::log;
  return l > A(0) ? m + log(l) : A(INFINITY);
}

} // namespace attn

// Capture: attention's dropout draws from the replay's Philox state (Note [Random numbers in a captured graph]).
inline void capture_replay_fix(AttentionArgs& a) { rt::detail::philox_replay_fix(a.seed, a.offset); }
MT_LAUNCHER(attention_forward, (const AttentionArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(attention_backward, (const AttentionArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
