// Op table: Cholesky, eigh, SVD, QR and the triangular solve of torch.linalg on mytorch — linalg.cholesky(_ex),
// cholesky, cholesky_inverse, cholesky_solve, eigh/eigvalsh, svd/svdvals, qr, geqrf, householder_product, ormqr,
// triangular_solve — composed from the dense
// solvers' primitives (csrc/aten/linalg/Solver.h; Note [Dense solver family]) and native tensor ops as ATen composes
// them, with ATen's checks (its meta kernels, or its own messages where an operator has none). Dtypes the solvers
// lack go to the counted CPU fallback, which raises the CPU's error for them.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_cholesky_solve_helper_ops.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/_linalg_eigh.h>
#include <ATen/ops/_linalg_eigh_ops.h>
#include <ATen/ops/_linalg_svd.h>
#include <ATen/ops/_linalg_svd_ops.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cholesky_inverse_ops.h>
#include <ATen/ops/cholesky_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/geqrf_ops.h>
#include <ATen/ops/linalg_householder_product.h>
#include <ATen/ops/linalg_householder_product_ops.h>
#include <ATen/ops/linalg_qr.h>
#include <ATen/ops/linalg_qr_ops.h>
#include <ATen/ops/ormqr.h>
#include <ATen/ops/ormqr_ops.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <ATen/ops/linalg_cholesky_ex_ops.h>
#include <ATen/ops/linalg_solve_triangular.h>
#include <ATen/ops/triangular_solve.h>
#include <ATen/ops/triangular_solve_ops.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/MetaCache.h"
#include "csrc/aten/linalg/Solver.h"
#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;
using std::get;

std::vector<int64_t> batchShape(const Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - 2);
}

void squareCheck(const Tensor& A, const char* name) {
  TORCH_CHECK(A.dim() >= 2, name, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), name, ": A must be batches of square matrices, but they are ", A.size(-2),
              " by ", A.size(-1), " matrices");
}

// The out= of the linear-algebra operators that are not structured (cholesky, cholesky_inverse): any dtype the
// result casts to safely (ATen's checkLinalgCompatibleDtype).
Tensor& compatibleOut(Tensor& out, const Tensor& value, const char* name, OutLayout layout = OutLayout::ResultIfEmpty) {
  TORCH_CHECK(at::canCast(value.scalar_type(), out.scalar_type()), name,
              ": Expected result to be safely castable from ", value.scalar_type(),
              " dtype, but got result with dtype ", out.scalar_type());
  return assignOut(out, value, layout);
}

Tensor intInfo(const Tensor& A) { return at::empty(batchShape(A), A.options().dtype(at::kInt)); }

// ---- Cholesky ----------------------------------------------------------------------------------------------------

// The factor of A in a fresh column-major tensor, the other triangle cleared, and info.
std::tuple<Tensor, Tensor> choleskyFactor(const Tensor& A, bool upper) {
  Tensor L = solver::columnMajor(A);
  Tensor info = intInfo(A);
  solver::cholesky(L, upper, info);
  if (upper) L.triu_();
  else L.tril_();
  return {L, info};
}

std::tuple<Tensor, Tensor> choleskyEx(const Tensor& A, bool upper, bool check_errors) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_cholesky_ex>::call(A, upper, check_errors);
  auto m =
      cachedMeta("linalg_cholesky_ex", [&] { return at::linalg_cholesky_ex(metaLike(A), upper, false); }, A, upper);
  auto f = choleskyFactor(A, upper);
  Tensor L = emptyLike(get<0>(m), A), info = emptyLike(get<1>(m), A);
  L.copy_(get<0>(f));
  info.copy_(get<1>(f));
  if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
  return {L, info};
}

std::tuple<Tensor&, Tensor&> choleskyExOut(const Tensor& A, bool upper, bool check_errors, Tensor& L, Tensor& info) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_cholesky_ex_L>::call(A, upper, check_errors, L, info);
  auto r = choleskyEx(A, upper, check_errors);
  assignExactOut(L, get<0>(r));
  assignExactOut(info, get<1>(r));
  return {L, info};
}

