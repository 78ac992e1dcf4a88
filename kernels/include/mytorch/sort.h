// Sort family: sorts independent slices of a tensor, producing values and int64 indices; and membership in a
// sorted set (isin: a binary search per element).
//
// Note [Sort engine]
// Elements compare as (value, original index) pairs, so the order is stable and the same on both runtimes;
// NaN sorts above every number (last ascending, first descending), as in ATen. cuda/ sorts slices of up
// to kSharedSortMax elements with a bitonic network in shared memory (one block per slice), longer ones
// with a merge sort in global memory (one thread per slice: correct, not fast); sim/ sorts pairs or keys by radix
// and selects top-k without sorting (Note [Sim sort and top-k]).
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"

namespace mytorch {

constexpr int64_t kSharedSortMax = 2048;

struct SortArgs {
  DType dtype = DType::Float;
  const void* in = nullptr;     // contiguous [slices, length]
  void* values = nullptr;       // contiguous [slices, length]
  int64_t* indices = nullptr;   // contiguous [slices, length]
  int64_t slices = 0;
  int64_t length = 0;
  bool descending = false;
  // top-k: keep the first k of each sorted slice (values and indices are then [slices, k]); -1 sorts it all. The sim
  // selects (Note [Sim sort and top-k] in sim/sort.cpp); the cuda kernels do not take k yet (the glue sorts there).
  int64_t k = -1;
  void* scratch = nullptr;      // cuda merge sort: 2 * slices * length * (elem + 8) bytes, from the glue
};

// a before b? (value, index) order with NaN above everything.
template <typename O>
MT_HOST_DEVICE inline bool sort_before(O av, int64_t ai, O bv, int64_t bi, bool descending) {
  const bool an = av != av, bn = bv != bv;
  if (an || bn) {
    if (an && bn) return ai < bi;
    return descending ? an : bn;
  }
  if (av == bv) return ai < bi;
  return descending ? av > bv : av < bv;
}

// isin: out[i] = (elements[i] is one of the m values of `sorted`) != invert. `sorted` is ascending in the sort
// engine's order (NaN last), elements and sorted share the dtype, both contiguous.
struct IsinArgs {
  DType dtype = DType::Float;
  const void* elements = nullptr;
  int64_t n = 0;
  const void* sorted = nullptr;
  int64_t m = 0;
  bool invert = false;
  bool* out = nullptr;
};

// Whether x is among s[0..m) (ascending): the first position not below x, then equality. NaN equals nothing,
// as in ATen's isin.
template <typename O, typename T>
MT_HOST_DEVICE inline bool sorted_contains(const T* s, int64_t m, O x) {
  int64_t lo = 0, hi = m;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<O>(s[mid]) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo < m && static_cast<O>(s[lo]) == x;
}

MT_LAUNCHER(sort, (const SortArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(isin, (const IsinArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
