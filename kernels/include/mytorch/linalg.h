// Linear-algebra family: the triangular solve (torch.linalg.solve_triangular; Qwen3-Next's gated delta rule).
//
// Note [Triangular solve]
// A X = B for a batch of n x n triangular A and n x k right-hand sides B, both contiguous (the glue turns
// X A = B into the transposed left solve): each (batch, column) is an independent substitution, forward for a
// lower A, backward for an upper one, accumulated in opmath, divided by the diagonal unless unitriangular.
// sim/ loops; cuda/ gives each (batch, column) a thread (the sizes models use are small: n of tens).
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

struct TrsmArgs {
  DType dtype = DType::Float;  // float or double
  const void* a = nullptr;     // [batch, n, n] contiguous
  void* x = nullptr;           // [batch, n, k] contiguous: B on entry, X on exit
  int64_t batch = 0, n = 0, k = 0;
  bool upper = false, unitriangular = false;
};

namespace linalg {
// Note [Triangular solve]: column j of batch item m, in place.
template <typename T>
MT_HOST_DEVICE inline void solve_column(const TrsmArgs& t, int64_t m, int64_t j) {
  const T* A = static_cast<const T*>(t.a) + m * t.n * t.n;
  T* X = static_cast<T*>(t.x) + m * t.n * t.k;
  for (int64_t step = 0; step < t.n; ++step) {
    const int64_t i = t.upper ? t.n - 1 - step : step;
    T acc = X[i * t.k + j];
    if (t.upper)
      for (int64_t p = i + 1; p < t.n; ++p) acc -= A[i * t.n + p] * X[p * t.k + j];
    else
      for (int64_t p = 0; p < i; ++p) acc -= A[i * t.n + p] * X[p * t.k + j];
    X[i * t.k + j] = t.unitriangular ? acc : acc / A[i * t.n + i];
  }
}
} // namespace linalg

MT_LAUNCHER(triangular_solve, (const TrsmArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
