// CUDA fused attention backward on tensor cores (Note [Fused attention]): FlashAttention-2's backward with
// mma.sync.m16n8k16, as three kernels so that nothing needs atomics (deterministic):
//   delta:  D_i = dO_i . O_i, a warp per query row;
//   dK/dV:  a block per (batch, kv head, 64 keys), 4 warps x 16 keys; for every query head of the group
//           and every 64-query tile it recomputes S^T = K Q^T and P^T from the logsumexp, then
//           dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q;
//   dQ:     a block per (batch, head, 64 queries), 4 warps x 16 queries, over the key tiles:
//           S = Q K^T, P, dP = dO V^T, dS = P (dP - D), dQ += dS K.
// C fragments of two n-tiles are reused as the A fragment of one k-step (as in the forward). fp16/bf16,
// head dims 64 and 128 (d == dv; the four tiles live in dynamic shared memory, 64 KB at d = 128, opted in
// per kernel), no bias, no dropout; opt-in with the forward (MYTORCH_ATTN_MMA=1).
#include "common.cuh"
#include "mma.cuh"
#include "mytorch/attention.h"

namespace mytorch::cuda {

bool attention_mma_enabled();  // attention_mma.cu

namespace {

constexpr int kTile = 64, kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;

// A fragment (16 rows x 16 k) from a row-major shared tile: rows r0.., columns k0..
template <typename T, int LD>
__device__ inline void a_frag(const T (*m)[LD], int r0, int k0, int g, int tig, uint32_t* f) {
  f[0] = pack(m[r0 + g][k0 + tig * 2], m[r0 + g][k0 + tig * 2 + 1]);
  f[1] = pack(m[r0 + g + 8][k0 + tig * 2], m[r0 + g + 8][k0 + tig * 2 + 1]);
  f[2] = pack(m[r0 + g][k0 + tig * 2 + 8], m[r0 + g][k0 + tig * 2 + 9]);
  f[3] = pack(m[r0 + g + 8][k0 + tig * 2 + 8], m[r0 + g + 8][k0 + tig * 2 + 9]);
}
// B fragment (16 k x 8 n) where element (k, n) = m[n0 + n][k0 + k] (k runs along a stored row).
template <typename T, int LD>
__device__ inline void b_frag_rows(const T (*m)[LD], int n0, int k0, int g, int tig, uint32_t* f) {
  f[0] = pack(m[n0 + g][k0 + tig * 2], m[n0 + g][k0 + tig * 2 + 1]);
  f[1] = pack(m[n0 + g][k0 + tig * 2 + 8], m[n0 + g][k0 + tig * 2 + 9]);
}
// B fragment (16 k x 8 n) where element (k, n) = m[k0 + k][n0 + n] (k runs down a stored column).
template <typename T, int LD>
__device__ inline void b_frag_cols(const T (*m)[LD], int k0, int n0, int g, int tig, uint32_t* f) {
  f[0] = pack(m[k0 + tig * 2][n0 + g], m[k0 + tig * 2 + 1][n0 + g]);
  f[1] = pack(m[k0 + tig * 2 + 8][n0 + g], m[k0 + tig * 2 + 9][n0 + g]);
}
// The A fragment of k-step j from the C fragments of n-tiles 2j and 2j+1 (rounded to T).
template <typename T>
__device__ inline void c_to_a(const float (*c)[4], int j, uint32_t* f) {
  f[0] = pack(T(c[2 * j][0]), T(c[2 * j][1]));
  f[1] = pack(T(c[2 * j][2]), T(c[2 * j][3]));
  f[2] = pack(T(c[2 * j + 1][0]), T(c[2 * j + 1][1]));
  f[3] = pack(T(c[2 * j + 1][2]), T(c[2 * j + 1][3]));
}

// rows [r0, r0 + kTile) of a [len, D] matrix with row stride ss into shared memory, zero past `len`.
template <typename T, int D>
__device__ inline void stage(T (*dst)[D], const T* src, int64_t r0, int64_t len, int64_t ss) {
  const T zero = T(0.f);
  for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
    const int r = idx / D, c = idx % D;
    dst[r][c] = r0 + r < len ? src[(r0 + r) * ss + c] : zero;
  }
}

template <typename T>
__global__ void delta_kernel(AttentionArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.b * a.hq * a.lq, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t i = row % a.lq, h = (row / a.lq) % a.hq, b = row / (a.lq * a.hq);
    float s = 0.f;
    for (int64_t e = lane; e < a.dv; e += 32)
      s += attn::ld<T, float>(a.dout, b, h, i, e) * attn::ld<T, float>(a.out, b, h, i, e);
    s = warp_sum(s);
    if (lane == 0) static_cast<float*>(a.delta)[row] = s;
  }
}

