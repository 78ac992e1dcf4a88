// Histogram family: torch.histc (equal-width bins over [lo, hi]) for floating and integer inputs, with CUDA's
// semantics (integer inputs are counted too; the CPU refuses them), and torch.bincount (counts, or sums of
// weights, per non-negative integer value).
//
// Note [histc bins]
// An element x in [lo, hi] falls in bin (x - lo) * bins / (hi - lo), computed in the input's accumulation type
// (float for float/half/bfloat16, double for double, int64 for integers: integer division), and the element
// equal to hi in the last bin; elements outside [lo, hi] and NaN are not counted. Counts accumulate as int64
// (atomics on CUDA: the result does not depend on the schedule) and the glue casts them to the output dtype.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

struct HistcArgs {
  DType dtype = DType::Float;
  const void* in = nullptr;   // contiguous, n elements
  int64_t n = 0;
  int64_t bins = 0;
  double lo = 0, hi = 0;      // finite, lo < hi (the glue widens an empty range)
  int64_t* counts = nullptr;  // bins int64, zeroed by the glue
};

// Accumulation type of a histc input: int64 for integers, else the float opmath type.
template <typename T>
using histc_acc_t = std::conditional_t<std::is_integral<T>::value, int64_t,
                                       std::conditional_t<std::is_same<T, double>::value, double, float>>;

// Note [histc bins]: the bin of x, or -1 when it is not counted.
template <typename A>
MT_HOST_DEVICE inline int64_t histc_bin(A x, A lo, A hi, int64_t bins) {
  if (!(x >= lo && x <= hi)) return -1;
  const int64_t b = static_cast<int64_t>((x - lo) * static_cast<A>(bins) / (hi - lo));
  return b >= bins ? bins - 1 : b;
}

// bincount: counts[v] += 1 for every value v of `in`, or sums[v] += weights[i] with weights (in double: the
// glue casts the sums to the output dtype; on CUDA the weighted sums are atomics, so their order, and the last
// bits of a float result, depend on the schedule, as CUDA PyTorch's).
struct BincountArgs {
  const int64_t* in = nullptr;     // contiguous, n values in [0, bins)
  int64_t n = 0;
  const double* weights = nullptr; // optional, contiguous, n
  int64_t* counts = nullptr;       // bins, zeroed (without weights)
  double* sums = nullptr;          // bins, zeroed (with weights)
};

MT_LAUNCHER(histc, (const HistcArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(bincount, (const BincountArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
