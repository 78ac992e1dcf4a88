// Mixture-of-experts routing family (Note [Fused MoE routing]): the router's top-k and the weighted combine of the
// experts' rows back into token order. The per-row math is here once, shared by the CUDA kernels (cuda/moe.cu) and
// their sim twins (sim/moe.cpp); the token permutation itself is a stable sort of the expert ids, a histogram and a
// scan (the native sort, histc and cumsum kernels) and a row gather (index_select).
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/device_error.h"
#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

// Note [Fused MoE routing]
// moe_topk, per token row of router logits x over E experts:
//   s = softmax(x) or sigmoid(x) (float32);  c = s + bias (bias: DeepSeek-V3's expert bias, selection only);
//   with groups (n_group > 1): a group's score is the max of its c (group_top 1, DeepSeek-V2) or the sum of its
//   two largest (group_top 2, DeepSeek-V3); the topk_group best groups stay, the others' c become -inf;
//   ids = the k largest c (the lower id first among equals), w = s[ids], divided by their sum (+1e-20) when
//   renormalize, times scaling.
// The backward takes dL/dw to dL/dx through w's dependence on s (the ids are constants), one row at a time:
//   ds_j = scaling (g_j / Z - sum_i g_i s_i / Z^2) for the chosen j (Z their sum; without renormalize g_j scaling);
//   softmax: dx = s (ds - sum_j ds_j s_j); sigmoid: dx = ds s (1 - s).
// moe_combine: out[t] = sum_s w[t, s] rows[pos[t, s]] (w absent: 1), accumulated in float32 in slot order and
// rounded once: deterministic, no atomics (each output row is one thread block's). Its backward gives
// drows[pos[t, s]] = w[t, s] dout[t] (pos is a permutation: every row written once) and
// dw[t, s] = dout[t] . rows[pos[t, s]]. The permutation's own backward is a combine without weights.
enum class MoeScore : int { Softmax = 0, Sigmoid = 1 };

constexpr int kMoeMaxExperts = 512;  // the router kernels hold a row's scores in registers: 16 per lane
constexpr int kMoeMaxTopk = 32;

struct MoeTopkArgs {
  const void* logits = nullptr;  // [tokens][experts], rows at stride ld
  int64_t tokens = 0, experts = 0, ld = 0;
  DType dtype = DType::Float;
  const float* bias = nullptr;  // [experts] or null
  int k = 1, n_group = 1, topk_group = 1, group_top = 1;
  MoeScore score = MoeScore::Softmax;
  bool renormalize = true;
  double scaling = 1.0;
  float* weights = nullptr;  // [tokens][k]
  int64_t* ids = nullptr;    // [tokens][k]
  // backward: dL/dweights in, dL/dlogits out (the logits' dtype, rows at stride experts)
  const float* dweights = nullptr;
  const int64_t* ids_in = nullptr;
  void* dlogits = nullptr;
};

struct MoeCombineArgs {
  const void* rows = nullptr;  // [S][cols]: the experts' outputs in permuted order
  const int64_t* pos = nullptr;  // [tokens][k]: the permuted row of each (token, slot), in [0, num_rows)
  const float* weights = nullptr;  // [tokens][k] or null (1)
  void* out = nullptr;  // forward: [tokens][cols]
  int64_t tokens = 0, k = 1, cols = 0, num_rows = 0;
  DType dtype = DType::Float;
  ErrorSite error;  // a pos outside [0, num_rows): recorded, the slot skipped
  // backward: dout [tokens][cols] in; drows [S][cols] and dweights [tokens][k] out
  const void* dout = nullptr;
  void* drows = nullptr;
  float* dweights = nullptr;
};

namespace moe {

MT_HOST_DEVICE inline float score(MoeScore s, float x, float mx, float inv_sum) {
  return s == MoeScore::Sigmoid ? 1.f / (1.f + std::exp(-x)) : std::exp(x - mx) * inv_sum;
}
// Whether (v, i) ranks before (w, j): the larger value, the lower index among equals; NaN after every number (a
// strict total order, so a warp's reduction and a sequential scan pick the same entry).
MT_HOST_DEVICE inline bool before(float v, int64_t i, float w, int64_t j) {
  const bool vn = v != v, wn = w != w;
  if (vn || wn) return vn == wn ? i < j : wn;
  return v > w || (v == w && i < j);
}

// The permuted row of (token t, slot s), or -1 (the error recorded) for a position outside the rows.
// A slot's row; -1 is a masked slot (DeepEP's convention: a token with fewer experts here than k), skipped
// with a zero weight gradient; any other position outside the rows is recorded as an error and skipped.
MT_HOST_DEVICE inline int64_t slot_row(const MoeCombineArgs& a, int64_t t, int64_t s) {
  const int64_t p = a.pos[t * a.k + s];
  if (p == -1) return -1;
  if (p < 0 || p >= a.num_rows) {
    record_error(a.error, p);
    return -1;
  }
  return p;
}

} // namespace moe

// The router launchers' checks of what the glue passes (both runtimes).
inline rt::Status moe_check_topk(const MoeTopkArgs& a) {
  if (a.experts < 1 || a.experts > kMoeMaxExperts || a.k < 1 || a.k > a.experts || a.k > kMoeMaxTopk)
    return rt::report(rt::Status::InvalidValue, "moe_topk: expected 1 <= k <= experts <= 512, k <= 32");
  if (a.n_group < 1 || a.n_group > 32 || a.experts % a.n_group != 0 || a.topk_group < 1 || a.topk_group > a.n_group)
    return rt::report(rt::Status::InvalidValue,
                      "moe_topk: expected n_group <= 32 dividing the experts, topk_group <= n_group");
  return rt::Status::Success;
}

MT_LAUNCHER(moe_topk, (const MoeTopkArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(moe_topk_backward, (const MoeTopkArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(moe_combine, (const MoeCombineArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(moe_combine_backward, (const MoeCombineArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
