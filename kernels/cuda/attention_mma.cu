// CUDA fused attention forward on tensor cores (Note [Fused attention]): FlashAttention-2's schedule with
// mma.sync.m16n8k16 (fp16 / bf16 in, fp32 accumulate). A block of 4 warps owns 64 query rows (16 per
// warp, Q held as A fragments in registers); key/value tiles of 64 rows are staged in shared memory;
// S = Q K^T lands in C fragments, the online softmax runs on them per row (4 lanes share a row), and the
// probabilities are reused in registers as the A fragments of P V (the C layout of two n-tiles is the A
// layout of one k-step). Head dims 64 and 128 (d == dv), no bias, no dropout; everything else runs the
// CUDA-core kernels. Until a GPU session has verified it against the sim twin it is opt-in:
// MYTORCH_ATTN_MMA=1.
#include <cstdlib>

#include "common.cuh"
#include "mma.cuh"
#include "mytorch/attention.h"

namespace mytorch::cuda {

bool attention_mma_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MYTORCH_ATTN_MMA");
    return v && v[0] == '1';
  }();
  return on;
}

namespace {

constexpr int kBr = 64, kBc = 64, kWarps = 4;

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) forward_mma(AttentionArgs a) {
  __shared__ T ks[kBc][D];
  __shared__ T vs[kBc][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
  const int64_t tiles_q = (a.lq + kBr - 1) / kBr;
  const int64_t bh = blockIdx.x / tiles_q, qt = blockIdx.x % tiles_q;
  const int64_t b = bh / a.hq, h = bh % a.hq, hk = attn::kv_head(a, h);
  const int64_t q0 = qt * kBr + warp * 16;  // this warp's first query row
  const T* qp = static_cast<const T*>(a.q.data) + b * a.q.sb + h * a.q.sh;
  const T* kp = static_cast<const T*>(a.k.data) + b * a.k.sb + hk * a.k.sh;
  const T* vp = static_cast<const T*>(a.v.data) + b * a.v.sb + hk * a.v.sh;
  const T zero = T(0.f);

  // Q as A fragments: k-step s covers dims 16s..16s+15.
  uint32_t qf[D / 16][4];
  const int64_t r0 = q0 + g, r1 = q0 + g + 8;
#pragma unroll
  for (int s = 0; s < D / 16; ++s) {
    const int c0 = s * 16 + tig * 2;
    auto at = [&](int64_t r, int c) { return r < a.lq ? qp[r * a.q.ss + c] : zero; };
    qf[s][0] = pack(at(r0, c0), at(r0, c0 + 1));
    qf[s][1] = pack(at(r1, c0), at(r1, c0 + 1));
    qf[s][2] = pack(at(r0, c0 + 8), at(r0, c0 + 9));
    qf[s][3] = pack(at(r1, c0 + 8), at(r1, c0 + 9));
  }
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float scale_log2 = static_cast<float>(a.scale) * 1.4426950408889634f;  // exp(x) = exp2(x log2 e)

  int64_t k_end = a.lk;
  if (a.causal) {
    const int64_t last_q = qt * kBr + kBr - 1;
    k_end = last_q + 1 < a.lk ? last_q + 1 : a.lk;
  }
  for (int64_t k0 = 0; k0 < k_end; k0 += kBc) {
    __syncthreads();  // the previous tile is no longer read
    for (int idx = threadIdx.x; idx < kBc * D; idx += blockDim.x) {
      const int r = idx / D, c = idx % D;
      const int64_t key = k0 + r;
      ks[r][c] = key < a.lk ? kp[key * a.k.ss + c] : zero;
      vs[r][c] = key < a.lk ? vp[key * a.v.ss + c] : zero;
    }
    __syncthreads();
    // S = Q K^T for this warp's 16 rows x 64 keys: 8 n-tiles of 8 keys.
    float s[kBc / 8][4];
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int st = 0; st < D / 16; ++st) {
        const int key = n * 8 + g, c0 = st * 16 + tig * 2;
        uint32_t bf[2] = {pack(ks[key][c0], ks[key][c0 + 1]), pack(ks[key][c0 + 8], ks[key][c0 + 9])};
        Mma<T>::run(s[n], qf[st], bf);
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
    // O += P V: k-step j covers keys 16j..16j+15; P's A fragment is S n-tiles 2j and 2j+1.
#pragma unroll
    for (int j = 0; j < kBc / 16; ++j) {
      uint32_t pf[4] = {pack(T(s[2 * j][0]), T(s[2 * j][1])), pack(T(s[2 * j][2]), T(s[2 * j][3])),
                        pack(T(s[2 * j + 1][0]), T(s[2 * j + 1][1])), pack(T(s[2 * j + 1][2]), T(s[2 * j + 1][3]))};
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const int key = j * 16 + tig * 2, col = n * 8 + g;
        uint32_t bf[2] = {pack(vs[key][col], vs[key + 1][col]), pack(vs[key + 8][col], vs[key + 9][col])};
        Mma<T>::run(o[n], pf, bf);
      }
    }
  }
  // Normalise and write; the first lane of each row group writes the logsumexp (natural log).
  T* op = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = r == 0 ? r0 : r1;
    if (row >= a.lq) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // fully masked row: 0 (Note [Fused attention])
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int c = n * 8 + tig * 2;
      op[row * a.out.ss + c] = T(o[n][2 * r] * inv);
      op[row * a.out.ss + c + 1] = T(o[n][2 * r + 1] * inv);
    }
    if (tig == 0)
      static_cast<float*>(a.lse)[(b * a.hq + h) * a.lq + row] =
          l[r] > 0.f ? (m[r] + log2f(l[r])) * 0.6931471805599453f : INFINITY;
  }
}

} // namespace

// Launches the tensor-core forward when it applies; false (nothing launched) otherwise.
bool attention_forward_mma(const AttentionArgs& a, rt::Stream stream, rt::Status* st) {
  if (!attention_mma_enabled() || a.bias || a.dropout_p > 0 || a.split_ws || a.d != a.dv || (a.d != 64 && a.d != 128))
    return false;
  if (a.dtype != DType::Half && a.dtype != DType::BFloat16) return false;
  const int64_t blocks = a.b * a.hq * ((a.lq + kBr - 1) / kBr);
  if (blocks == 0 || blocks > 2147483647) return false;
  const dim3 grid(static_cast<unsigned>(blocks));
  const cudaStream_t s = native(stream);
  if (a.dtype == DType::Half) {
    if (a.d == 64) forward_mma<c10::Half, 64><<<grid, kWarps * 32, 0, s>>>(a);
    else forward_mma<c10::Half, 128><<<grid, kWarps * 32, 0, s>>>(a);
  } else {
    if (a.d == 64) forward_mma<c10::BFloat16, 64><<<grid, kWarps * 32, 0, s>>>(a);
    else forward_mma<c10::BFloat16, 128><<<grid, kWarps * 32, 0, s>>>(a);
  }
  *st = check_launch("attention forward (tensor cores)");
  return true;
}

} // namespace mytorch::cuda
