// CUDA fused attention (Note [Fused attention]) on CUDA cores, for the shapes the tensor-core kernels do not take:
// a warp per query row for the forward (online softmax over the keys, the row's output accumulated in registers)
// and for dQ, with the key and value tiles shared by a block's rows in shared memory; a warp per key row for dK/dV,
// sharing tiles of query rows (summing its query heads and rows in a fixed order). Correct for every supported
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

// Forward on CUDA cores, for the shapes the tensor-core kernel does not take (Note [Fused attention]): a block of
// kRowWarps warps owns as many consecutive query rows of one (batch, head), a warp a row. The key and value tiles
// of kKeyTile rows are staged once per block in shared memory (coalesced, in the accumulation type, rows padded by
// one element so that a lane per key reads without bank conflicts), with the block's query rows; a lane computes
// one key's score, the warp's online softmax runs once per tile (not a warp reduction per key), and each lane
// accumulates its output dims over the tile's probabilities, which the warp shares through shared memory.
constexpr int kRowWarps = 8, kKeyTile = 32;

// Shared memory of forward_tiled_kernel, in elements of the accumulation type.
constexpr size_t tiled_smem_elems(int64_t d, int64_t dv) {
  return size_t(kRowWarps) * size_t(d + 1) + size_t(kKeyTile) * size_t(d + 1) + size_t(kKeyTile) * size_t(dv + 1) +
         size_t(kRowWarps) * kKeyTile;
}

// Stages `rows` rows of t (batch b, head h) from row r0, `width` elements each, into dst in the accumulation type,
// rows padded by one element (so that a lane per row reads without bank conflicts); rows at or past `limit` are
// zeros. The whole block takes part, consecutive threads on consecutive elements (coalesced).
template <typename T, typename A>
__device__ void stage_rows(A* dst, const AttnTensor& t, int64_t b, int64_t h, int64_t r0, int64_t rows, int64_t width,
                           int64_t limit) {
  for (int64_t x = threadIdx.x; x < rows * width; x += blockDim.x) {
    const int64_t r = x / width, e = x % width;
    dst[r * (width + 1) + e] = r0 + r < limit ? attn::ld<T, A>(t, b, h, r0 + r, e) : A(0);
  }
}