// Dynamic shared memory of the dK/dV and dQ kernels: four [kTile][D] tiles (and, for dK/dV, the query
// tile's scaled logsumexp and delta).
template <typename T, int D>
constexpr size_t tiles_bytes() {
  return 4 * sizeof(T) * kTile * D;
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) dkdv_kernel(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T(*ks)[D] = reinterpret_cast<T(*)[D]>(smem);
  T(*vs)[D] = ks + kTile;
  T(*qs)[D] = vs + kTile;
  T(*dos)[D] = qs + kTile;
  float* lse2 = reinterpret_cast<float*>(smem + tiles_bytes<T, D>());
  float* dl = lse2 + kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
  const int64_t tiles_k = (a.lk + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x / tiles_k, k0 = (blockIdx.x % tiles_k) * kTile;
  const int64_t b = bh / a.hkv, hk = bh % a.hkv, group = a.hq / a.hkv;
  const float scale_log2 = static_cast<float>(a.scale) * kLog2e;
  stage<T, D>(ks, static_cast<const T*>(a.k.data) + b * a.k.sb + hk * a.k.sh, k0, a.lk, a.k.ss);
  stage<T, D>(vs, static_cast<const T*>(a.v.data) + b * a.v.sb + hk * a.v.sh, k0, a.lk, a.v.ss);
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;
  const int kr = warp * 16;  // this warp's keys within the tile
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const T* qp = static_cast<const T*>(a.q.data) + b * a.q.sb + h * a.q.sh;
    const T* dop = static_cast<const T*>(a.dout.data) + b * a.dout.sb + h * a.dout.sh;
    const int64_t q_begin = a.causal ? (k0 / kTile) * kTile : 0;  // queries before the key tile see none of it
    for (int64_t q0 = q_begin; q0 < a.lq; q0 += kTile) {
      __syncthreads();
      stage<T, D>(qs, qp, q0, a.lq, a.q.ss);
      stage<T, D>(dos, dop, q0, a.lq, a.dout.ss);
      for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
        const int64_t row = (b * a.hq + h) * a.lq + q0 + r;
        const bool in = q0 + r < a.lq;
        lse2[r] = in ? static_cast<const float*>(a.lse)[row] * kLog2e : INFINITY;
        dl[r] = in ? static_cast<const float*>(a.delta)[row] : 0.f;
      }
      __syncthreads();
      // S^T (16 keys x 64 queries) and dP^T = V dO^T, in C fragments.
      float st[kTile / 8][4], dpt[kTile / 8][4];
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) st[n][e] = dpt[n][e] = 0.f;
#pragma unroll
        for (int s = 0; s < D / 16; ++s) {
          uint32_t af[4], bf[2];
          a_frag<T, D>(ks, kr, s * 16, g, tig, af);
          b_frag_rows<T, D>(qs, n * 8, s * 16, g, tig, bf);
          Mma<T>::run(st[n], af, bf);
          a_frag<T, D>(vs, kr, s * 16, g, tig, af);
          b_frag_rows<T, D>(dos, n * 8, s * 16, g, tig, bf);
          Mma<T>::run(dpt[n], af, bf);
        }
      }
      // P^T and dS^T = P^T (dP^T - D), masked (key or query out of range, causal).
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qc = n * 8 + tig * 2 + (e & 1);
          const int64_t key = k0 + kr + g + (e >= 2 ? 8 : 0), query = q0 + qc;
          const bool live = key < a.lk && query < a.lq && !(a.causal && key > query);
          const float p = live ? exp2f(st[n][e] * scale_log2 - lse2[qc]) : 0.f;
          st[n][e] = p;
          dpt[n][e] = p * (dpt[n][e] - dl[qc]);
        }
      }
      // dV += P^T dO and dK += dS^T Q: k-steps over the 64 queries.
