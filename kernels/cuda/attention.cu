// CUDA fused attention (Note [Fused attention]): the baseline kernels — a warp per query row for the
// forward (online softmax over the keys, the row's output accumulated in registers) and for dQ, a warp
// per key row for dK/dV (summing its query heads and rows in a fixed order). Correct for every supported
// input (head dims up to 256, any lengths, causal, bias, GQA, dropout), on CUDA cores; the tensor-core
// FlashAttention kernels (mma.sync, then wgmma/TMA on sm_90a) replace them on the performance path.
// Decoding (one query row against a long cache) splits the keys across warps and combines per row.
#include "common.cuh"
#include "mytorch/attention.h"

namespace mytorch::cuda {
namespace {

constexpr int kMaxPerLane = 8;  // head dims up to 256

template <typename T, typename A>
__device__ inline void load_row(const AttnTensor& t, int64_t b, int64_t h, int64_t s, int64_t n, int lane, A* r) {
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = lane + 32 * k;
    r[k] = e < n ? attn::ld<T, A>(t, b, h, s, e) : A(0);
  }
}

template <typename T, typename A>
__device__ inline A dot_row(const A* r, const AttnTensor& t, int64_t b, int64_t h, int64_t s, int64_t n, int lane) {
  A p = 0;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = lane + 32 * k;
    if (e < n) p += r[k] * attn::ld<T, A>(t, b, h, s, e);
  }
  return warp_sum(p);
}

template <typename T>
__global__ void forward_kernel(AttentionArgs a) {
  using A = attn::acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.b * a.hq * a.lq, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t i = row % a.lq, h = (row / a.lq) % a.hq, b = row / (a.lq * a.hq), hk = attn::kv_head(a, h);
    A q[kMaxPerLane], acc[kMaxPerLane];
    load_row<T>(a.q, b, h, i, a.d, lane, q);
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) acc[k] = A(0);
    A m = -INFINITY, l = 0;
    const int64_t end = a.causal ? (a.lk < i + 1 ? a.lk : i + 1) : a.lk;
    for (int64_t j = 0; j < end; ++j) {
      const A sc = dot_row<T>(q, a.k, b, hk, j, a.d, lane) * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j);
      const A m_new = sc > m ? sc : m;
      if (m_new == -INFINITY) continue;
      const A corr = exp(m - m_new), p = exp(sc - m_new);
      l = l * corr + p;
      const A pz = p * static_cast<A>(attn::dropout_factor(a, b, h, i, j));
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = lane + 32 * k;
        acc[k] = acc[k] * corr + (e < a.dv && pz != A(0) ? pz * attn::ld<T, A>(a.v, b, hk, j, e) : A(0));
      }
      m = m_new;
    }
    T* o = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh + i * a.out.ss;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < a.dv) o[e] = static_cast<T>(l > A(0) ? acc[k] / l : A(0));  // fully masked: 0
    }
    if (lane == 0) static_cast<A*>(a.lse)[row] = attn::row_lse(m, l);
  }
}

template <typename T>
__global__ void dq_kernel(AttentionArgs a) {
  using A = attn::acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.b * a.hq * a.lq, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t i = row % a.lq, h = (row / a.lq) % a.hq, b = row / (a.lq * a.hq), hk = attn::kv_head(a, h);
    A q[kMaxPerLane], g[kMaxPerLane], dq[kMaxPerLane];
    load_row<T>(a.q, b, h, i, a.d, lane, q);
    load_row<T>(a.dout, b, h, i, a.dv, lane, g);
    const A delta = dot_row<T>(g, a.out, b, h, i, a.dv, lane);
    if (lane == 0) static_cast<A*>(a.delta)[row] = delta;
    const A lse = static_cast<const A*>(a.lse)[row];
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) dq[k] = A(0);
    const int64_t end = a.causal ? (a.lk < i + 1 ? a.lk : i + 1) : a.lk;
    for (int64_t j = 0; j < end; ++j) {
      const A p =
          exp(dot_row<T>(q, a.k, b, hk, j, a.d, lane) * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j) - lse);
      const A dp = dot_row<T>(g, a.v, b, hk, j, a.dv, lane);
      const A ds = p * (static_cast<A>(attn::dropout_factor(a, b, h, i, j)) * dp - delta) * static_cast<A>(a.scale);
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = lane + 32 * k;
        if (e < a.d) dq[k] += ds * attn::ld<T, A>(a.k, b, hk, j, e);
      }
    }
    T* out = static_cast<T*>(a.dq.data) + b * a.dq.sb + h * a.dq.sh + i * a.dq.ss;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < a.d) out[e] = static_cast<T>(dq[k]);
    }
  }
}