template <typename T>
__global__ void __launch_bounds__(kRowWarps * 32) forward_tiled_kernel(AttentionArgs a) {
  using A = attn::acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* qs = reinterpret_cast<A*>(smem_raw);  // [kRowWarps][d + 1]
  A* ks = qs + kRowWarps * (a.d + 1);       // [kKeyTile][d + 1]
  A* vs = ks + kKeyTile * (a.d + 1);        // [kKeyTile][dv + 1]
  A* ps = vs + kKeyTile * (a.dv + 1);       // [kRowWarps][kKeyTile]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t groups = (a.lq + kRowWarps - 1) / kRowWarps;
  const int64_t bh = blockIdx.x / groups, i0 = (blockIdx.x % groups) * kRowWarps;
  const int64_t b = bh / a.hq, h = bh % a.hq, hk = attn::kv_head(a, h), i = i0 + warp;
  stage_rows<T, A>(qs, a.q, b, h, i0, kRowWarps, a.d, a.lq);
  const int64_t last = i0 + kRowWarps - 1 < a.lq ? i0 + kRowWarps - 1 : a.lq - 1;
  const int64_t block_end = a.causal ? (a.lk < last + 1 ? a.lk : last + 1) : a.lk;
  const int64_t end = i >= a.lq ? 0 : (a.causal ? (a.lk < i + 1 ? a.lk : i + 1) : a.lk);
  A acc[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) acc[k] = A(0);
  A m = -INFINITY, l = 0;
  const A* q = qs + warp * (a.d + 1);
  A* p_row = ps + warp * kKeyTile;
  for (int64_t j0 = 0; j0 < block_end; j0 += kKeyTile) {
    __syncthreads();  // the previous tile is no longer read (and, the first time, the query rows are staged)
    stage_rows<T, A>(ks, a.k, b, hk, j0, kKeyTile, a.d, a.lk);
    stage_rows<T, A>(vs, a.v, b, hk, j0, kKeyTile, a.dv, a.lk);
    __syncthreads();
    if (j0 >= end) continue;  // this row sees none of the tile (causal, or a row past the last query)
    const int64_t j = j0 + lane;
    A sc = -INFINITY;
    if (j < end) {
      A dot = 0;
      const A* kr = ks + lane * (a.d + 1);
      for (int64_t e = 0; e < a.d; ++e) dot += q[e] * kr[e];
      sc = dot * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j);
    }
    // The tile's maximum ignoring NaN, as the per-key update did (a NaN score still makes the row NaN through p).
    const A tile_max = warp_reduce(sc, [](A x, A y) { return y > x ? y : x; });
    const A m_new = tile_max > m ? tile_max : m;
    if (m_new == -INFINITY) continue;  // every key so far masked: nothing to add
    const A corr = exp(m - m_new);
    const A p = sc == -INFINITY ? A(0) : exp(sc - m_new);
    l = l * corr + warp_sum(p);
    p_row[lane] = j < end ? p * static_cast<A>(attn::dropout_factor(a, b, h, i, j)) : A(0);
    __syncwarp();
    const int64_t n = end - j0 < kKeyTile ? end - j0 : kKeyTile;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e >= a.dv) continue;
      A s = acc[k] * corr;
      for (int64_t t = 0; t < n; ++t)
        if (p_row[t] != A(0)) s += p_row[t] * vs[t * (a.dv + 1) + e];  // (a dropped key adds nothing, not 0 x inf)
      acc[k] = s;
    }
    __syncwarp();  // p_row is rewritten by the next tile
    m = m_new;
  }
  if (i < a.lq) {
    T* o = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh + i * a.out.ss;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < a.dv) o[e] = static_cast<T>(l > A(0) ? acc[k] / l : A(0));  // fully masked: 0
    }
    if (lane == 0) static_cast<A*>(a.lse)[(b * a.hq + h) * a.lq + i] = attn::row_lse(m, l);
  }
}

