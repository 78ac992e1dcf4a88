// CUDA fused attention backward on tensor cores (Note [Fused attention]), mma.sync.m16n8k16, fp16/bf16, head
// dims 64 and 128 (attention_tensor_cores in mytorch/attention.h says which arguments).
//
// The default, FlashAttention-2's 5-GEMM backward (bwd_kernel): delta D_i = dO_i . O_i (a warp per row, which also
// zeroes the fp32 dQ accumulator); then a block per (batch, kv head, 64 keys), 4 warps x 16 keys, holding its K and
// V tiles in shared memory and visiting every query tile of the group's heads (Q, dO, the logsumexp and delta
// double-buffered by cp.async): S^T = K Q^T, dP^T = V dO^T, P^T from the logsumexp, dS^T = P^T (dP^T - D),
// dV += P^T dO, dK += dS^T Q in registers, and dQ += dS K through shared memory (dS^T stored by each warp, read back
// transposed by ldmatrix.trans) into the accumulator with fp32 atomics; a last pass scales dQ into its dtype.
// Fragments come from swizzled tiles by ldmatrix (.trans where the reduction runs down a stored column).
//
// Deterministic (torch.use_deterministic_algorithms): three kernels and no atomics, the delta pass, dK/dV per key
// tile (S^T, dP^T, dV, dK) and dQ per query tile (S, dP, dQ): 7 GEMMs instead of 5, every sum in a fixed order.
// C fragments of two n-tiles are reused as the A fragment of one k-step (as in the forward).
#include "common.cuh"
#include "mma.cuh"
#include "mytorch/attention.h"

namespace mytorch::cuda {

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

// A warp's dK (times the scale) and dV from their C fragments: keys `key` + g and + 8, the NT n-tiles from column
// c0 (rows 16-byte aligned: attention_tensor_cores), a word per pair of columns.
template <typename T, int NT>
__device__ inline void write_dk_dv(const AttentionArgs& a, int64_t b, int64_t hk, int64_t key, int c0,
                                   const float (*dk)[4], const float (*dv)[4], int g, int tig) {
  T* dkp = static_cast<T*>(a.dk.data) + b * a.dk.sb + hk * a.dk.sh;
  T* dvp = static_cast<T*>(a.dvv.data) + b * a.dvv.sb + hk * a.dvv.sh;
  const float sc = static_cast<float>(a.scale);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t k = key + g + r * 8;
    if (k >= a.lk) continue;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int c = c0 + n * 8 + tig * 2;
      *reinterpret_cast<uint32_t*>(dkp + k * a.dk.ss + c) = pack(T(dk[n][2 * r] * sc), T(dk[n][2 * r + 1] * sc));
      *reinterpret_cast<uint32_t*>(dvp + k * a.dvv.ss + c) = pack(T(dv[n][2 * r]), T(dv[n][2 * r + 1]));
    }
  }
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
    if (a.dq_accum)
      for (int64_t e = lane; e < a.d; e += 32) static_cast<float*>(a.dq_accum)[row * a.d + e] = 0.f;
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
  write_dk_dv<T, D / 8>(a, b, hk, k0 + kr, 0, dk, dv, g, tig);
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

// ---- the 5-GEMM backward ---------------------------------------------------------------------------------------
// 8 warps: warp w works on the keys 16 (w % 4) .. + 15 of the tile and on half w / 4 of something else in each phase:
// of the query tile for S^T and dP^T, of the head dim for dV, dK and dQ. P^T and dS^T go through shared memory (each
// phase reads what the other warps wrote), so a warp holds dK and dV for 16 keys x D/2 dims only: 64 registers at
// d = 128 where a warp owning all D would need 128 beside its S^T and dP^T fragments, and spill.
constexpr int kBwdWarps = 8;

template <typename T, int D>
constexpr size_t bwd_smem_bytes() {  // K, V, two stages of Q and dO, P^T and dS^T; two stages of lse and delta
  return size_t(6 * kTile * D + 2 * kTile * kTile) * sizeof(T) + 4 * kTile * sizeof(float);
}

