// Sim twin of cuda/linalg.cu (Note [Triangular solve]).
#include "mytorch/linalg.h"

#include <algorithm>

#include "mytorch/parallel.h"

namespace mytorch::sim {

namespace {

// Note [Triangular solve] on the sim: a batch item's columns [j0, j1) substituted together, row by row, so the
// inner loop runs along a row of X (contiguous, vectorised) where solve_column walks a column (stride k). Each
// element takes solve_column's operations in its order (acc -= A[i][p] X[p][j] for p ascending, then the division),
// so the results are the same; the (item, block of columns) tasks run in parallel. One column at a time on one
// thread, linalg.lu_factor's backward (6 solves of 60 x 60 x 60) ran at 0.34x the CPU's trsm (docs/speed.md).
constexpr int64_t kCols = 256;

template <typename T>
void solve_columns(const TrsmArgs& t, int64_t m, int64_t j0, int64_t j1) {
  const T* A = static_cast<const T*>(t.a) + m * t.n * t.n;
  T* X = static_cast<T*>(t.x) + m * t.n * t.k;
  for (int64_t step = 0; step < t.n; ++step) {
    const int64_t i = t.upper ? t.n - 1 - step : step;
    T* xi = X + i * t.k;
    const int64_t p0 = t.upper ? i + 1 : 0, p1 = t.upper ? t.n : i;
    for (int64_t p = p0; p < p1; ++p) {
      const T a = A[i * t.n + p];
      const T* xp = X + p * t.k;
      for (int64_t j = j0; j < j1; ++j) xi[j] -= a * xp[j];
    }
    if (!t.unitriangular) {
      const T d = A[i * t.n + i];
      for (int64_t j = j0; j < j1; ++j) xi[j] = xi[j] / d;
    }
  }
}

} // namespace

rt::Status triangular_solve(const TrsmArgs& a, rt::Stream) {
  const int64_t blocks = (a.k + kCols - 1) / kCols, tasks = a.batch * blocks;
  const int64_t work = a.n * a.n * std::min(a.k, kCols) / 2 + 1;  // multiply-adds a task
  const bool ok = dispatch_float_double(a.dtype, [&](auto tag) {
    par::parallel_for(tasks, par::grain_for(work), [&](int64_t b, int64_t e) {
      for (int64_t task = b; task < e; ++task) {
        const int64_t j0 = task % blocks * kCols;
        solve_columns<decltype(tag)>(a, task / blocks, j0, std::min(a.k, j0 + kCols));
      }
    });
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "linalg_solve_triangular: expected float or double");
}

} // namespace mytorch::sim