// dQ on CUDA cores, tiled as forward_tiled_kernel: a warp per query row, kRowWarps rows a block sharing the key and
// value tiles in shared memory; a lane computes one key's probability and dS, dQ sums the tile's dS rows of K.
template <typename T>
__global__ void __launch_bounds__(kRowWarps * 32) dq_tiled_kernel(AttentionArgs a) {
  using A = attn::acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* qs = reinterpret_cast<A*>(smem_raw);  // [kRowWarps][d + 1]
  A* ks = qs + kRowWarps * (a.d + 1);       // [kKeyTile][d + 1]
  A* vs = ks + kKeyTile * (a.d + 1);        // [kKeyTile][dv + 1]
  A* ps = vs + kKeyTile * (a.dv + 1);       // [kRowWarps][kKeyTile]
  A* gs = ps + kRowWarps * kKeyTile;        // [kRowWarps][dv + 1]: the rows of dO
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t groups = (a.lq + kRowWarps - 1) / kRowWarps;
  const int64_t bh = blockIdx.x / groups, i0 = (blockIdx.x % groups) * kRowWarps;
  const int64_t b = bh / a.hq, h = bh % a.hq, hk = attn::kv_head(a, h), i = i0 + warp;
  stage_rows<T, A>(qs, a.q, b, h, i0, kRowWarps, a.d, a.lq);
  stage_rows<T, A>(gs, a.dout, b, h, i0, kRowWarps, a.dv, a.lq);
  const bool live = i < a.lq;
  const int64_t row = (b * a.hq + h) * a.lq + i;
  A delta = 0, lse = 0;
  if (live) {  // D_i = dO_i . O_i (a warp per row, as the per-row kernel)
    A part = 0;
    for (int64_t e = lane; e < a.dv; e += 32)
      part += attn::ld<T, A>(a.dout, b, h, i, e) * attn::ld<T, A>(a.out, b, h, i, e);
    delta = warp_sum(part);
    if (lane == 0) static_cast<A*>(a.delta)[row] = delta;
    lse = static_cast<const A*>(a.lse)[row];
  }
  const int64_t last = i0 + kRowWarps - 1 < a.lq ? i0 + kRowWarps - 1 : a.lq - 1;
  const int64_t block_end = a.causal ? (a.lk < last + 1 ? a.lk : last + 1) : a.lk;
  const int64_t end = !live ? 0 : (a.causal ? (a.lk < i + 1 ? a.lk : i + 1) : a.lk);
  A dq[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) dq[k] = A(0);
  const A* q = qs + warp * (a.d + 1);
  const A* go = gs + warp * (a.dv + 1);
  A* p_row = ps + warp * kKeyTile;
  for (int64_t j0 = 0; j0 < block_end; j0 += kKeyTile) {
    __syncthreads();
    stage_rows<T, A>(ks, a.k, b, hk, j0, kKeyTile, a.d, a.lk);
    stage_rows<T, A>(vs, a.v, b, hk, j0, kKeyTile, a.dv, a.lk);
    __syncthreads();
    if (j0 >= end) continue;
    const int64_t j = j0 + lane;
    A ds = 0;
    if (j < end) {
      A s = 0, dp = 0;
      const A* kr = ks + lane * (a.d + 1);
      const A* vr = vs + lane * (a.dv + 1);
      for (int64_t e = 0; e < a.d; ++e) s += q[e] * kr[e];
      for (int64_t e = 0; e < a.dv; ++e) dp += go[e] * vr[e];
      const A p = exp(s * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j) - lse);
      ds = p * (static_cast<A>(attn::dropout_factor(a, b, h, i, j)) * dp - delta) * static_cast<A>(a.scale);
    }
    p_row[lane] = ds;
    __syncwarp();
    const int64_t n = end - j0 < kKeyTile ? end - j0 : kKeyTile;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e >= a.d) continue;
      A s = dq[k];
      for (int64_t t = 0; t < n; ++t) s += p_row[t] * ks[t * (a.d + 1) + e];
      dq[k] = s;
    }
    __syncwarp();
  }
  if (live) {
    T* out = static_cast<T*>(a.dq.data) + b * a.dq.sb + h * a.dq.sh + i * a.dq.ss;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < a.d) out[e] = static_cast<T>(dq[k]);
    }
  }
}

// Shared memory of dq_tiled_kernel: the forward's and the rows of dO.
constexpr size_t dq_tiled_smem_elems(int64_t d, int64_t dv) {
  return tiled_smem_elems(d, dv) + size_t(kRowWarps) * size_t(dv + 1);
}