// torch.cholesky (deprecated): ATen's checks, warning and error, a column-major result.
Tensor choleskyDeprecated(const Tensor& A, bool upper) {
  if (!solver::supported(A)) return Fallback<at::_ops::cholesky>::call(A, upper);
  TORCH_WARN_ONCE("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be ",
                  "removed in a future PyTorch release.\n", "L = torch.cholesky(A)\n", "should be replaced with\n",
                  "L = torch.linalg.cholesky(A)\n", "and\n", "U = torch.cholesky(A, upper=True)\n",
                  "should be replaced with\n", "U = torch.linalg.cholesky(A).mH\n",
                  "This transform will produce equivalent results for all valid (symmetric positive definite) inputs.");
  if (A.numel() == 0) return at::empty_like(A, at::MemoryFormat::Contiguous);
  squareCheck(A, "cholesky");
  auto f = choleskyFactor(A, upper);
  at::_linalg_check_errors(get<1>(f), "cholesky", A.dim() == 2);
  return get<0>(f);
}

Tensor& choleskyOut(const Tensor& A, bool upper, Tensor& out) {
  if (!solver::supported(A)) return Fallback<at::_ops::cholesky_out>::call(A, upper, out);
  return compatibleOut(out, choleskyDeprecated(A, upper), "cholesky", OutLayout::Contiguous);
}

// A^-1 from A's factor (A = L L^H or U^H U): the factor's solve of the identity. A zero on the factor's diagonal
// raises ATen's error for potri's info (the first such position), a host synchronisation as on torch.cuda.
Tensor choleskyInverse(const Tensor& factor, bool upper) {
  if (!solver::supported(factor)) return Fallback<at::_ops::cholesky_inverse>::call(factor, upper);
  squareCheck(factor, "cholesky_inverse");
  if (factor.numel() == 0) return solver::columnMajor(factor);
  const Tensor zero = factor.diagonal(0, -2, -1).abs().eq(0);
  Tensor info = at::where(zero.any(-1), at::argmax(zero.to(at::kInt), -1).add(1), 0).to(at::kInt);
  at::_linalg_check_errors(info, "cholesky_inverse", factor.dim() == 2);
  Tensor f = solver::columnMajor(factor);
  Tensor x = solver::eyeLike(factor, batchShape(factor), factor.size(-1));
  solver::choleskySolve(f, x, upper);
  return x;
}

Tensor& choleskyInverseOut(const Tensor& factor, bool upper, Tensor& out) {
  if (!solver::supported(factor)) return Fallback<at::_ops::cholesky_inverse_out>::call(factor, upper, out);
  return compatibleOut(out, choleskyInverse(factor, upper), "cholesky_inverse");
}

// cholesky_solve's kernel: B and the factor A already broadcast by the composite cholesky_solve.
Tensor choleskySolveHelper(const Tensor& B, const Tensor& A, bool upper) {
  if (!solver::supported(A) || !solver::supported(B))
    return Fallback<at::_ops::_cholesky_solve_helper>::call(B, A, upper);
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "cholesky_solve: expected the factor and B to have one dtype, got ",
              A.scalar_type(), " and ", B.scalar_type());
  squareCheck(A, "cholesky_solve");
  TORCH_CHECK(B.dim() >= 2 && B.size(-2) == A.size(-1) && batchShape(A) == batchShape(B),
              "cholesky_solve: expected B of shape (*, ", A.size(-1), ", k) with the factor's batch shape ",
              A.sizes().slice(0, A.dim() - 2), ", got ", B.sizes());
  Tensor x = solver::columnMajor(B);
  solver::choleskySolve(solver::columnMajor(A), x, upper);
  return x;
}

Tensor& choleskySolveHelperOut(const Tensor& B, const Tensor& A, bool upper, Tensor& out) {
  if (!solver::supported(A) || !solver::supported(B))
    return Fallback<at::_ops::_cholesky_solve_helper_out>::call(B, A, upper, out);
  return assignExactOut(out, choleskySolveHelper(B, A, upper));
}

// ---- eigh --------------------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> eigh(const Tensor& A, c10::string_view uplo, bool compute_v) {
  if (!solver::supported(A)) return Fallback<at::_ops::_linalg_eigh>::call(A, uplo, compute_v);
  auto m =
      cachedMeta("_linalg_eigh", [&] { return at::_linalg_eigh(metaLike(A), uplo, compute_v); }, A, uplo, compute_v);
  Tensor w = emptyLike(get<0>(m), A), V = emptyLike(get<1>(m), A);
  if (A.numel() == 0) return {w, V};
  const bool upper = std::toupper(static_cast<unsigned char>(uplo[0])) == 'U';
  Tensor a = solver::columnMajor(A);
  Tensor wc = w.is_contiguous() ? w : at::empty(w.sizes(), w.options());
  Tensor info = intInfo(A);
  solver::eigh(a, wc, upper, compute_v, info);
  at::_linalg_check_errors(info, "linalg.eigh", A.dim() == 2);
  if (!wc.is_same(w)) w.copy_(wc);
  if (compute_v) V.copy_(a);
  return {w, V};
}

