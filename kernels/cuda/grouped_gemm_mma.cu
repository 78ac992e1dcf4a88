// Grouped GEMM on tensor cores (torch._grouped_mm, gemm.h's modes) for fp16 / bf16 with each operand contiguous
// along one of its dimensions: a block of 4 warps owns a 64 x 64 tile of C (a warp 32 x 32: 2 x 4 mma.sync
// m16n8k16 per k-step), the contraction in slices of 64 staged by cp.async into swizzled tiles, double-buffered.
// Each operand is staged along its contiguous dimension, whichever it is (a transposed expert weight, B stored
// [n][k], is read row by row like any other: coalesced), and its fragments come from ldmatrix, with .trans when
// the tile's rows run along the contraction the other way. A chunk of 8 elements that a group's or the matrix's
// end cuts is copied in part and zero-filled; a block whose tile does not start 16-byte aligned along a contiguous
// dimension (a group boundary off a multiple of 8) stages element by element into the same layout. Operands with
// no unit stride, fp32 and misaligned bases run the CUDA-core kernel (grouped_gemm.cu).
#include <initializer_list>

#include "common.cuh"
#include "grouped_gemm.cuh"
#include "mma.cuh"
#include "mytorch/gemm.h"

namespace mytorch::cuda {
namespace {

constexpr int kSlice = 64;  // contraction per stage
constexpr int kWarps = 4;

// A 64 x 64 tile of an operand whose `inner` dimension is contiguous: tile row r is outer index o0 + r (valid below
// o_end), its chunk c the inner indices i0 + 8c.. (valid below i_end); element (o, i) at base[o * outer + i].
template <typename T>
__device__ inline void stage64(T* tile, const T* base, int64_t outer, int64_t o0, int64_t o_end, int64_t i0,
                               int64_t i_end, bool aligned) {
  for (int idx = threadIdx.x; idx < 64 * 8; idx += blockDim.x) {
    const int r = idx / 8, c = idx % 8;
    const int64_t o = o0 + r, i = i0 + 8 * c;
    int64_t n = o < o_end ? i_end - i : 0;
    n = n < 0 ? 0 : (n > 8 ? 8 : n);
    T* dst = tile + swizzled<8>(r, c);
    if (aligned) {
      cp_async16(dst, n > 0 ? base + o * outer + i : base, static_cast<int>(n * sizeof(T)));
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = e < n ? base[o * outer + i + e] : T(0.f);
    }
  }
}

// AK: A's contraction dimension is contiguous (its tile rows are C's rows), else its rows are (tile rows: the
// contraction). BK: B's contraction dimension is contiguous (tile rows: C's columns), else its columns are.
template <typename T, bool AK, bool BK>
__global__ void __launch_bounds__(kWarps * 32) grouped_mma_kernel(GroupedGemmArgs p) {
  __shared__ uint4 a_raw[2 * 64 * 64 * sizeof(T) / 16];  // 16-byte aligned by its type (cp.async, ldmatrix)
  __shared__ uint4 b_raw[2 * 64 * 64 * sizeof(T) / 16];
  T(*As)[64 * 64] = reinterpret_cast<T(*)[64 * 64]>(a_raw);
  T(*Bs)[64 * 64] = reinterpret_cast<T(*)[64 * 64]>(b_raw);
  GroupTile<T> t;
  if (!locate_tile(p, &t)) return;
  const T *A = t.A, *B = t.B;
  T* C = t.C;
  const int64_t row0 = t.row0, row_end = t.row_end, col0 = t.col0, col_end = t.col_end, k_lo = t.k_lo, k_hi = t.k_hi;
  // 16-byte alignment of every chunk this block stages (the bases and strides the launcher checked)
  const bool a_aligned = (AK ? k_lo : row0) % 8 == 0, b_aligned = (BK ? k_lo : col0) % 8 == 0;
  auto stage = [&](int64_t k0, int buf) {
    if constexpr (AK) stage64<T>(As[buf], A, p.a_row, row0, row_end, k0, k_hi, a_aligned);
    else stage64<T>(As[buf], A, p.a_col, k0, k_hi, row0, row_end, a_aligned);
    if constexpr (BK) stage64<T>(Bs[buf], B, p.b_col, col0, col_end, k0, k_hi, b_aligned);
    else stage64<T>(Bs[buf], B, p.b_row, k0, k_hi, col0, col_end, b_aligned);
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  float acc[2][4][4] = {};
  const int64_t slices = (k_hi - k_lo + kSlice - 1) / kSlice;
  if (slices > 0) stage(k_lo, 0);
  cp_async_commit();
  for (int64_t s = 0; s < slices; ++s) {
    const int cur = static_cast<int>(s & 1);
    if (s + 1 < slices) stage(k_lo + (s + 1) * kSlice, cur ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* at = As[cur];
    const T* bt = Bs[cur];
#pragma unroll
    for (int ks = 0; ks < kSlice / 16; ++ks) {
      uint32_t af[2][4], bf[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int m0 = wm + 16 * mt;
        if constexpr (AK)
          ldmatrix_x4(af[mt], at + swizzled<8>(m0 + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * ks + (lane >> 4)));
        else
          ldmatrix_x4<true>(af[mt],
                            at + swizzled<8>(16 * ks + (lane & 7) + (lane >> 4) * 8, m0 / 8 + ((lane >> 3) & 1)));
      }
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int n0 = wn + 16 * np;
        if constexpr (BK)
          ldmatrix_x4(bf[np], bt + swizzled<8>(n0 + (lane & 7) + (lane >> 4) * 8, 2 * ks + ((lane >> 3) & 1)));
        else
          ldmatrix_x4<true>(bf[np],
                            bt + swizzled<8>(16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8, n0 / 8 + (lane >> 4)));
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) Mma<T>::run(acc[mt][nt], af[mt], bf[nt >> 1] + 2 * (nt & 1));
    }
    __syncthreads();  // the stage is free for the copies of slice s + 2
  }
  cp_async_wait<0>();
  // C: a lane's two adjacent columns as one word where C's rows are contiguous and even, else one by one
  const bool pairs = p.c_col == 1 && p.c_row % 2 == 0 && reinterpret_cast<uintptr_t>(C) % 4 == 0;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = row0 + wm + 16 * mt + gq + 8 * h, col = col0 + wn + 8 * nt + 2 * tig;
        if (row >= row_end || col >= col_end) continue;
        const float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
        if (pairs && col % 2 == 0 && col + 1 < col_end) {  // (a column group may start at an odd column)
          *reinterpret_cast<uint32_t*>(C + row * p.c_row + col) = pack(T(v0), T(v1));
        } else {
          C[row * p.c_row + col * p.c_col] = T(v0);
          if (col + 1 < col_end) C[row * p.c_row + (col + 1) * p.c_col] = T(v1);
        }
      }
}

template <typename T>
void launch(const GroupedGemmArgs& g, dim3 grid, cudaStream_t s, bool ak, bool bk) {
  if (ak && bk) grouped_mma_kernel<T, true, true><<<grid, kWarps * 32, 0, s>>>(g);
  else if (ak) grouped_mma_kernel<T, true, false><<<grid, kWarps * 32, 0, s>>>(g);
  else if (bk) grouped_mma_kernel<T, false, true><<<grid, kWarps * 32, 0, s>>>(g);
  else grouped_mma_kernel<T, false, false><<<grid, kWarps * 32, 0, s>>>(g);
}

} // namespace

// Launches the tensor-core kernel when the operands allow it (fp16/bf16, each operand with a unit stride, every
// other stride and the bases 16-byte aligned); false (nothing launched) otherwise.
bool grouped_gemm_mma(const GroupedGemmArgs& g, dim3 grid, rt::Stream stream) {
  if (g.dtype != DType::Half && g.dtype != DType::BFloat16) return false;
  auto aligned = [](const void* base, std::initializer_list<int64_t> strides) {
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
    for (int64_t st : strides)
      if (st % 8 != 0) return false;
    return true;
  };
  const bool ak = g.a_col == 1, bk = g.b_row == 1;
  if (!(ak || g.a_row == 1) || !(bk || g.b_col == 1)) return false;
  if (!aligned(g.a, {ak ? g.a_row : g.a_col, g.a_group}) || !aligned(g.b, {bk ? g.b_col : g.b_row, g.b_group}))
    return false;
  const cudaStream_t s = native(stream);
  if (g.dtype == DType::Half) launch<c10::Half>(g, grid, s, ak, bk);
  else launch<c10::BFloat16>(g, grid, s, ak, bk);
  return true;
}

} // namespace mytorch::cuda