#pragma unroll
      for (int j = 0; j < kTile / 16; ++j) {
        uint32_t pf[4], sf[4];
        c_to_a<T>(st, j, pf);
        c_to_a<T>(dpt, j, sf);
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          uint32_t bf[2];
          b_frag_cols<T, D>(dos, j * 16, n * 8, g, tig, bf);
          Mma<T>::run(dv[n], pf, bf);
          b_frag_cols<T, D>(qs, j * 16, n * 8, g, tig, bf);
          Mma<T>::run(dk[n], sf, bf);
        }
      }
    }
  }
  T* dkp = static_cast<T*>(a.dk.data) + b * a.dk.sb + hk * a.dk.sh;
  T* dvp = static_cast<T*>(a.dvv.data) + b * a.dvv.sb + hk * a.dvv.sh;
  const float sc = static_cast<float>(a.scale);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t key = k0 + kr + g + r * 8;
    if (key >= a.lk) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int c = n * 8 + tig * 2;
      dkp[key * a.dk.ss + c] = T(dk[n][2 * r] * sc);
      dkp[key * a.dk.ss + c + 1] = T(dk[n][2 * r + 1] * sc);
      dvp[key * a.dvv.ss + c] = T(dv[n][2 * r]);
      dvp[key * a.dvv.ss + c + 1] = T(dv[n][2 * r + 1]);
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) dq_kernel(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  T(*qs)[D] = reinterpret_cast<T(*)[D]>(smem);
  T(*dos)[D] = qs + kTile;
  T(*ks)[D] = dos + kTile;
  T(*vs)[D] = ks + kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
  const int64_t tiles_q = (a.lq + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x / tiles_q, q0 = (blockIdx.x % tiles_q) * kTile;
  const int64_t b = bh / a.hq, h = bh % a.hq, hk = attn::kv_head(a, h);
  const float scale_log2 = static_cast<float>(a.scale) * kLog2e;
  stage<T, D>(qs, static_cast<const T*>(a.q.data) + b * a.q.sb + h * a.q.sh, q0, a.lq, a.q.ss);
  stage<T, D>(dos, static_cast<const T*>(a.dout.data) + b * a.dout.sb + h * a.dout.sh, q0, a.lq, a.dout.ss);
  const int qr = warp * 16;
  float lse2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t query = q0 + qr + g + r * 8;
    const int64_t row = (b * a.hq + h) * a.lq + query;
    lse2[r] = query < a.lq ? static_cast<const float*>(a.lse)[row] * kLog2e : INFINITY;
    dl[r] = query < a.lq ? static_cast<const float*>(a.delta)[row] : 0.f;
  }
  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
  const T* kp = static_cast<const T*>(a.k.data) + b * a.k.sb + hk * a.k.sh;
  const T* vp = static_cast<const T*>(a.v.data) + b * a.v.sb + hk * a.v.sh;
  int64_t k_end = a.lk;
  if (a.causal) k_end = q0 + kTile < a.lk ? q0 + kTile : a.lk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
    __syncthreads();
    stage<T, D>(ks, kp, k0, a.lk, a.k.ss);
    stage<T, D>(vs, vp, k0, a.lk, a.v.ss);
    __syncthreads();
    float s[kTile / 8][4], dp[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
      for (int st = 0; st < D / 16; ++st) {
        uint32_t af[4], bf[2];
        a_frag<T, D>(qs, qr, st * 16, g, tig, af);
        b_frag_rows<T, D>(ks, n * 8, st * 16, g, tig, bf);
        Mma<T>::run(s[n], af, bf);
        a_frag<T, D>(dos, qr, st * 16, g, tig, af);
        b_frag_rows<T, D>(vs, n * 8, st * 16, g, tig, bf);
        Mma<T>::run(dp[n], af, bf);
      }
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const int64_t key = k0 + n * 8 + tig * 2 + (e & 1), query = q0 + qr + g + r * 8;
        const bool live = key < a.lk && query < a.lq && !(a.causal && key > query);
        const float p = live ? exp2f(s[n][e] * scale_log2 - lse2[r]) : 0.f;
        dp[n][e] = p * (dp[n][e] - dl[r]);
      }
    }
