// Op table: torch.linalg.lstsq on mytorch (aten::linalg_lstsq.out, which the functional form calls), composed from
// the SVD of the dense solver family (csrc/aten/linalg/Solver.h) and native GEMMs (complex ones too: Note [Complex GEMM]),
// with ATen's checks and outputs per driver. Dtypes the solvers lack (half types) go to the CPU, which refuses
// them.
//
// Note [Least squares]
// X = V diag(1 / s_i) U^H B over the singular values that count, the minimum-norm least-squares solution. It is
// what LAPACK's drivers return for every A of full rank, and for a rank-deficient A what gelsy, gelsd and gelss
// return (gels assumes full rank; LAPACK's answer there depends on its QR, ours stays the minimum-norm one). A
// singular value counts when it exceeds rcond * s_max: gelsd/gelss's rule (rcond < 0 meaning the dtype's eps);
// gelsy estimates the rank from its pivoted QR's triangle instead, which agrees with it whenever the gap in the
// singular values around rcond * s_max is not razor-thin; gels counts every non-zero one. The outputs are ATen's
// per driver: rank for all but gels, singular values for gelsd/gelss, the residuals (squared column norms of the
// part of B outside A's range, (I - U U^H) B, what LAPACK leaves in rows n..m) when m > n and the driver is not
// gelsy (for gelsd/gelss only when every matrix has rank n). The default driver is the CPU's (gelsy): mytorch
// offers every driver, where torch.cuda has only gels. float32 problems are solved in float64 and rounded once:
// linalg.lstsq's gradient is computed from the solution, and an SVD solution's float32 rounding differs from the
// CPU's QR one enough for that gradient to land farther from float64 than the CPU's (by 2x at an element).
// gels of a tall or square real A is the exception: it is LAPACK's and torch.cuda's algorithm, Householder QR, Q^H B
// and the triangular solve R X = (Q^H B)[:n], at the input's precision, residuals the squared norms of rows n..m of
// Q^H B, and an exactly zero diagonal element of R refused as LAPACK's trtrs refuses it (the CPU's "does not have
// full rank (error code: i)"). The gradient (pinv(A)'s backward plus a term in the residual B - A X) cancels the
// float32 errors of its pinv(A) only against a solution that carries a float32 solve's errors: with the float64
// solution rounded, an element of A's gradient landed 2.05x farther from float64 than the CPU's on an AMD EPYC,
// where the CPU's LAPACK rounds differently from the Intel machine the float64 route was measured on. (Complex gels
// stays on the SVD: the triangular solve has no complex kernel.)
#include <ATen/core/Tensor.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_solve_triangular.h>
#include <ATen/ops/linalg_lstsq_ops.h>
#include <ATen/ops/linalg_svd.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>
#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/linalg/Solver.h"
#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;
using Outputs = std::tuple<Tensor&, Tensor&, Tensor&, Tensor&>;

