// CUDA fused attention forward on tensor cores (Note [Fused attention]): FlashAttention-2's schedule with
// mma.sync.m16n8k16 (fp16 / bf16 in, fp32 accumulate). A block of 4 warps owns 64 query rows (16 per warp);
// Q, then double-buffered key/value tiles of 64 rows, are staged by 16-byte cp.async into swizzled shared memory
// (the next tile's copies are in flight while the current one is computed); fragments are loaded with ldmatrix
// (.trans for V); S = Q K^T lands in C fragments, the online softmax runs on them per row (4 lanes share a row),
// and the probabilities are reused in registers as the A fragments of P V (the C layout of two n-tiles is the A
// layout of one k-step). The output goes out through shared memory in 16-byte rows. Head dims 64 and 128
// (d == dv), no bias, no dropout, 16-byte aligned rows; everything else runs the CUDA-core kernels. The default
// on the cuda runtime (MYTORCH_ATTN_MMA=0 turns it off).
#include <cstdlib>

#include "common.cuh"
#include "mma.cuh"
#include "mytorch/attention.h"

namespace mytorch::cuda {

namespace {

constexpr int kBr = 64, kBc = 64, kWarps = 4;

template <typename T, int D>
constexpr size_t forward_smem_bytes() {
  return size_t(kBr + 4 * kBc) * D * sizeof(T);  // Q, then two stages of K and of V
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32, 1) forward_mma(AttentionArgs a) {
  constexpr int C = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = qs + kBr * D;
  T* vs = ks + 2 * kBc * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
  const int64_t tiles_q = (a.lq + kBr - 1) / kBr;
  const int64_t bh = blockIdx.x / tiles_q, qt = blockIdx.x % tiles_q;
  const int64_t b = bh / a.hq, h = bh % a.hq, hk = attn::kv_head(a, h);
  const int64_t q_first = qt * kBr, q0 = q_first + warp * 16;  // the block's and this warp's first query row
  const T* qp = static_cast<const T*>(a.q.data) + b * a.q.sb + h * a.q.sh;
  const T* kp = static_cast<const T*>(a.k.data) + b * a.k.sb + hk * a.k.sh;
  const T* vp = static_cast<const T*>(a.v.data) + b * a.v.sb + hk * a.v.sh;
  int64_t k_end = a.lk;
  if (a.causal) k_end = q_first + kBr < a.lk ? q_first + kBr : a.lk;
  const int64_t tiles = (k_end + kBc - 1) / kBc;

  stage_tile<T, D, kBr>(qs, qp, q_first, a.lq, a.q.ss);
  cp_async_commit();
  if (tiles > 0) {
    stage_tile<T, D, kBc>(ks, kp, 0, a.lk, a.k.ss);
    stage_tile<T, D, kBc>(vs, vp, 0, a.lk, a.v.ss);
  }
  cp_async_commit();
  cp_async_wait<1>();  // Q has landed
  __syncthreads();
  // Q as A fragments: k-step s covers dims 16s..16s+15 (matrices: rows 0-7 / 8-15 x dims 0-7 / 8-15).
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int s = 0; s < D / 16; ++s)
    ldmatrix_x4(qf[s], qs + swizzled<C>(warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * s + (lane >> 4)));

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float scale_log2 = static_cast<float>(a.scale) * 1.4426950408889634f;  // exp(x) = exp2(x log2 e)
  const int64_t r0 = q0 + g, r1 = q0 + g + 8;

  for (int64_t t = 0; t < tiles; ++t) {
    const int cur = static_cast<int>(t & 1);
    if (t + 1 < tiles) {  // the next tile's copies fly while this one is computed
      stage_tile<T, D, kBc>(ks + (cur ^ 1) * kBc * D, kp, (t + 1) * kBc, a.lk, a.k.ss);
      stage_tile<T, D, kBc>(vs + (cur ^ 1) * kBc * D, vp, (t + 1) * kBc, a.lk, a.v.ss);
    }
    cp_async_commit();   // possibly empty: one group per iteration keeps the count uniform
    cp_async_wait<1>();  // tile t has landed
    __syncthreads();
    const T* kt = ks + cur * kBc * D;
    const T* vt = vs + cur * kBc * D;
    const int64_t k0 = t * kBc;
    // S = Q K^T for this warp's 16 rows x 64 keys: 8 n-tiles of 8 keys, loaded two at a time (keys 0-7 / 8-15 of
    // the pair x dims 0-7 / 8-15 of the k-step).
    float s[kBc / 8][4];
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int p = 0; p < kBc / 16; ++p) {
#pragma unroll
      for (int st = 0; st < D / 16; ++st) {
        uint32_t bf[4];
        ldmatrix_x4(bf, kt + swizzled<C>(p * 16 + (lane & 7) + (lane >> 4) * 8, 2 * st + ((lane >> 3) & 1)));
        Mma<T>::run(s[2 * p], qf[st], bf);
        Mma<T>::run(s[2 * p + 1], qf[st], bf + 2);
      }
    }
    // Mask (key bounds, causal), then the online softmax on rows r0 (c0, c1) and r1 (c2, c3).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = k0 + n * 8 + tig * 2 + (e & 1), row = e < 2 ? r0 : r1;
        float v = s[n][e] * scale_log2;
        if (key >= a.lk || (a.causal && key > row)) v = -INFINITY;
        s[n][e] = v;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], v);
      }
    }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = warp_reduce<4>(tile_max[r], [](float x, float y) { return fmaxf(x, y); });
      const float m_new = fmaxf(m[r], tile_max[r]);
      corr[r] = m_new == -INFINITY ? 1.f : exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= corr[r];
    }
    float row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const float p = m[r] == -INFINITY ? 0.f : exp2f(s[n][e] - m[r]);
        s[n][e] = p;
        row_sum[r] += p;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] = warp_reduce<4>(row_sum[r], SumOp{});
      l[r] += row_sum[r];
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
    // O += P V: k-step j covers keys 16j..16j+15, P's A fragment is S n-tiles 2j and 2j+1; V's B fragments by
    // ldmatrix.trans, two n-tiles (16 dims) at a time (keys 0-7 / 8-15 x dims 0-7 / 8-15).