template <typename T, int D>
__global__ void __launch_bounds__(kBwdWarps * 32, 2) bwd_kernel(AttentionArgs a) {
  constexpr int C = D / 8, CS = kTile / 8;  // 16-byte chunks of a K/V/Q/dO row, of a P^T/dS^T row
  constexpr int HQ = kTile / 2, HD = D / 2;  // the halves of the query tile and of the head dim
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + kTile * D;
  T* qs = vs + kTile * D;         // two stages
  T* dos = qs + 2 * kTile * D;    // two stages
  T* pts = dos + 2 * kTile * D;   // P^T: [keys][queries]
  T* dss = pts + kTile * kTile;   // dS^T: [keys][queries]
  float* lse2 = reinterpret_cast<float*>(dss + kTile * kTile);  // two stages
  float* dl = lse2 + 2 * kTile;                                 // two stages
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
  const int kr = (warp & 3) * 16, half = warp >> 2;  // this warp's keys within the tile; its half
  const int64_t tiles_k = (a.lk + kTile - 1) / kTile, tiles_q = (a.lq + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x / tiles_k, k0 = (blockIdx.x % tiles_k) * kTile;
  const int64_t b = bh / a.hkv, hk = bh % a.hkv, group = a.hq / a.hkv;
  const int64_t qt_begin = a.causal ? k0 / kTile : 0;  // queries before the key tile see none of it
  const int64_t n_q = tiles_q > qt_begin ? tiles_q - qt_begin : 0, total = group * n_q;
  const float scale_log2 = static_cast<float>(a.scale) * kLog2e;
  const T* qbase = static_cast<const T*>(a.q.data) + b * a.q.sb;
  const T* dobase = static_cast<const T*>(a.dout.data) + b * a.dout.sb;
  stage_tile<T, D, kTile>(ks, static_cast<const T*>(a.k.data) + b * a.k.sb + hk * a.k.sh, k0, a.lk, a.k.ss);
  stage_tile<T, D, kTile>(vs, static_cast<const T*>(a.v.data) + b * a.v.sb + hk * a.v.sh, k0, a.lk, a.v.ss);
  // Step `it` visits query head hk * group + it / n_q, query tile qt_begin + it % n_q.
  auto issue = [&](int64_t it, int stage) {
    const int64_t h = hk * group + it / n_q, q0 = (qt_begin + it % n_q) * kTile;
    stage_tile<T, D, kTile>(qs + stage * kTile * D, qbase + h * a.q.sh, q0, a.lq, a.q.ss);
    stage_tile<T, D, kTile>(dos + stage * kTile * D, dobase + h * a.dout.sh, q0, a.lq, a.dout.ss);
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
      const int64_t row = (b * a.hq + h) * a.lq + q0 + r;
      const bool in = q0 + r < a.lq;
      lse2[stage * kTile + r] = in ? static_cast<const float*>(a.lse)[row] * kLog2e : INFINITY;
      dl[stage * kTile + r] = in ? static_cast<const float*>(a.delta)[row] : 0.f;
    }
  };
  if (total > 0) issue(0, 0);
  cp_async_commit();
  float dk[HD / 8][4], dv[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;
  float* accum = static_cast<float*>(a.dq_accum);
  for (int64_t it = 0; it < total; ++it) {
    const int cur = static_cast<int>(it & 1);
    if (it + 1 < total) issue(it + 1, cur ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int64_t h = hk * group + it / n_q, q0 = (qt_begin + it % n_q) * kTile;
    const T* qt = qs + cur * kTile * D;
    const T* dot = dos + cur * kTile * D;
    {
      // S^T = K Q^T and dP^T = V dO^T: this warp's 16 keys x its half of the queries (n-tiles two at a time).
      float st[HQ / 8][4], dpt[HQ / 8][4];
#pragma unroll
      for (int n = 0; n < HQ / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[n][e] = dpt[n][e] = 0.f;
#pragma unroll 1
      for (int s = 0; s < D / 16; ++s) {  // not unrolled: the addresses are computed, not held in registers
        uint32_t ka[4], va[4];
        const int a_at = swizzled<C>(kr + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * s + (lane >> 4));
        ldmatrix_x4(ka, ks + a_at);
        ldmatrix_x4(va, vs + a_at);
#pragma unroll
        for (int p = 0; p < HQ / 16; ++p) {
          uint32_t bf[4];
          const int b_at = swizzled<C>(half * HQ + p * 16 + (lane & 7) + (lane >> 4) * 8, 2 * s + ((lane >> 3) & 1));
          ldmatrix_x4(bf, qt + b_at);
          Mma<T>::run(st[2 * p], ka, bf);
          Mma<T>::run(st[2 * p + 1], ka, bf + 2);
          ldmatrix_x4(bf, dot + b_at);
          Mma<T>::run(dpt[2 * p], va, bf);
          Mma<T>::run(dpt[2 * p + 1], va, bf + 2);
        }
      }
      // P^T and dS^T = P^T (dP^T - D), masked (key or query out of range, causal), to shared memory.
      const float* ls = lse2 + cur * kTile;
      const float* dlt = dl + cur * kTile;
#pragma unroll
      for (int n = 0; n < HQ / 8; ++n) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float p2[2], ds2[2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int qc = half * HQ + n * 8 + tig * 2 + i;
            const int64_t key = k0 + kr + g + 8 * r, query = q0 + qc;
            const bool live = key < a.lk && query < a.lq && !(a.causal && key > query);
            const float e = exp2f(st[n][2 * r + i] * scale_log2 - ls[qc]);  // on every lane, then masked
            p2[i] = live ? e : 0.f;
            ds2[i] = p2[i] * (dpt[n][2 * r + i] - dlt[qc]);
          }
          const int at = swizzled<CS>(kr + g + 8 * r, half * HQ / 8 + n) + tig * 2;
          *reinterpret_cast<uint32_t*>(pts + at) = pack(T(p2[0]), T(p2[1]));
          *reinterpret_cast<uint32_t*>(dss + at) = pack(T(ds2[0]), T(ds2[1]));
        }
      }
    }
    __syncthreads();
    // dV += P^T dO and dK += dS^T Q for this warp's keys and half of the dims: k-steps over the 64 queries, P^T and
    // dS^T as A fragments by ldmatrix, dO and Q by ldmatrix.trans.
#pragma unroll 1
    for (int j = 0; j < kTile / 16; ++j) {
      uint32_t pf[4], sf[4];
      const int a_at = swizzled<CS>(kr + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * j + (lane >> 4));
      ldmatrix_x4(pf, pts + a_at);
      ldmatrix_x4(sf, dss + a_at);
#pragma unroll
      for (int q = 0; q < HD / 16; ++q) {
        uint32_t bf[4];
        const int b_at = swizzled<C>(j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, half * HD / 8 + 2 * q + (lane >> 4));
        ldmatrix_x4<true>(bf, dot + b_at);
        Mma<T>::run(dv[2 * q], pf, bf);
        Mma<T>::run(dv[2 * q + 1], pf, bf + 2);
        ldmatrix_x4<true>(bf, qt + b_at);
        Mma<T>::run(dk[2 * q], sf, bf);
        Mma<T>::run(dk[2 * q + 1], sf, bf + 2);
      }
    }
    // dQ += dS K for the queries 16 (w % 4) .. + 15 and this warp's half of the dims: A = dS read transposed from
    // dS^T, B = K rows by ldmatrix.trans; summed into the accumulator with atomics.
    const int qr = kr;  // the same 16-row slot, now of queries
    float* arow = accum + ((b * a.hq + h) * a.lq + q0 + qr) * D;
#pragma unroll 1
    for (int q = 0; q < HD / 16; ++q) {
      float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        uint32_t af[4], bf[4];
        ldmatrix_x4<true>(af, dss + swizzled<CS>(kk * 16 + (lane & 7) + (lane >> 4) * 8, qr / 8 + ((lane >> 3) & 1)));
        ldmatrix_x4<true>(
            bf, ks + swizzled<C>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, half * HD / 8 + 2 * q + (lane >> 4)));
        Mma<T>::run(acc[0], af, bf);
        Mma<T>::run(acc[1], af, bf + 2);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (q0 + qr + g + 8 * r >= a.lq) continue;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          atomic_add2(arow + (g + 8 * r) * D + half * HD + (2 * q + i) * 8 + tig * 2, acc[i][2 * r], acc[i][2 * r + 1]);
        }
      }
    }
    __syncthreads();  // P^T, dS^T and stage `cur` are free for the next step
  }
  cp_async_wait<0>();
  write_dk_dv<T, HD / 8>(a, b, hk, k0 + kr, half * HD, dk, dv, g, tig);
}

