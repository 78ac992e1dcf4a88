// Grouped GEMM helpers shared by the CUDA-core kernel (grouped_gemm.cu) and the tensor-core one
// (grouped_gemm_mma.cu): both tile C in kGgTile x kGgTile blocks laid out group by group along the grouped
// dimension.
#pragma once

#include <cstdint>

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

} // namespace mytorch::cuda