#pragma unroll
    for (int j = 0; j < kTile / 16; ++j) {
      uint32_t sf[4];
      c_to_a<T>(dp, j, sf);
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        uint32_t bf[2];
        b_frag_cols<T, D>(ks, j * 16, n * 8, g, tig, bf);
        Mma<T>::run(dq[n], sf, bf);
      }
    }
  }
  T* dqp = static_cast<T*>(a.dq.data) + b * a.dq.sb + h * a.dq.sh;
  const float sc = static_cast<float>(a.scale);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t query = q0 + qr + g + r * 8;
    if (query >= a.lq) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int c = n * 8 + tig * 2;
      dqp[query * a.dq.ss + c] = T(dq[n][2 * r] * sc);
      dqp[query * a.dq.ss + c + 1] = T(dq[n][2 * r + 1] * sc);
    }
  }
}

template <typename T, int D>
rt::Status launch(const AttentionArgs& a, cudaStream_t s) {
  const int64_t rows = a.b * a.hq * a.lq;
  delta_kernel<T><<<static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads), kThreads, 0, s>>>(a);
  const int64_t kblocks = a.b * a.hkv * ((a.lk + kTile - 1) / kTile);
  const int64_t qblocks = a.b * a.hq * ((a.lq + kTile - 1) / kTile);
  constexpr size_t dkdv_bytes = tiles_bytes<T, D>() + 2 * kTile * sizeof(float), dq_bytes = tiles_bytes<T, D>();
  if (rt::Status st = opt_in_shared_memory(reinterpret_cast<const void*>(&dkdv_kernel<T, D>), dkdv_bytes,
                                           "attention backward (dK, dV)");
      st != rt::Status::Success)
    return st;
  if (rt::Status st =
          opt_in_shared_memory(reinterpret_cast<const void*>(&dq_kernel<T, D>), dq_bytes, "attention backward (dQ)");
      st != rt::Status::Success)
    return st;
  dkdv_kernel<T, D><<<static_cast<unsigned>(kblocks), kWarps * 32, dkdv_bytes, s>>>(a);
  dq_kernel<T, D><<<static_cast<unsigned>(qblocks), kWarps * 32, dq_bytes, s>>>(a);
  return rt::Status::Success;
}

} // namespace

bool attention_backward_mma(const AttentionArgs& a, rt::Stream stream, rt::Status* st) {
  if (!attention_mma_enabled() || a.bias || a.dropout_p > 0 || a.d != a.dv || (a.d != 64 && a.d != 128)) return false;
  if (a.dtype != DType::Half && a.dtype != DType::BFloat16) return false;
  const int64_t rows = a.b * a.hq * a.lq;
  if (rows == 0 || a.lk == 0 || rows * 32 / kThreads > 2147483647) return false;
  const cudaStream_t s = native(stream);
  rt::Status opted;
  if (a.dtype == DType::Half) {
    opted = a.d == 64 ? launch<c10::Half, 64>(a, s) : launch<c10::Half, 128>(a, s);
  } else {
    opted = a.d == 64 ? launch<c10::BFloat16, 64>(a, s) : launch<c10::BFloat16, 128>(a, s);
  }
  *st = opted != rt::Status::Success ? opted : check_launch("attention backward (tensor cores)");
  return true;
}

} // namespace mytorch::cuda
