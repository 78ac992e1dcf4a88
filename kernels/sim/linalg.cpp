// Sim twin of cuda/linalg.cu (Note [Triangular solve]).
#include "mytorch/linalg.h"

namespace mytorch::sim {

rt::Status triangular_solve(const TrsmArgs& a, rt::Stream) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t m = 0; m < a.batch; ++m)
      for (int64_t j = 0; j < a.k; ++j) linalg::solve_column<T>(a, m, j);
  };
  if (a.dtype == DType::Float) run(float{});
  else if (a.dtype == DType::Double) run(double{});
  else return rt::report(rt::Status::InvalidValue, "linalg_solve_triangular: expected float or double");
  return rt::Status::Success;
}

} // namespace mytorch::sim