// dQ = scale x the accumulator, four elements a thread.
template <typename T>
__global__ void dq_convert_kernel(AttentionArgs a) {
  const int64_t quads = a.b * a.hq * a.lq * a.d / 4, stride = int64_t(gridDim.x) * blockDim.x;
  const float sc = static_cast<float>(a.scale);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += stride) {
    const int64_t row = i / (a.d / 4), e = (i % (a.d / 4)) * 4;
    const int64_t q = row % a.lq, h = (row / a.lq) % a.hq, b = row / (a.lq * a.hq);
    const Vec<float, 4> v = load_vec<float, 4>(static_cast<const float*>(a.dq_accum) + 4 * i);
    Vec<uint32_t, 2> out;
    out.v[0] = pack(T(v.v[0] * sc), T(v.v[1] * sc));
    out.v[1] = pack(T(v.v[2] * sc), T(v.v[3] * sc));
    store_vec<uint32_t, 2>(static_cast<T*>(a.dq.data) + b * a.dq.sb + h * a.dq.sh + q * a.dq.ss + e, out);
  }
}

template <typename T, int D>
rt::Status launch(const AttentionArgs& a, cudaStream_t s) {
  const int64_t rows = a.b * a.hq * a.lq;
  delta_kernel<T><<<static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads), kThreads, 0, s>>>(a);
  const int64_t kblocks = a.b * a.hkv * ((a.lk + kTile - 1) / kTile);
  if (a.dq_accum) {
    constexpr size_t bytes = bwd_smem_bytes<T, D>();
    if (rt::Status st = opt_in_shared_memory(reinterpret_cast<const void*>(&bwd_kernel<T, D>), bytes,
                                             "attention backward (tensor cores)");
        st != rt::Status::Success)
      return st;
    bwd_kernel<T, D><<<static_cast<unsigned>(kblocks), kBwdWarps * 32, bytes, s>>>(a);
    const unsigned grid = grid_blocks(rows * D / 4, kThreads);
    dq_convert_kernel<T><<<grid, kThreads, 0, s>>>(a);
    return rt::Status::Success;
  }
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
  if (!attention_tensor_cores(a, true)) return false;
  const int64_t rows = a.b * a.hq * a.lq;
  if (rows * 32 / kThreads > 2147483647) return false;
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