template <typename T>
__global__ void dkv_kernel(AttentionArgs a) {
  using A = attn::acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.b * a.hkv * a.lk, warps = int64_t(gridDim.x) * blockDim.x / 32, group = a.hq / a.hkv;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t j = row % a.lk, hk = (row / a.lk) % a.hkv, b = row / (a.lk * a.hkv);
    A k[kMaxPerLane], v[kMaxPerLane], dk[kMaxPerLane], dv[kMaxPerLane];
    load_row<T>(a.k, b, hk, j, a.d, lane, k);
    load_row<T>(a.v, b, hk, j, a.dv, lane, v);
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) dk[e] = dv[e] = A(0);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t i = a.causal ? j : 0; i < a.lq; ++i) {
        const int64_t qrow = (b * a.hq + h) * a.lq + i;
        const A p = exp(dot_row<T>(k, a.q, b, h, i, a.d, lane) * static_cast<A>(a.scale) +
                        attn::bias_at(a, b, h, i, j) - static_cast<const A*>(a.lse)[qrow]);
        const A z = static_cast<A>(attn::dropout_factor(a, b, h, i, j));
        const A dp = dot_row<T>(v, a.dout, b, h, i, a.dv, lane);
        const A ds = p * (z * dp - static_cast<const A*>(a.delta)[qrow]) * static_cast<A>(a.scale);
#pragma unroll
        for (int e = 0; e < kMaxPerLane; ++e) {
          const int64_t c = lane + 32 * e;
          if (c < a.dv) dv[e] += z * p * attn::ld<T, A>(a.dout, b, h, i, c);
          if (c < a.d) dk[e] += ds * attn::ld<T, A>(a.q, b, h, i, c);
        }
      }
    }
    T* dko = static_cast<T*>(a.dk.data) + b * a.dk.sb + hk * a.dk.sh + j * a.dk.ss;
    T* dvo = static_cast<T*>(a.dvv.data) + b * a.dvv.sb + hk * a.dvv.sh + j * a.dvv.ss;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int64_t c = lane + 32 * e;
      if (c < a.d) dko[c] = static_cast<T>(dk[e]);
      if (c < a.dv) dvo[c] = static_cast<T>(dv[e]);
    }
  }
}

// Decoding, first pass: a warp per (row, chunk of keys) writes (m, l, unnormalised output).
template <typename T>
__global__ void split_kernel(AttentionArgs a, int64_t chunks) {
  using A = attn::acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t items = a.b * a.hq * chunks, warps = int64_t(gridDim.x) * blockDim.x / 32, stride = a.dv + 2;
  for (int64_t it = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; it < items; it += warps) {
    const int64_t c = it % chunks, row = it / chunks, h = row % a.hq, b = row / a.hq, hk = attn::kv_head(a, h);
    A q[kMaxPerLane], acc[kMaxPerLane];
    load_row<T>(a.q, b, h, 0, a.d, lane, q);
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) acc[k] = A(0);
    A m = -INFINITY, l = 0;
    const int64_t j1 = a.lk < (c + 1) * a.split_chunk ? a.lk : (c + 1) * a.split_chunk;
    for (int64_t j = c * a.split_chunk; j < j1; ++j) {
      const A sc = dot_row<T>(q, a.k, b, hk, j, a.d, lane) * static_cast<A>(a.scale) + attn::bias_at(a, b, h, 0, j);
      const A m_new = sc > m ? sc : m;
      if (m_new == -INFINITY) continue;
      const A corr = exp(m - m_new), p = exp(sc - m_new);
      l = l * corr + p;
      const A pz = p * static_cast<A>(attn::dropout_factor(a, b, h, 0, j));
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = lane + 32 * k;
        acc[k] = acc[k] * corr + (e < a.dv && pz != A(0) ? pz * attn::ld<T, A>(a.v, b, hk, j, e) : A(0));
      }
      m = m_new;
    }
    A* part = static_cast<A*>(a.split_ws) + it * stride;
    if (lane == 0) {
      part[0] = m;
      part[1] = l;
    }
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < a.dv) part[2 + e] = acc[k];
    }
  }
}

