// CUDA MoE routing family (Note [Fused MoE routing]): the router's top-k a warp per token row (a lane holds the
// scores of experts lane, lane + 32, ..., the k picks are k warp arg-max reductions), and the weighted combine a
// block per token row (threads along the row, the slots summed in order in float32: deterministic, no atomics).
#include "common.cuh"
#include "mytorch/moe.h"
#include "mytorch/ops_math.h"

namespace mytorch::cuda {
namespace {

constexpr int kPerLane = kMoeMaxExperts / 32;
constexpr int kRowsPerBlock = kThreads / 32;

constexpr int64_t kNone = int64_t(1) << 40;  // a lane with no candidate left

// The warp's best (value, index) under moe::before (lanes holding kNone lose to any candidate); every lane gets it.
__device__ inline void warp_best(float* v, int64_t* i) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, *v, off);
    const int64_t j = __shfl_xor_sync(0xffffffffu, *i, off);
    if (j != kNone && (*i == kNone || moe::before(w, j, *v, *i))) {
      *v = w;
      *i = j;
    }
  }
}

// The row's scores into s[] (a lane's experts), the softmax's max and 1 / sum computed across the warp.
template <typename T>
__device__ inline void row_scores(const MoeTopkArgs& a, const T* x, int lane, float* s) {
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t e = lane + 32 * j;
    s[j] = e < a.experts ? float(x[e]) : -INFINITY;
    mx = (s[j] != s[j] || s[j] > mx) ? s[j] : mx;
  }
  float inv = 0.f;
  if (a.score == MoeScore::Softmax) {
    mx = warp_reduce(mx, MaxOp{});
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (lane + 32 * j < a.experts) sum += std::exp(s[j] - mx);
    inv = 1.f / warp_sum(sum);
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) s[j] = lane + 32 * j < a.experts ? moe::score(a.score, s[j], mx, inv) : 0.f;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) moe_topk_kernel(MoeTopkArgs a) {
  __shared__ float staged[kRowsPerBlock][kMoeMaxExperts];  // a row's selection scores, for the group scores
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (const int64_t r : block_stride(a.tokens, kRowsPerBlock, warp)) {
    float s[kPerLane], c[kPerLane];
    row_scores(a, static_cast<const T*>(a.logits) + r * a.ld, lane, s);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t e = lane + 32 * j;
      c[j] = e < a.experts ? s[j] + (a.bias ? a.bias[e] : 0.f) : -INFINITY;
    }
    if (a.n_group > 1) {
      const int64_t per = a.experts / a.n_group;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j < a.experts) staged[warp][lane + 32 * j] = c[j];
      __syncwarp();
      float g = -INFINITY;  // lane g's group score
      if (lane < a.n_group) {
        float m1 = -INFINITY, m2 = -INFINITY;
        for (int64_t e = lane * per; e < (lane + 1) * per; ++e) {
          const float v = staged[warp][e];
          if (v > m1) {
            m2 = m1;
            m1 = v;
          } else if (v > m2) {
            m2 = v;
          }
        }
        g = a.group_top == 2 ? m1 + m2 : m1;
      }
      uint32_t keep = 0;
      for (int i = 0; i < a.topk_group; ++i) {
        float v = (lane < a.n_group && !(keep >> lane & 1u)) ? g : -INFINITY;
        int64_t idx = lane < a.n_group && !(keep >> lane & 1u) ? lane : kNone;
        warp_best(&v, &idx);
        keep |= 1u << idx;
      }
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (!(keep >> ((lane + 32 * j) / per) & 1u)) c[j] = -INFINITY;
      __syncwarp();  // staged is free for the next row
    }
    uint32_t taken = 0;  // bit j: this lane's expert lane + 32 j is picked
    float w = 0.f, z = 0.f;  // lane i < k: pick i's weight; z: the picks' sum
    int64_t id = 0;
    for (int i = 0; i < a.k; ++i) {
      float v = -INFINITY;
      int64_t idx = kNone;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t e = lane + 32 * j;
        if (e < a.experts && !(taken >> j & 1u) && (idx == kNone || moe::before(c[j], e, v, idx))) {
          v = c[j];
          idx = e;
        }
      }
      warp_best(&v, &idx);
      const int owner = static_cast<int>(idx % 32);
      float chosen = 0.f;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane == owner && lane + 32 * j == idx) chosen = s[j];
      chosen = __shfl_sync(0xffffffffu, chosen, owner);
      if (lane == owner) taken |= 1u << (idx / 32);
      if (lane == i) {
        w = chosen;
        id = idx;
      }
      z += chosen;
    }
    if (lane < a.k) {
      const float f = float(a.scaling) / (a.renormalize ? z + 1e-20f : 1.f);
      a.weights[r * a.k + lane] = w * f;
      a.ids[r * a.k + lane] = id;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) moe_topk_backward_kernel(MoeTopkArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (const int64_t r : block_stride(a.tokens, kRowsPerBlock, warp)) {
    float s[kPerLane];
    row_scores(a, static_cast<const T*>(a.logits) + r * a.ld, lane, s);
    // lane i < k: pick i's id, incoming gradient and score (from its owner lane)
    int64_t id = lane < a.k ? a.ids_in[r * a.k + lane] : -1;
    if (id >= a.experts) id = -1;  // (ids from elsewhere than the forward: skipped)
    const float g = lane < a.k && id >= 0 ? a.dweights[r * a.k + lane] : 0.f;
    float si = 0.f;
    for (int i = 0; i < a.k; ++i) {
      const int64_t e = __shfl_sync(0xffffffffu, id, i);
      float v = 0.f;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (e >= 0 && lane + 32 * j == e) v = s[j];
      v = __shfl_sync(0xffffffffu, v, e >= 0 ? static_cast<int>(e % 32) : 0);
      if (lane == i) si = e >= 0 ? v : 0.f;
    }
    const float z = warp_sum(si) + 1e-20f, gz = warp_sum(g * si), sc = float(a.scaling);
    const float dsi = id < 0 ? 0.f : (a.renormalize ? sc * (g / z - gz / (z * z)) : sc * g);
    const float dot = a.score == MoeScore::Softmax ? warp_sum(dsi * si) : 0.f;
    float ds[kPerLane] = {};
    for (int i = 0; i < a.k; ++i) {
      const int64_t e = __shfl_sync(0xffffffffu, id, i);
      const float d = __shfl_sync(0xffffffffu, dsi, i);
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + 32 * j == e) ds[j] += d;
    }
    T* dx = static_cast<T*>(a.dlogits) + r * a.experts;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t e = lane + 32 * j;
      if (e < a.experts) dx[e] = T(a.score == MoeScore::Softmax ? s[j] * (ds[j] - dot) : ds[j] * s[j] * (1.f - s[j]));
    }
  }
}