#pragma unroll
    for (int j = 0; j < kBc / 16; ++j) {
      uint32_t pf[4] = {pack(T(s[2 * j][0]), T(s[2 * j][1])), pack(T(s[2 * j][2]), T(s[2 * j][3])),
                        pack(T(s[2 * j + 1][0]), T(s[2 * j + 1][1])), pack(T(s[2 * j + 1][2]), T(s[2 * j + 1][3]))};
#pragma unroll
      for (int q = 0; q < D / 16; ++q) {
        uint32_t bf[4];
        ldmatrix_x4<true>(bf, vt + swizzled<C>(j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * q + (lane >> 4)));
        Mma<T>::run(o[2 * q], pf, bf);
        Mma<T>::run(o[2 * q + 1], pf, bf + 2);
      }
    }
    __syncthreads();  // every warp is done with stage `cur` before the next iteration's copies refill it
  }
  cp_async_wait<0>();
  // Normalise into this warp's 16 rows of the Q tile (its own: only this warp read them), then write them out in
  // 16-byte chunks, a row's chunks on consecutive lanes; the first lane of each row group writes the logsumexp.
  T* ot = qs + warp * 16 * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // fully masked row: 0 (Note [Fused attention])
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<uint32_t*>(ot + swizzled<C>(g + 8 * r, n) + tig * 2) =
          pack(T(o[n][2 * r] * inv), T(o[n][2 * r + 1] * inv));
    const int64_t row = r == 0 ? r0 : r1;
    if (tig == 0 && row < a.lq)
      static_cast<float*>(a.lse)[(b * a.hq + h) * a.lq + row] =
          l[r] > 0.f ? (m[r] + log2f(l[r])) * 0.6931471805599453f : INFINITY;
  }
  __syncwarp();
  T* op = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh;
  for (int idx = lane; idx < 16 * C; idx += 32) {
    const int r = idx / C, c = idx % C;
    if (q0 + r < a.lq)
      *reinterpret_cast<uint4*>(op + (q0 + r) * a.out.ss + c * 8) =
          *reinterpret_cast<const uint4*>(ot + swizzled<C>(r, c));
  }
}

template <typename T, int D>
rt::Status launch_forward(const AttentionArgs& a, dim3 grid, cudaStream_t s) {
  constexpr size_t bytes = forward_smem_bytes<T, D>();
  const rt::Status st = opt_in_shared_memory(reinterpret_cast<const void*>(&forward_mma<T, D>), bytes,
                                             "attention forward (tensor cores)");
  if (st != rt::Status::Success) return st;
  forward_mma<T, D><<<grid, kWarps * 32, bytes, s>>>(a);
  return check_launch("attention forward (tensor cores)");
}

} // namespace

// Launches the tensor-core forward when it applies; false (nothing launched) otherwise.
bool attention_forward_mma(const AttentionArgs& a, rt::Stream stream, rt::Status* st) {
  if (!attention_tensor_cores(a, false)) return false;
  const int64_t blocks = a.b * a.hq * ((a.lq + kBr - 1) / kBr);
  if (blocks > 2147483647) return false;
  const dim3 grid(static_cast<unsigned>(blocks));
  const cudaStream_t s = native(stream);
  if (a.dtype == DType::Half)
    *st = a.d == 64 ? launch_forward<c10::Half, 64>(a, grid, s) : launch_forward<c10::Half, 128>(a, grid, s);
  else *st = a.d == 64 ? launch_forward<c10::BFloat16, 64>(a, grid, s) : launch_forward<c10::BFloat16, 128>(a, grid, s);
  return true;
}

} // namespace mytorch::cuda
