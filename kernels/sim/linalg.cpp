// Sim twin of cuda/linalg.cu (Note [Triangular solve]).
#include "mytorch/linalg.h"

namespace mytorch::sim {

rt::Status triangular_solve(const TrsmArgs& a, rt::Stream) {
  const bool ok = dispatch_float_double(a.dtype, [&](auto tag) {
    for (int64_t m = 0; m < a.batch; ++m)
      for (int64_t j = 0; j < a.k; ++j) linalg::solve_column<decltype(tag)>(a, m, j);
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "linalg_solve_triangular: expected float or double");
}

} // namespace mytorch::sim