std::tuple<Tensor&, Tensor&> eighOut(const Tensor& A, c10::string_view uplo, bool compute_v, Tensor& w, Tensor& V) {
  if (!solver::supported(A)) return Fallback<at::_ops::_linalg_eigh_eigenvalues>::call(A, uplo, compute_v, w, V);
  auto r = eigh(A, uplo, compute_v);
  assignExactOut(w, get<0>(r));
  assignExactOut(V, get<1>(r));
  return {w, V};
}

// ---- SVD ---------------------------------------------------------------------------------------------------------

// gesvd takes m >= n: on cuda a wide A is decomposed as its adjoint, A^H = U' S V'^H, so U = V' and Vh = U'^H, as
// torch.cuda does (the CPU's LAPACK takes A itself: so does sim, whose singular vectors are then the CPU's). `driver`
// (torch.cuda's choice of cuSOLVER routine) is accepted on the CUDA runtime, where every driver is gesvd's
// answer, and refused elsewhere as the CPU refuses it.
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices, bool compute_uv,
                                       std::optional<c10::string_view> driver) {
  if (!solver::supported(A) || (driver.has_value() && onSim()))
    return Fallback<at::_ops::_linalg_svd>::call(A, full_matrices, compute_uv, driver);
  if (driver.has_value()) {
    const std::string d(*driver);
    TORCH_CHECK(d == "gesvd" || d == "gesvdj" || d == "gesvda", "torch.linalg.svd: unknown svd driver ", d,
                " in svd_cusolver computation. ", "Available drivers are gesvd, gesvdj, and gesvda.");
  }
  auto m = cachedMeta(
      "_linalg_svd", [&] { return at::_linalg_svd(metaLike(A), full_matrices, compute_uv, std::nullopt); }, A,
      full_matrices, compute_uv);
  Tensor U = emptyLike(get<0>(m), A), S = emptyLike(get<1>(m), A), Vh = emptyLike(get<2>(m), A);
  if (A.numel() == 0) {
    if (compute_uv && full_matrices) {
      for (Tensor* t : {&U, &Vh})
        if (t->numel() != 0) {
          t->zero_();
          t->diagonal(0, -2, -1).fill_(1);
        }
    }
    return {U, S, Vh};
  }
  const bool wide = A.size(-2) < A.size(-1) && !onSim();
  const Tensor tall = wide ? A.mH() : A;
  const int64_t rows = tall.size(-2), cols = tall.size(-1);
  const char job = compute_uv ? (full_matrices ? 'A' : 'S') : 'N';
  Tensor a = solver::columnMajor(tall);
  std::vector<int64_t> batch = batchShape(A), u_shape = batch, vh_shape = batch, s_shape = batch;
  const int64_t k = std::min(rows, cols);
  u_shape.insert(u_shape.end(), {job == 'A' ? rows : k, rows});  // transposed: column-major below
  vh_shape.insert(vh_shape.end(), {cols, job == 'A' ? cols : k});
  s_shape.push_back(k);
  Tensor u, vh;
  if (compute_uv) {
    u = at::empty(u_shape, A.options()).mT();
    vh = at::empty(vh_shape, A.options()).mT();
  }
  Tensor s = at::empty(s_shape, S.options());
  Tensor info = intInfo(A);
  solver::svd(a, s, u, vh, job, info);
  at::_linalg_check_errors(info, "linalg.svd", A.dim() == 2);
  S.copy_(s);
  if (compute_uv) {
    U.copy_(wide ? vh.mH() : u);
    Vh.copy_(wide ? u.mH() : vh);
  }
  return {U, S, Vh};
}

std::tuple<Tensor&, Tensor&, Tensor&> svdOut(const Tensor& A, bool full_matrices, bool compute_uv,
                                             std::optional<c10::string_view> driver, Tensor& U, Tensor& S, Tensor& Vh) {
  if (!solver::supported(A) || (driver.has_value() && onSim()))
    return Fallback<at::_ops::_linalg_svd_U>::call(A, full_matrices, compute_uv, driver, U, S, Vh);
  auto r = svd(A, full_matrices, compute_uv, driver);
  assignExactOut(U, get<0>(r));
  assignExactOut(S, get<1>(r));
  assignExactOut(Vh, get<2>(r));
  return {U, S, Vh};
}