// dK and dV on CUDA cores, tiled as the forward the other way round: a warp per key row, kRowWarps key rows a block
// sharing tiles of kKeyTile query rows (with their dO rows, logsumexp and delta) in shared memory; a lane computes
// one query's probability and dS, and dV / dK sum the tile's dO / Q rows. The query heads of the group and their rows
// are visited in a fixed order: deterministic.
template <typename T>
__global__ void __launch_bounds__(kRowWarps * 32) dkv_tiled_kernel(AttentionArgs a) {
  using A = attn::acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* ks = reinterpret_cast<A*>(smem_raw);  // [kRowWarps][d + 1]: this block's key rows
  A* vs = ks + kRowWarps * (a.d + 1);       // [kRowWarps][dv + 1]
  A* qs = vs + kRowWarps * (a.dv + 1);      // [kKeyTile][d + 1]: a tile of query rows
  A* gs = qs + kKeyTile * (a.d + 1);        // [kKeyTile][dv + 1]: their dO rows
  A* ps = gs + kKeyTile * (a.dv + 1);       // [kRowWarps][2][kKeyTile]: a warp's z p and dS per query
  A* st = ps + kRowWarps * 2 * kKeyTile;    // [2][kKeyTile]: the tile's logsumexp and delta
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t groups = (a.lk + kRowWarps - 1) / kRowWarps, hgroup = a.hq / a.hkv;
  const int64_t bh = blockIdx.x / groups, j0 = (blockIdx.x % groups) * kRowWarps;
  const int64_t b = bh / a.hkv, hk = bh % a.hkv, j = j0 + warp;
  stage_rows<T, A>(ks, a.k, b, hk, j0, kRowWarps, a.d, a.lk);
  stage_rows<T, A>(vs, a.v, b, hk, j0, kRowWarps, a.dv, a.lk);
  const bool live = j < a.lk;
  A dk[kMaxPerLane], dv[kMaxPerLane];
#pragma unroll
  for (int e = 0; e < kMaxPerLane; ++e) dk[e] = dv[e] = A(0);
  const A* kr = ks + warp * (a.d + 1);
  const A* vr = vs + warp * (a.dv + 1);
  A* zp_row = ps + warp * 2 * kKeyTile;
  A* ds_row = zp_row + kKeyTile;
  // causal: query i sees key j when j <= i, so the block's first key bounds the queries it needs
  const int64_t i_begin = a.causal ? j0 / kKeyTile * kKeyTile : 0;
  for (int64_t h = hk * hgroup; h < (hk + 1) * hgroup; ++h) {
    for (int64_t i0 = i_begin; i0 < a.lq; i0 += kKeyTile) {
      __syncthreads();  // the previous tile is no longer read (and, the first time, the key rows are staged)
      stage_rows<T, A>(qs, a.q, b, h, i0, kKeyTile, a.d, a.lq);
      stage_rows<T, A>(gs, a.dout, b, h, i0, kKeyTile, a.dv, a.lq);
      for (int64_t r = threadIdx.x; r < kKeyTile; r += blockDim.x) {
        const int64_t qrow = (b * a.hq + h) * a.lq + i0 + r;
        st[r] = i0 + r < a.lq ? static_cast<const A*>(a.lse)[qrow] : A(0);
        st[kKeyTile + r] = i0 + r < a.lq ? static_cast<const A*>(a.delta)[qrow] : A(0);
      }
      __syncthreads();
      const int64_t i = i0 + lane;
      const bool seen = live && i < a.lq && !(a.causal && j > i);
      A zp = 0, ds = 0;
      if (seen) {
        A s = 0, dp = 0;
        const A* qr = qs + lane * (a.d + 1);
        const A* gr = gs + lane * (a.dv + 1);
        for (int64_t e = 0; e < a.d; ++e) s += kr[e] * qr[e];
        for (int64_t e = 0; e < a.dv; ++e) dp += vr[e] * gr[e];
        const A p = exp(s * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j) - st[lane]);
        const A z = static_cast<A>(attn::dropout_factor(a, b, h, i, j));
        zp = z * p;
        ds = p * (z * dp - st[kKeyTile + lane]) * static_cast<A>(a.scale);
      }
      zp_row[lane] = zp;
      ds_row[lane] = ds;
      __syncwarp();
      if (live) {
        const int64_t n = a.lq - i0 < kKeyTile ? a.lq - i0 : kKeyTile;
#pragma unroll
        for (int e = 0; e < kMaxPerLane; ++e) {
          const int64_t c = lane + 32 * e;
          A sv = dv[e], sk = dk[e];
          for (int64_t t = 0; t < n; ++t) {
            if (c < a.dv) sv += zp_row[t] * gs[t * (a.dv + 1) + c];
            if (c < a.d) sk += ds_row[t] * qs[t * (a.d + 1) + c];
          }
          dv[e] = sv;
          dk[e] = sk;
        }
      }
      __syncwarp();
    }
  }
  if (live) {
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

// Shared memory of dkv_tiled_kernel.
constexpr size_t dkv_tiled_smem_elems(int64_t d, int64_t dv) {
  return size_t(kRowWarps + kKeyTile) * size_t(d + 1 + dv + 1) + size_t(kRowWarps) * 2 * kKeyTile + 2 * kKeyTile;
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

// The tiled kernels' grid (a block per kRowWarps query rows of a (batch, head)) and their shared-memory opt-in, once
// per kernel and device for the largest head dims (256) so that every launch fits.
rt::Status tiled_grid(const void* kernel, const AttentionArgs& a, size_t max_bytes, const char* what, dim3* grid) {
  const int64_t blocks = a.b * a.hq * ((a.lq + kRowWarps - 1) / kRowWarps);
  if (blocks > 2147483647) return rt::report(rt::Status::InvalidValue, "attention: too many query rows for one launch");
  *grid = dim3(static_cast<unsigned>(blocks));
  return opt_in_shared_memory(kernel, max_bytes, what);
}

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
  rt::Status st = rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.split_ws) {
      const int64_t chunks = (a.lk + a.split_chunk - 1) / a.split_chunk;
      split_kernel<T><<<warps_grid(rows * chunks), kThreads, 0, native(stream)>>>(a, chunks);
      combine_kernel<T><<<warps_grid(rows), kThreads, 0, native(stream)>>>(a, chunks);
    } else {
      using A = attn::acc_t<T>;
      dim3 grid;
      st = tiled_grid(reinterpret_cast<const void*>(&forward_tiled_kernel<T>), a,
                      tiled_smem_elems(256, 256) * sizeof(A), "attention forward", &grid);
      const size_t bytes = tiled_smem_elems(a.d, a.dv) * sizeof(A);
      if (st == rt::Status::Success) forward_tiled_kernel<T><<<grid, kRowWarps * 32, bytes, native(stream)>>>(a);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
  return st != rt::Status::Success ? st : check_launch("attention forward");
}

rt::Status attention_backward(const AttentionArgs& a, rt::Stream stream) {
  rt::Status mma_status = rt::Status::Success;
  if (attention_backward_mma(a, stream, &mma_status)) return mma_status;
  if (a.d > 32 * kMaxPerLane || a.dv > 32 * kMaxPerLane)
    return rt::report(rt::Status::InvalidValue, "attention: head dimensions above 256 are not supported");
  rt::Status st = rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = attn::acc_t<T>;
    if (a.b * a.hq * a.lq > 0) {
      dim3 grid;
      st = tiled_grid(reinterpret_cast<const void*>(&dq_tiled_kernel<T>), a, dq_tiled_smem_elems(256, 256) * sizeof(A),
                      "attention backward (dQ)", &grid);
      const size_t bytes = dq_tiled_smem_elems(a.d, a.dv) * sizeof(A);
      if (st == rt::Status::Success) dq_tiled_kernel<T><<<grid, kRowWarps * 32, bytes, native(stream)>>>(a);
    }
    if (st == rt::Status::Success && a.b * a.hkv * a.lk > 0) {
      const int64_t blocks = a.b * a.hkv * ((a.lk + kRowWarps - 1) / kRowWarps);
      if (blocks > 2147483647) {
        st = rt::report(rt::Status::InvalidValue, "attention: too many key rows for one launch");
        return;
      }
      st = opt_in_shared_memory(reinterpret_cast<const void*>(&dkv_tiled_kernel<T>),
                                dkv_tiled_smem_elems(256, 256) * sizeof(A), "attention backward (dK, dV)");
      const dim3 grid(static_cast<unsigned>(blocks));
      const size_t bytes = dkv_tiled_smem_elems(a.d, a.dv) * sizeof(A);
      if (st == rt::Status::Success) dkv_tiled_kernel<T><<<grid, kRowWarps * 32, bytes, native(stream)>>>(a);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
  return st != rt::Status::Success ? st : check_launch("attention backward");
}

} // namespace mytorch::cuda
