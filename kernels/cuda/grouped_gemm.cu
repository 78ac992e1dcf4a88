// Grouped GEMM (torch._grouped_mm; the modes are in gemm.h): every group in one launch. Each block owns a
// 64 x 64 tile of C; along the grouped dimension the tiles are laid out group by group, and a block finds its
// group by walking the groups' tile counts from `offs` (a handful of groups, read from the device: the host
// never learns the group sizes). The grid is sized for the worst case (one partial tile per group) and the
// blocks past the last tile return at once. 16 x 16 threads compute 4 x 4 outputs each from float32 tiles
// in shared memory, so any strides and every floating dtype take the same path.
#include <type_traits>

#include "common.cuh"
#include "grouped_gemm.cuh"
#include "mytorch/gemm.h"

namespace mytorch::cuda {
namespace {

constexpr int kDepth = 16;  // contraction slice per shared-memory stage
constexpr int kSide = 16;   // threads per side of the block; each computes (kGgTile / kSide)^2 outputs
constexpr int kPer = kGgTile / kSide;

template <typename T>
__global__ void grouped_gemm_kernel(GroupedGemmArgs p) {
  __shared__ float As[kDepth][kGgTile + 1];
  __shared__ float Bs[kDepth][kGgTile + 1];
  GroupTile<T> t;
  if (!locate_tile(p, &t)) return;
  const T *A = t.A, *B = t.B;
  T* C = t.C;
  const int64_t row0 = t.row0, row_end = t.row_end, col0 = t.col0, col_end = t.col_end, k_lo = t.k_lo, k_hi = t.k_hi;
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  float acc[kPer][kPer] = {};
  for (int64_t k0 = k_lo; k0 < k_hi; k0 += kDepth) {
    for (int i = threadIdx.x; i < kGgTile * kDepth; i += kSide * kSide) {
      const int r = i / kDepth, kk = i % kDepth;
      const int64_t row = row0 + r, kidx = k0 + kk;
      As[kk][r] = row < row_end && kidx < k_hi ? static_cast<float>(A[row * p.a_row + kidx * p.a_col]) : 0.0f;
      const int kb = i / kGgTile, c = i % kGgTile;
      const int64_t col = col0 + c, kidx_b = k0 + kb;
      Bs[kb][c] = col < col_end && kidx_b < k_hi ? static_cast<float>(B[kidx_b * p.b_row + col * p.b_col]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDepth; ++kk) {
      float av[kPer], bv[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) av[i] = As[kk][ty + kSide * i];
#pragma unroll
      for (int j = 0; j < kPer; ++j) bv[j] = Bs[kk][tx + kSide * j];
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t row = row0 + ty + kSide * i;
    if (row >= row_end) continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t col = col0 + tx + kSide * j;
      if (col < col_end) C[row * p.c_row + col * p.c_col] = mt_cast<T, float>(acc[i][j]);
    }
  }
}

} // namespace

bool grouped_gemm_mma(const GroupedGemmArgs& g, dim3 grid, rt::Stream stream);  // grouped_gemm_mma.cu

rt::Status grouped_gemm(const GroupedGemmArgs& g, rt::Stream stream) {
  if (g.groups == 0 || g.m == 0 || g.n == 0) return rt::Status::Success;
  auto tiles = [](int64_t n) { return static_cast<unsigned>((n + kGgTile - 1) / kGgTile); };
  dim3 grid;
  switch (g.mode) {  // the grouped dimension on x (the largest grid extent): worst case one partial tile per group
    case GroupMode::Rows: grid = dim3(tiles(g.m) + static_cast<unsigned>(g.groups), tiles(g.n)); break;
    case GroupMode::Cols: grid = dim3(tiles(g.n) + static_cast<unsigned>(g.groups), tiles(g.m)); break;
    case GroupMode::Depth: grid = dim3(tiles(g.n), tiles(g.m), static_cast<unsigned>(g.groups)); break;
  }
  if (grid.y > kMaxGridYZ || grid.z > kMaxGridYZ)
    return rt::report(rt::Status::InvalidValue, "grouped_gemm: too many tiles or groups for one launch");
  if (grouped_gemm_mma(g, grid, stream)) return check_launch("grouped_gemm (tensor cores)");
  bool ok = dispatch_floating(g.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, double>) grouped_gemm_kernel<T><<<grid, kSide * kSide, 0, native(stream)>>>(g);
  });
  if (!ok || g.dtype == DType::Double) return rt::report(rt::Status::InvalidValue, "grouped_gemm: unsupported dtype");
  return check_launch("grouped_gemm");
}

} // namespace mytorch::cuda