// ---- QR ----------------------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> geqrfOp(const Tensor& A) {
  if (!solver::supported(A)) return Fallback<at::_ops::geqrf>::call(A);
  TORCH_CHECK(A.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  std::vector<int64_t> tau_shape = batchShape(A);
  tau_shape.push_back(std::min(A.size(-2), A.size(-1)));
  Tensor a = solver::columnMajor(A), tau = at::empty(tau_shape, A.options());
  solver::geqrf(a, tau);
  return {a, tau};
}

std::tuple<Tensor&, Tensor&> geqrfOut(const Tensor& A, Tensor& a, Tensor& tau) {
  if (!solver::supported(A)) return Fallback<at::_ops::geqrf_a>::call(A, a, tau);
  auto r = geqrfOp(A);
  compatibleOut(a, get<0>(r), "torch.geqrf");
  compatibleOut(tau, get<1>(r), "torch.geqrf");
  return {a, tau};
}

Tensor householderProduct(const Tensor& A, const Tensor& tau) {
  if (!solver::supported(A) || !solver::supported(tau))
    return Fallback<at::_ops::linalg_householder_product>::call(A, tau);
  Tensor m = cachedMeta(
      "linalg_householder_product", [&] { return at::linalg_householder_product(metaLike(A), metaLike(tau)); }, A,
      tau);  // ATen's checks and layout
  Tensor q = solver::columnMajor(A);
  solver::orgqr(q, tau);
  Tensor out = emptyLike(m, A);
  out.copy_(q);
  return out;
}

Tensor& householderProductOut(const Tensor& A, const Tensor& tau, Tensor& out) {
  if (!solver::supported(A) || !solver::supported(tau))
    return Fallback<at::_ops::linalg_householder_product_out>::call(A, tau, out);
  return compatibleOut(out, householderProduct(A, tau), "torch.linalg.householder_product");
}

Tensor ormqrOp(const Tensor& A, const Tensor& tau, const Tensor& C, bool left, bool transpose) {
  if (!solver::supported(A) || !solver::supported(tau) || !solver::supported(C))
    return Fallback<at::_ops::ormqr>::call(A, tau, C, left, transpose);
  Tensor m = cachedMeta(
      "ormqr", [&] { return at::ormqr(metaLike(A), metaLike(tau), metaLike(C), left, transpose); }, A, tau, C, left,
      transpose);
  Tensor c = solver::columnMajor(C);
  solver::ormqr(solver::columnMajor(A), tau, c, left, transpose);
  Tensor out = emptyLike(m, C);
  out.copy_(c);
  return out;
}

Tensor& ormqrOut(const Tensor& A, const Tensor& tau, const Tensor& C, bool left, bool transpose, Tensor& out) {
  if (!solver::supported(A) || !solver::supported(tau) || !solver::supported(C))
    return Fallback<at::_ops::ormqr_out>::call(A, tau, C, left, transpose, out);
  TORCH_CHECK(out.scalar_type() == A.scalar_type(), "torch.ormqr: Expected input and result to have the same dtype, ",
              "but input has dtype", A.scalar_type(), " and result has dtype ", out.scalar_type());
  return assignOut(out, ormqrOp(A, tau, C, left, transpose));
}

// ATen's linalg_qr: geqrf, R the upper triangle of its first k rows (all m in 'complete' mode), Q formed from the
// reflectors by orgqr with k or m columns.
std::tuple<Tensor, Tensor> qr(const Tensor& A, c10::string_view mode) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_qr>::call(A, mode);
  auto m = cachedMeta("linalg_qr", [&] { return at::linalg_qr(metaLike(A), mode); }, A, mode);
  Tensor Q = emptyLike(get<0>(m), A), R = emptyLike(get<1>(m), A);
  const int64_t rows = A.size(-2), cols = A.size(-1), k = std::min(rows, cols);
  if (A.numel() == 0) {
    R.zero_();
    if (Q.numel() > 0) {
      Q.zero_();
      Q.diagonal(0, -2, -1).fill_(1);
    }
    return {Q, R};
  }
  auto f = geqrfOp(A);
  const Tensor& qr = get<0>(f);
  R.copy_(qr.narrow(-2, 0, R.size(-2)).triu());
  if (Q.numel() > 0) {
    const int64_t qcols = Q.size(-1), keep = std::min(cols, qcols);
    std::vector<int64_t> shape = batchShape(A);
    shape.insert(shape.end(), {qcols, rows});
    Tensor q = at::zeros(shape, A.options()).mT();
    q.narrow(-1, 0, keep).copy_(qr.narrow(-1, 0, keep));
    solver::orgqr(q, get<1>(f).narrow(-1, 0, std::min(k, qcols)));
    Q.copy_(q);
  }
  return {Q, R};
}