std::string driverName(std::optional<c10::string_view> driver) {
  if (!driver.has_value()) return "gelsy";
  std::string name(driver->begin(), driver->end());
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  TORCH_CHECK(name == "gels" || name == "gelsy" || name == "gelsd" || name == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  return name;
}

// ATen's argument checks, in its order and with its messages.
void checkArguments(const Tensor& A, const Tensor& B, const Tensor& solution, const Tensor& residuals,
                    const Tensor& rank, const Tensor& sv) {
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(B.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(),
              "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype ",
              A.scalar_type(), " and other's dtype ", B.scalar_type());
  const int64_t dim_diff = A.dim() - B.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1,
              "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - "
              "other.dim()) <= 1");
  const Tensor B2 = dim_diff ? B.unsqueeze(-1) : B;
  TORCH_CHECK(A.size(-2) == B2.size(-2), dim_diff ? "torch.linalg.lstsq: input.size(-2) should match other.size(-1)"
                                                  : "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  const std::string fn = "torch.linalg.lstsq";
  at::native::checkSameDevice(fn, B, A, "other");
  at::native::checkSameDevice(fn, solution, A, "solution");
  at::native::checkSameDevice(fn, residuals, A, "residuals");
  at::native::checkSameDevice(fn, rank, A, "rank");
  at::native::checkSameDevice(fn, sv, A, "singular_values");
  at::native::checkLinalgCompatibleDtype(fn, solution, A, "solution");
  const auto real = c10::toRealValueType(A.scalar_type());
  at::native::checkLinalgCompatibleDtype(fn, residuals.scalar_type(), real, "solution"); // (ATen's name for it)
  at::native::checkLinalgCompatibleDtype(fn, rank.scalar_type(), at::kLong, "rank");
  at::native::checkLinalgCompatibleDtype(fn, sv.scalar_type(), real, "singular_values");
}

// gels of a tall or square A (m >= n > 0): QR at the input's precision (Note [Least squares]). B2: [..., m, k].
// Returns the solution [batch, n, k] and the residuals [batch, k] (empty when m == n).
std::tuple<Tensor, Tensor> gelsQr(const Tensor& A, const Tensor& B2) {
  const int64_t m = A.size(-2), n = A.size(-1);
  const auto batch = at::infer_size(A.sizes().slice(0, A.dim() - 2), B2.sizes().slice(0, B2.dim() - 2));
  Tensor a = solver::columnMajor(A, batch), c = solver::columnMajor(B2, batch);
  std::vector<int64_t> tau_shape(batch.begin(), batch.end());
  tau_shape.push_back(n);
  Tensor tau = at::empty(tau_shape, A.options());
  solver::geqrf(a, tau);
  solver::ormqr(a, tau, c, /*left=*/true, /*transpose=*/true);
  const Tensor R = a.narrow(-2, 0, n).triu();
  // trtrs's refusal: the first exactly zero diagonal element, 1-based, per matrix.
  const Tensor zero = R.diagonal(0, -2, -1).abs().eq(0);
  const Tensor info = at::where(zero.any(-1), zero.to(at::kInt).argmax(-1).add(1), 0).to(at::kInt);
  at::_linalg_check_errors(info, "torch.linalg.lstsq", info.numel() <= 1); // ATen's rule for the prefix
  Tensor X = at::linalg_solve_triangular(R, c.narrow(-2, 0, n), /*upper=*/true);
  const auto real = c10::toRealValueType(A.scalar_type());
  Tensor res = m > n ? c.narrow(-2, n, m - n).abs().square().sum(-2).to(real) : at::empty({0}, A.options().dtype(real));
  return {X, res};
}

Outputs lstsqOut(const Tensor& A, const Tensor& B, std::optional<double> rcond, std::optional<c10::string_view> driver,
                 Tensor& solution, Tensor& residuals, Tensor& rank, Tensor& sv) {
  // The half types the CPU refuses; batched vector right-hand sides whose shape is not A's batch (ATen treats them
  // as neither case) go there too.
  checkArguments(A, B, solution, residuals, rank, sv);
  const std::string name = driverName(driver);
  const bool oddRhs = A.dim() == B.dim() + 1 && !at::native::linalg_solve_is_vector_rhs(A, B);
  if (!solver::supported(A) || oddRhs)
    return Fallback<at::_ops::linalg_lstsq_out>::call(A, B, rcond, driver, solution, residuals, rank, sv);
  const bool vector = at::native::linalg_solve_is_vector_rhs(A, B);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const auto real = c10::toRealValueType(A.scalar_type());
  if (name == "gels" && m >= n && n > 0 && !A.is_complex()) {
    auto [X, res] = gelsQr(A, vector ? B.unsqueeze(-1) : B);
    assignOut(solution, vector ? X.squeeze(-1) : X);
    assignOut(residuals, res);
    assignOut(rank, at::empty({0}, A.options().dtype(at::kLong)));
    assignOut(sv, at::empty({0}, A.options().dtype(real)));
    return {solution, residuals, rank, sv};
  }
  // float32 and complex64 are solved in double precision and rounded once (Note [Least squares]).
  const auto work = A.scalar_type() == at::kFloat          ? at::kDouble
                    : A.scalar_type() == at::kComplexFloat ? at::kComplexDouble
                                                           : A.scalar_type();
  const Tensor B2 = (vector ? B.unsqueeze(-1) : B).to(work);
  const double eps = at::native::_get_epsilon(real);
  const double r = rcond.has_value() ? *rcond : eps * static_cast<double>(std::max(m, n));
  // Note [Least squares]: which singular values count
  const double cut = name == "gels" ? 0.0 : (r >= 0 ? r : (name == "gelsy" ? 0.0 : eps));

  auto [U, S, Vh] = at::linalg_svd(A.to(work), /*full_matrices=*/false);
  const Tensor keep = k > 0 ? at::logical_and(S.gt(S.narrow(-1, 0, 1).mul(cut)), S.gt(0)) : S.gt(0);
  const Tensor inv = at::where(keep, S.reciprocal(), at::zeros({}, S.options()));
  const Tensor UhB = at::matmul(U.mH(), B2); // the batch dimensions broadcast here
  Tensor X = at::matmul(Vh.mH(), UhB.mul(inv.unsqueeze(-1).to(UhB.scalar_type())));
  const Tensor ranks = keep.sum(-1);

  Tensor res = at::empty({0}, A.options().dtype(real));
  bool with_residuals = m > n && name != "gelsy";
  if (with_residuals && (name == "gelsd" || name == "gelss")) with_residuals = ranks.eq(n).all().item<bool>();
  if (with_residuals) res = B2.sub(at::matmul(U, UhB)).abs().square().sum(-2).to(real);
  if (with_residuals && n == 0 && name == "gels") res.zero_(); // LAPACK's gels zeroes B when min(m, n) == 0
  if (vector) X = X.squeeze(-1);

  assignOut(solution, X.to(A.scalar_type()));
  assignOut(residuals, res);
  assignOut(rank, name == "gels" ? at::empty({0}, A.options().dtype(at::kLong)) : ranks);
  assignOut(sv, name == "gelsd" || name == "gelss" ? S.to(real) : at::empty({0}, A.options().dtype(real)));
  return {solution, residuals, rank, sv};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { MT_IMPL(m, "linalg_lstsq.out", lstsqOut); }

} // namespace mytorch
