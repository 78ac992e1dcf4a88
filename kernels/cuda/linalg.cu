// CUDA linear-algebra family (Note [Triangular solve]): a thread per (batch, column).
#include "common.cuh"
#include "mytorch/linalg.h"

namespace mytorch::cuda {
namespace {

template <typename T>
__global__ void trsm_kernel(TrsmArgs a) {
  const int64_t cols = a.batch * a.k;
  for (const int64_t c : grid_stride(cols)) linalg::solve_column<T>(a, c / a.k, c % a.k);
}

} // namespace

rt::Status triangular_solve(const TrsmArgs& a, rt::Stream stream) {
  if (a.batch == 0 || a.k == 0 || a.n == 0) return rt::Status::Success;
  const bool ok = dispatch_float_double(a.dtype, [&](auto tag) {
    trsm_kernel<decltype(tag)><<<grid_for(a.batch * a.k), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "linalg_solve_triangular: expected float or double");
  return check_launch("linalg_solve_triangular");
}

} // namespace mytorch::cuda