std::tuple<Tensor&, Tensor&> qrOut(const Tensor& A, c10::string_view mode, Tensor& Q, Tensor& R) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_qr_out>::call(A, mode, Q, R);
  auto r = qr(A, mode);
  assignExactOut(Q, get<0>(r));
  assignExactOut(R, get<1>(r));
  return {Q, R};
}

// ---- triangular_solve (deprecated) -------------------------------------------------------------------------------

// op(A) X = B with op the transpose or the identity, on linalg.solve_triangular's kernels; the coefficient cloned.
std::tuple<Tensor, Tensor> triangularSolve(const Tensor& B, const Tensor& A, bool upper, bool transpose,
                                           bool unitriangular) {
  if (!solver::supported(A) || !solver::supported(B) || A.is_complex() || B.is_complex())
    return Fallback<at::_ops::triangular_solve>::call(B, A, upper, transpose, unitriangular);
  auto m = cachedMeta(
      "triangular_solve",
      [&] { return at::triangular_solve(metaLike(B), metaLike(A), upper, transpose, unitriangular); }, B, A, upper,
      transpose, unitriangular);
  Tensor X = emptyLike(get<0>(m), B), M = emptyLike(get<1>(m), A);
  M.copy_(A.expand(M.sizes()));
  if (X.numel() > 0)
    X.copy_(at::linalg_solve_triangular(transpose ? M.mT() : M, B, transpose ? !upper : upper, true, unitriangular));
  return {X, M};
}

std::tuple<Tensor&, Tensor&> triangularSolveOut(const Tensor& B, const Tensor& A, bool upper, bool transpose,
                                                bool unitriangular, Tensor& X, Tensor& M) {
  if (!solver::supported(A) || !solver::supported(B) || A.is_complex() || B.is_complex())
    return Fallback<at::_ops::triangular_solve_X>::call(B, A, upper, transpose, unitriangular, X, M);
  auto r = triangularSolve(B, A, upper, transpose, unitriangular);
  assignExactOut(X, get<0>(r));
  assignExactOut(M, get<1>(r));
  return {X, M};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "linalg_cholesky_ex", choleskyEx);
  MT_IMPL(m, "linalg_cholesky_ex.L", choleskyExOut);
  MT_IMPL(m, "cholesky", choleskyDeprecated);
  MT_IMPL(m, "cholesky.out", choleskyOut);
  MT_IMPL(m, "cholesky_inverse", choleskyInverse);
  MT_IMPL(m, "cholesky_inverse.out", choleskyInverseOut);
  MT_IMPL(m, "_cholesky_solve_helper", choleskySolveHelper);
  MT_IMPL(m, "_cholesky_solve_helper.out", choleskySolveHelperOut);
  MT_IMPL(m, "_linalg_eigh", eigh);
  MT_IMPL(m, "_linalg_eigh.eigenvalues", eighOut);
  MT_IMPL(m, "_linalg_svd", svd);
  MT_IMPL(m, "_linalg_svd.U", svdOut);
  MT_IMPL(m, "geqrf", geqrfOp);
  MT_IMPL(m, "geqrf.a", geqrfOut);
  MT_IMPL(m, "linalg_householder_product", householderProduct);
  MT_IMPL(m, "linalg_householder_product.out", householderProductOut);
  MT_IMPL(m, "ormqr", ormqrOp);
  MT_IMPL(m, "ormqr.out", ormqrOut);
  MT_IMPL(m, "linalg_qr", qr);
  MT_IMPL(m, "linalg_qr.out", qrOut);
  MT_IMPL(m, "triangular_solve", triangularSolve);
  MT_IMPL(m, "triangular_solve.X", triangularSolveOut);
}

} // namespace mytorch