// A token's k positions and weights read once into shared memory (not by every thread of the row), a slot out of
// range recorded and skipped (position -1).
__device__ inline void stage_slots(const MoeCombineArgs& a, int64_t t, int64_t* pos, float* w) {
  __syncthreads();  // the previous row's slots are no longer read
  for (int64_t s = threadIdx.x; s < a.k; s += blockDim.x) {
    pos[s] = moe::slot_row(a, t, s);
    w[s] = a.weights ? a.weights[t * a.k + s] : 1.f;
  }
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kThreads) moe_combine_kernel(MoeCombineArgs a) {
  using A = ew::opmath_t<T>;
  __shared__ int64_t pos[kMoeMaxTopk];
  __shared__ float w[kMoeMaxTopk];
  for (const int64_t t : block_stride(a.tokens)) {
    stage_slots(a, t, pos, w);
    for (int64_t j = threadIdx.x; j < a.cols; j += blockDim.x) {
      A acc = 0;
      for (int64_t s = 0; s < a.k; ++s)
        if (pos[s] >= 0) acc += A(w[s]) * A(static_cast<const T*>(a.rows)[pos[s] * a.cols + j]);
      static_cast<T*>(a.out)[t * a.cols + j] = T(acc);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) moe_combine_backward_kernel(MoeCombineArgs a) {
  using A = ew::opmath_t<T>;
  __shared__ float smem[32];
  __shared__ int64_t pos[kMoeMaxTopk];
  __shared__ float w[kMoeMaxTopk];
  for (const int64_t t : block_stride(a.tokens)) {
    stage_slots(a, t, pos, w);
    const T* d = static_cast<const T*>(a.dout) + t * a.cols;
    for (int64_t s = 0; s < a.k; ++s) {
      const int64_t p = pos[s];
      if (p < 0) {
        if (a.dweights && threadIdx.x == 0) a.dweights[t * a.k + s] = 0.f;
        continue;
      }
      float dot = 0.f;
      for (int64_t j = threadIdx.x; j < a.cols; j += blockDim.x) {
        const A dj = A(d[j]);
        if (a.drows) static_cast<T*>(a.drows)[p * a.cols + j] = T(A(w[s]) * dj);
        if (a.dweights) dot += float(dj * A(static_cast<const T*>(a.rows)[p * a.cols + j]));
      }
      if (a.dweights) {
        dot = block_reduce(dot, smem, SumOp{}, 0.f);
        if (threadIdx.x == 0) a.dweights[t * a.k + s] = dot;
      }
    }
  }
}

} // namespace

rt::Status moe_topk(const MoeTopkArgs& a, rt::Stream stream) {
  if (rt::Status st = moe_check_topk(a); st != rt::Status::Success) return st;
  if (a.tokens == 0) return rt::Status::Success;
  const unsigned grid = grid_blocks(a.tokens, kRowsPerBlock);
  const cudaStream_t s = native(stream);
  const bool ok =
      dispatch_floating(a.dtype, [&](auto tag) { moe_topk_kernel<decltype(tag)><<<grid, kThreads, 0, s>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "moe_topk: expected floating logits");
  return check_launch("moe_topk");
}

rt::Status moe_topk_backward(const MoeTopkArgs& a, rt::Stream stream) {
  if (rt::Status st = moe_check_topk(a); st != rt::Status::Success) return st;
  if (a.tokens == 0) return rt::Status::Success;
  const unsigned grid = grid_blocks(a.tokens, kRowsPerBlock);
  const cudaStream_t s = native(stream);
  const bool ok = dispatch_floating(
      a.dtype, [&](auto tag) { moe_topk_backward_kernel<decltype(tag)><<<grid, kThreads, 0, s>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "moe_topk: expected floating logits");
  return check_launch("moe_topk_backward");
}

rt::Status moe_combine(const MoeCombineArgs& a, rt::Stream stream) {
  if (a.tokens == 0 || a.cols == 0) return rt::Status::Success;
  if (a.k > kMoeMaxTopk) return rt::report(rt::Status::InvalidValue, "moe_combine: expected at most 32 slots a token");
  const unsigned grid = grid_blocks(a.tokens);
  const cudaStream_t s = native(stream);
  const bool ok =
      dispatch_floating(a.dtype, [&](auto tag) { moe_combine_kernel<decltype(tag)><<<grid, kThreads, 0, s>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "moe_combine: expected a floating dtype");
  return check_launch("moe_combine");
}

rt::Status moe_combine_backward(const MoeCombineArgs& a, rt::Stream stream) {
  if (a.tokens == 0 || a.cols == 0) return rt::Status::Success;
  if (a.k > kMoeMaxTopk) return rt::report(rt::Status::InvalidValue, "moe_combine: expected at most 32 slots a token");
  const unsigned grid = grid_blocks(a.tokens);
  const cudaStream_t s = native(stream);
  const bool ok = dispatch_floating(
      a.dtype, [&](auto tag) { moe_combine_backward_kernel<decltype(tag)><<<grid, kThreads, 0, s>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "moe_combine: expected a floating dtype");
  return check_launch("moe_combine_backward");
}

} // namespace mytorch::cuda