// Decoding, second pass: a warp per row combines its chunks.
template <typename T>
__global__ void combine_kernel(AttentionArgs a, int64_t chunks) {
  using A = attn::acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.b * a.hq, warps = int64_t(gridDim.x) * blockDim.x / 32, stride = a.dv + 2;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const A* ws = static_cast<const A*>(a.split_ws) + row * chunks * stride;
    A mx = -INFINITY;
    for (int64_t c = 0; c < chunks; ++c) mx = ws[c * stride] > mx ? ws[c * stride] : mx;
    A l = 0, o[kMaxPerLane];
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) o[k] = A(0);
    for (int64_t c = 0; c < chunks; ++c) {
      const A* part = ws + c * stride;
      if (part[0] == -INFINITY) continue;
      const A w = exp(part[0] - mx);
      l += part[1] * w;
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t e = lane + 32 * k;
        if (e < a.dv) o[k] += part[2 + e] * w;
      }
    }
    const int64_t h = row % a.hq, b = row / a.hq;
    T* out = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < a.dv) out[e] = static_cast<T>(l > A(0) ? o[k] / l : A(0));  // fully masked: 0
    }
    if (lane == 0) static_cast<A*>(a.lse)[row] = attn::row_lse(mx, l);
  }
}

// A warp per row.
unsigned warps_grid(int64_t rows) { return grid_blocks(rows, kThreads / 32); }

} // namespace

bool attention_forward_mma(const AttentionArgs& a, rt::Stream stream, rt::Status* st);   // attention_mma.cu
bool attention_backward_mma(const AttentionArgs& a, rt::Stream stream, rt::Status* st);  // attention_mma_bwd.cu

rt::Status attention_forward(const AttentionArgs& a, rt::Stream stream) {
  rt::Status mma_status = rt::Status::Success;
  if (attention_forward_mma(a, stream, &mma_status)) return mma_status;
  if (a.d > 32 * kMaxPerLane || a.dv > 32 * kMaxPerLane)
    return rt::report(rt::Status::InvalidValue, "attention: head dimensions above 256 are not supported");
  const int64_t rows = a.b * a.hq * a.lq;
  if (rows == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.split_ws) {
      const int64_t chunks = (a.lk + a.split_chunk - 1) / a.split_chunk;
      split_kernel<T><<<warps_grid(rows * chunks), kThreads, 0, native(stream)>>>(a, chunks);
      combine_kernel<T><<<warps_grid(rows), kThreads, 0, native(stream)>>>(a, chunks);
    } else {
      forward_kernel<T><<<warps_grid(rows), kThreads, 0, native(stream)>>>(a);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
  return check_launch("attention forward");
}

rt::Status attention_backward(const AttentionArgs& a, rt::Stream stream) {
  rt::Status mma_status = rt::Status::Success;
  if (attention_backward_mma(a, stream, &mma_status)) return mma_status;
  if (a.d > 32 * kMaxPerLane || a.dv > 32 * kMaxPerLane)
    return rt::report(rt::Status::InvalidValue, "attention: head dimensions above 256 are not supported");
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.b * a.hq * a.lq > 0) dq_kernel<T><<<warps_grid(a.b * a.hq * a.lq), kThreads, 0, native(stream)>>>(a);
    if (a.b * a.hkv * a.lk > 0) dkv_kernel<T><<<warps_grid(a.b * a.hkv * a.lk), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
  return check_launch("attention backward");
}

} // namespace mytorch::cuda
