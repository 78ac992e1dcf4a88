// Op table: torch.linalg.solve_triangular on mytorch (kernels: mytorch/linalg.h, Note [Triangular solve]), with
// ATen's checks; batch dimensions broadcast, the dtypes promoted, X A = B solved as the transposed A^T X^T = B^T.
// And linalg.matrix_exp (Note [Matrix exponential]) composed from mytorch's batched GEMM and pointwise kernels.
//
// Note [Matrix exponential]
// exp(A) by scaling and squaring: per matrix, s = the fewest halvings that bring its 1-norm to 1/2 or below, then
// exp(A / 2^s) by the Taylor polynomial of degree 18, evaluated by Paterson and Stockmeyer's scheme (X^2, X^3, X^4,
// then Horner's form over X^4 of blocks that sum I, X, X^2 and X^3: 7 batched GEMMs, where Horner's form over X
// took 17 and ran at 0.50x the CPU, docs/speed.md): its truncation error, below (1/2)^19 / 19! relative, is far
// under float64's rounding; then s squarings, each
// matrix squared only while it has halvings left (one host read of the largest s). ATen's own algorithm picks a
// degree from 1 to 18 per matrix by the norm (Bader, Blanes and Casas); ATen's device-generic code cannot be
// called for this device (it leaves its coefficients on the host off CUDA and calls a kernel stub directly).
// float32 (complex64) matrices are computed in float64 (complex128) and rounded once: the squarings multiply the polynomial's rounding error
// by up to the matrix's condition, and ATen's fewer squarings (it scales to norms up to 5.4) keep its float32
// error lower than a float32 Taylor evaluation would. Matrices with a non-finite norm give NaN, as ATen. float16
// and bfloat16 stay on the CPU: ATen evaluates them in the half type, where its intermediate powers overflow to NaN
// for matrices whose exponential is representable (the OpInfo's samples), so no correct kernel can match it. The gradient is ATen's: the exponential of a 2n x 2n block
// matrix, through this op again.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/exp2.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linalg_matrix_exp_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/linalg/Solver.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/linalg.h"

namespace mytorch {
namespace {

using at::Tensor;

Tensor& solveTriangularOut(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular, Tensor& out) {
  if (A.is_complex() || B.is_complex()) // complex systems: the CPU's solver, counted as a fallback
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
  const auto dtype = A.scalar_type(); // as ATen's: the result is A's dtype, B is cast to it
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
    MT_RT_CHECK(kernels::triangular_solve(t, streamFor(A)));
  }
  // column-major, as ATen's meta function lays the result out (its functional form and a resized out=)
  const Tensor result = solver::columnMajor(left ? x : x.mT());
  checkOutDtype(out, dtype);
  return assignOut(out, result);
}

Tensor solveTriangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  Tensor out = at::empty({0}, A.options());
  return solveTriangularOut(A, B, upper, left, unitriangular, out);
}

Tensor matrixExp(const Tensor& A) {
  // half types: the CPU's (Note [Matrix exponential]); the rest the CPU refuses
  const auto t = A.scalar_type();
  if (t != at::kFloat && t != at::kDouble && t != at::kComplexFloat && t != at::kComplexDouble)
    return Fallback<at::_ops::linalg_matrix_exp>::call(A);
  TORCH_CHECK(A.dim() >= 2, "linalg.matrix_exp: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.matrix_exp: A must be batches of square matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
  const int64_t n = A.size(-1);
  if (A.numel() == 0) return A.clone(at::MemoryFormat::Contiguous);
  if (n == 1 && !A.is_complex()) return A.exp(); // (complex exp has no native kernel: the general path)
  constexpr int kDegree = 18;
  const Tensor a = A.reshape({-1, n, n}).to(A.is_complex() ? at::kComplexDouble : at::kDouble);
  const Tensor norm = a.abs().sum(-2).amax(-1);
  const Tensor finite = norm.isfinite();
  const Tensor s = at::where(finite, norm.mul(2).log2().ceil().clamp_min(0), at::zeros_like(norm));
  const Tensor x = a.mul(at::exp2(s.neg()).view({-1, 1, 1}));
  // Paterson-Stockmeyer: sum_k X^k / k! as blocks B_j = sum_{i<4} c_{4j+i} X^i (pointwise sums of I, X, X^2, X^3)
  // in Horner's form over X^4: 3 + 4 batched GEMMs where Horner over X took 17
  double c[kDegree + 1] = {1.0};
  for (int k = 1; k <= kDegree; ++k) c[k] = c[k - 1] / k;
  const Tensor x2 = at::bmm(x, x), x3 = at::bmm(x2, x), x4 = at::bmm(x2, x2);
  const Tensor* powers[4] = {nullptr, &x, &x2, &x3};
  const auto block = [&](int j) {
    Tensor b = x.mul(c[4 * j + 1]);
    for (int i = 2; i < 4 && 4 * j + i <= kDegree; ++i) b.add_(*powers[i], c[4 * j + i]);
    b.diagonal(0, -2, -1).add_(c[4 * j]);
    return b;
  };
  Tensor p = block(kDegree / 4);
  for (int j = kDegree / 4 - 1; j >= 0; --j) p = at::baddbmm(block(j), x4, p);
  const int64_t squarings = static_cast<int64_t>(s.max().item<double>());
  for (int64_t i = 0; i < squarings; ++i)
    p = at::where(s.gt(static_cast<double>(i)).view({-1, 1, 1}), at::bmm(p, p), p);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor nans =
      A.is_complex() ? at::full({}, c10::complex<double>(nan, nan), p.options()) : at::full({}, nan, p.options());
  p = at::where(finite.view({-1, 1, 1}), p, nans);
  return p.to(A.scalar_type()).view(A.sizes());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "linalg_matrix_exp", matrixExp);
  MT_IMPL(m, "linalg_solve_triangular", solveTriangular);
  MT_IMPL(m, "linalg_solve_triangular.out", solveTriangularOut);
}

} // namespace mytorch
