// Grouped GEMM helpers shared by the CUDA-core kernel (grouped_gemm.cu) and the tensor-core one
// (grouped_gemm_mma.cu): both tile C in kGgTile x kGgTile blocks laid out group by group along the grouped
// dimension.
#pragma once

#include <cstdint>

#include "mytorch/gemm.h"

namespace mytorch::cuda {

constexpr int kGgTile = 64;  // rows and columns of C per block

// Group g's extent along a dimension of `total`, as ATen's slices give it: [offs[g-1], offs[g]) clamped.
__device__ inline void group_extent(const int32_t* offs, int64_t g, int64_t total, int64_t* lo, int64_t* hi) {
  const int64_t start = g == 0 ? 0 : offs[g - 1];
  *lo = start < 0 ? 0 : (start > total ? total : start);
  const int64_t end = offs[g];
  *hi = end < *lo ? *lo : (end > total ? total : end);
}

// The group and the first index of tile `t` when each group's extent is cut into kGgTile pieces.
__device__ inline bool find_tile(const int32_t* offs, int64_t groups, int64_t total, int64_t t, int64_t* g,
                                 int64_t* first, int64_t* end) {
  for (int64_t i = 0; i < groups; ++i) {
    int64_t lo, hi;
    group_extent(offs, i, total, &lo, &hi);
    const int64_t tiles = (hi - lo + kGgTile - 1) / kGgTile;
    if (t < tiles) {
      *g = i;
      *first = lo + t * kGgTile;
      *end = hi;
      return true;
    }
    t -= tiles;
  }
  return false;
}

// What a block of either kernel owns: C's rows [row0, row_end) and columns [col0, col_end), the contraction
// [k_lo, k_hi), and its group's A, B and C. False when the block has no tile (the grid is sized for the worst case)
// or its tile is empty.
template <typename T>
struct GroupTile {
  int64_t row0, row_end, col0, col_end, k_lo, k_hi;
  const T *A, *B;
  T* C;
};

template <typename T>
__device__ inline bool locate_tile(const GroupedGemmArgs& p, GroupTile<T>* t) {
  t->A = static_cast<const T*>(p.a), t->B = static_cast<const T*>(p.b), t->C = static_cast<T*>(p.c);
  t->row0 = int64_t(blockIdx.y) * kGgTile, t->row_end = p.m;
  t->col0 = int64_t(blockIdx.x) * kGgTile, t->col_end = p.n;
  t->k_lo = 0, t->k_hi = p.k;
  int64_t g = 0;
  if (p.mode == GroupMode::Rows) {
    if (!find_tile(p.offs, p.groups, p.m, blockIdx.x, &g, &t->row0, &t->row_end)) return false;
    t->col0 = int64_t(blockIdx.y) * kGgTile;
    t->B += g * p.b_group;
  } else if (p.mode == GroupMode::Cols) {
    if (!find_tile(p.offs, p.groups, p.n, blockIdx.x, &g, &t->col0, &t->col_end)) return false;
    t->A += g * p.a_group;
  } else {
    g = blockIdx.z;
    group_extent(p.offs, g, p.k, &t->k_lo, &t->k_hi);
    t->C += g * p.c_group;
  }
  return t->row0 < t->row_end && t->col0 < t->col_end;
}

} // namespace mytorch::cuda
