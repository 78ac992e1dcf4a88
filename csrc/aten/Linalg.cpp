// Op table: torch.linalg.solve_triangular on mytorch (kernels: mytorch/linalg.h, Note [Triangular solve]), with
// ATen's checks; batch dimensions broadcast, the dtypes promoted, X A = B solved as the transposed A^T X^T = B^T.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/linalg.h"

namespace mytorch {
namespace {

using at::Tensor;

Tensor& solveTriangularOut(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular, Tensor& out) {
  if (A.is_complex() || B.is_complex())   // complex systems: the CPU's solver, counted as a fallback
    return Fallback<at::_ops::linalg_solve_triangular_out>::call(A, B, upper, left, unitriangular, out);
  TORCH_CHECK(A.dim() >= 2, "linalg.solve_triangular: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(B.dim() >= 2, "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.solve_triangular: A must be batches of square matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
  const int64_t n = A.size(-1);
  TORCH_CHECK(left ? B.size(-2) == n : B.size(-1) == n,
              "linalg.solve_triangular: Incompatible shapes of A and B for "
              "the equation ",
              left ? "AX = B" : "XA = B", " (", A.size(-2), "x", A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  const auto dtype = at::result_type(A, B);
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble,
              "linalg.solve_triangular: mytorch solves float32 and "
              "float64 systems, but got ",
              dtype);
  // X A = B  <=>  A^T X^T = B^T, with the triangle flipped
  const Tensor a = left ? A : A.mT(), b = left ? B : B.mT();
  const bool up = left ? upper : !upper;
  std::vector<int64_t> batch = at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
  const int64_t k = b.size(-1);
  std::vector<int64_t> a_shape(batch), x_shape(batch);
  a_shape.insert(a_shape.end(), {n, n});
  x_shape.insert(x_shape.end(), {n, k});
  Tensor aw = a.expand(a_shape).to(dtype).contiguous();
  Tensor x = at::empty(x_shape, b.options().dtype(dtype));
  x.copy_(b.expand(x_shape));
  TrsmArgs t;
  t.dtype = toKernelDType(dtype);
  t.a = aw.const_data_ptr();
  t.x = x.data_ptr();
  t.n = n;
  t.k = k;
  t.batch = n * k > 0 ? x.numel() / (n * k) : 0;
  t.upper = up;
  t.unitriangular = unitriangular;
  if (x.numel() > 0) {
    c10::DeviceGuard guard(A.device());
    MT_RT_CHECK(kernels::triangular_solve(t, nativeHandle(currentStream(A.device().index()))));
  }
  const Tensor result = left ? x : x.mT();
  checkOutDtype(out, dtype);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

Tensor solveTriangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  Tensor out = at::empty({0}, A.options().dtype(at::result_type(A, B)));
  return solveTriangularOut(A, B, upper, left, unitriangular, out);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "linalg_solve_triangular", solveTriangular);
  MT_IMPL(m, "linalg_solve_triangular.out", solveTriangularOut);
}

} // namespace mytorch
