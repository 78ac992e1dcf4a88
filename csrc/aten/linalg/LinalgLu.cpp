// Op table: the LU family of torch.linalg on mytorch — lu_factor(_ex), lu, lu_unpack, lu_solve, solve(_ex), inv(_ex),
// det, slogdet — composed from the dense solvers' primitives (csrc/aten/linalg/Solver.h; Note [Dense solver family]) and
// native tensor ops, as ATen composes them from LAPACK/cuSOLVER calls (the same transposes, the same pivot
// conventions, the same error checks), so results match the CPU's to rounding. ATen's meta kernels check the
// arguments and give each result's layout. Dtypes the solvers lack (half, bfloat16, integers) go to the counted
// CPU fallback, which raises the CPU's error for them.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/_linalg_det.h>
#include <ATen/ops/_linalg_det_ops.h>
#include <ATen/ops/_linalg_slogdet.h>
#include <ATen/ops/_linalg_slogdet_ops.h>
#include <ATen/ops/_linalg_solve_ex.h>
#include <ATen/ops/_linalg_solve_ex_ops.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/linalg_inv_ex.h>
#include <ATen/ops/linalg_inv_ex_ops.h>
#include <ATen/ops/linalg_lu.h>
#include <ATen/ops/linalg_lu_factor_ex.h>
#include <ATen/ops/linalg_lu_factor_ex_ops.h>
#include <ATen/ops/linalg_lu_ops.h>
#include <ATen/ops/linalg_lu_solve.h>
#include <ATen/ops/linalg_lu_solve_ops.h>
#include <ATen/ops/lu_unpack.h>
#include <ATen/ops/lu_unpack_ops.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <torch/library.h>

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

std::vector<int64_t> batchShape(const Tensor& t, int64_t matrix_dims = 2) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - matrix_dims);
}

// ---- lu_factor ---------------------------------------------------------------------------------------------------

// LU of `a` (its batch expanded to `batch`) into fresh tensors of the meta results' layouts.
std::tuple<Tensor, Tensor, Tensor> luFactor(const Tensor& a, bool pivot, const Tensor& lu_m, const Tensor& piv_m,
                                            const Tensor& info_m) {
  Tensor lu = solver::columnMajor(a, batchShape(lu_m));
  Tensor pivots = emptyLike(piv_m, a), info = emptyLike(info_m, a);
  solver::lu(lu, pivots, info, pivot);
  return {lu, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor> luFactorEx(const Tensor& A, bool pivot, bool check_errors) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_lu_factor_ex>::call(A, pivot, check_errors);
  auto m =
      cachedMeta("linalg_lu_factor_ex", [&] { return at::linalg_lu_factor_ex(metaLike(A), pivot, false); }, A, pivot);
  auto r = luFactor(A, pivot, get<0>(m), get<1>(m), get<2>(m));
  if (check_errors) at::_linalg_check_errors(get<2>(r), "torch.linalg.lu_factor_ex", A.dim() == 2);
  return r;
}

std::tuple<Tensor&, Tensor&, Tensor&> luFactorExOut(const Tensor& A, bool pivot, bool check_errors, Tensor& LU,
                                                    Tensor& pivots, Tensor& info) {
  if (!solver::supported(A))
    return Fallback<at::_ops::linalg_lu_factor_ex_out>::call(A, pivot, check_errors, LU, pivots, info);
  auto r = luFactorEx(A, pivot, check_errors);
  assignExactOut(LU, get<0>(r));
  assignExactOut(pivots, get<1>(r));
  assignExactOut(info, get<2>(r));
  return {LU, pivots, info};
}

// ---- lu_solve ----------------------------------------------------------------------------------------------------

// op(A) X = B (left) or X op(A) = B with A given by its LU, op the adjoint or the identity; `result_m` the meta
// result. X A = B is solved as A^T X^T = B^T and X A^H = B as A X^H = B^H.
Tensor luSolveInto(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint,
                   const Tensor& result_m) {
  std::vector<int64_t> batch = batchShape(result_m);
  Tensor lu = solver::columnMajor(LU, batch);
  std::vector<int64_t> piv_shape = batch;
  piv_shape.push_back(pivots.size(-1));
  Tensor piv = pivots.expand(piv_shape).contiguous();
  const char trans = left ? (adjoint ? 'C' : 'N') : (adjoint ? 'N' : 'T');
  const Tensor rhs = left ? B : (adjoint ? B.mH() : B.mT());
  Tensor x = solver::columnMajor(rhs, batch);
  solver::luSolve(lu, piv, x, trans);
  Tensor out = emptyLike(result_m, B);
  out.copy_(left ? x : (adjoint ? x.mH() : x.mT()));
  return out;
}

Tensor luSolve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  if (!solver::supported(LU) || !solver::supported(B))
    return Fallback<at::_ops::linalg_lu_solve>::call(LU, pivots, B, left, adjoint);
  Tensor m = cachedMeta(
      "linalg_lu_solve",
      [&] { return at::linalg_lu_solve(metaLike(LU), metaLike(pivots), metaLike(B), left, adjoint); }, LU, pivots, B,
      left, adjoint);
  return luSolveInto(LU, pivots, B, left, adjoint, m);
}

Tensor& luSolveOut(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint, Tensor& out) {
  if (!solver::supported(LU) || !solver::supported(B))
    return Fallback<at::_ops::linalg_lu_solve_out>::call(LU, pivots, B, left, adjoint, out);
  return assignExactOut(out, luSolve(LU, pivots, B, left, adjoint));
}

// ---- lu_unpack, lu -----------------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> luUnpack(const Tensor& LU, const Tensor& pivots, bool unpack_data,
                                            bool unpack_pivots) {
  if (!solver::supported(LU)) return Fallback<at::_ops::lu_unpack>::call(LU, pivots, unpack_data, unpack_pivots);
  auto m = cachedMeta(
      "lu_unpack", [&] { return at::lu_unpack(metaLike(LU), metaLike(pivots), unpack_data, unpack_pivots); }, LU,
      pivots, unpack_data, unpack_pivots);
  Tensor P = emptyLike(get<0>(m), LU), L = emptyLike(get<1>(m), LU), U = emptyLike(get<2>(m), LU);
  const int64_t rows = LU.size(-2), cols = LU.size(-1), k = std::min(rows, cols);
  if (unpack_data) {
    if (rows > cols) {
      L.copy_(LU.tril(-1));
      U.copy_(LU.narrow(-2, 0, k).triu());
    } else {
      L.copy_(LU.narrow(-1, 0, k).tril(-1));
      U.copy_(LU.triu());
    }
    L.diagonal(0, -2, -1).fill_(1);
  }
  if (unpack_pivots && P.numel() > 0) {
    std::vector<int64_t> piv_shape = batchShape(P);
    piv_shape.push_back(pivots.size(-1));
    Tensor perm = solver::permutation(pivots.expand(piv_shape), rows);
    P.zero_();
    P.scatter_(-2, perm.unsqueeze(-2), 1);
  }
  return {P, L, U};
}

std::tuple<Tensor&, Tensor&, Tensor&> luUnpackOut(const Tensor& LU, const Tensor& pivots, bool unpack_data,
                                                  bool unpack_pivots, Tensor& P, Tensor& L, Tensor& U) {
  if (!solver::supported(LU))
    return Fallback<at::_ops::lu_unpack_out>::call(LU, pivots, unpack_data, unpack_pivots, P, L, U);
  auto r = luUnpack(LU, pivots, unpack_data, unpack_pivots);
  assignExactOut(P, get<0>(r));
  assignExactOut(L, get<1>(r));
  assignExactOut(U, get<2>(r));
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> linalgLu(const Tensor& A, bool pivot) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_lu>::call(A, pivot);
  auto m = cachedMeta("linalg_lu", [&] { return at::linalg_lu(metaLike(A), pivot); }, A, pivot);
  auto f = luFactorEx(A, pivot, false);
  auto r = luUnpack(get<0>(f), get<1>(f), true, pivot);
  Tensor P = emptyLike(get<0>(m), A), L = emptyLike(get<1>(m), A), U = emptyLike(get<2>(m), A);
  if (P.numel() > 0) P.copy_(get<0>(r));
  L.copy_(get<1>(r));
  U.copy_(get<2>(r));
  return {P, L, U};
}

std::tuple<Tensor&, Tensor&, Tensor&> linalgLuOut(const Tensor& A, bool pivot, Tensor& P, Tensor& L, Tensor& U) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_lu_out>::call(A, pivot, P, L, U);
  auto r = linalgLu(A, pivot);
  assignExactOut(P, get<0>(r));
  assignExactOut(L, get<1>(r));
  assignExactOut(U, get<2>(r));
  return {P, L, U};
}

// ---- solve, inv --------------------------------------------------------------------------------------------------

// Whether the installed torch's _linalg_solve_ex factors A^T for a contiguous real A (and solves A^T X = B with the
// adjoint). Its backward reads the returned LU accordingly, so ours must factor the same matrix: torch 2.11's kernel
// does, 2.13's factors A. Asked once of the CPU kernel, on a matrix whose two factorizations pivot differently.
bool factorsTranspose() {
  static const bool answer = [] {
    const Tensor A = at::tensor({3.0, 5.0, 1.0, 4.0}, at::kDouble).reshape({2, 2}); // A pivots row 1, A^T row 2
    return get<2>(at::_linalg_solve_ex(A, at::ones({2, 1}, at::kDouble)))[0].item<int>() == 2;
  }();
  return answer;
}

// ATen's _linalg_solve_ex: the LU of A (or of A^T: factorsTranspose), a vector B (A's batch of n-vectors) solved as
// a column.
std::tuple<Tensor, Tensor, Tensor, Tensor> solveEx(const Tensor& A, const Tensor& B, bool left, bool check_errors) {
  if (!solver::supported(A) || !solver::supported(B))
    return Fallback<at::_ops::_linalg_solve_ex>::call(A, B, left, check_errors);
  auto m = cachedMeta(
      "_linalg_solve_ex", [&] { return at::_linalg_solve_ex(metaLike(A), metaLike(B), left, false); }, A, B, left);
  const bool use_A_T = factorsTranspose() && A.is_contiguous() && !A.is_complex();
  auto f = luFactor(use_A_T ? A.mT() : A, true, get<1>(m), get<2>(m), get<3>(m));
  if (check_errors) at::_linalg_check_errors(get<2>(f), "torch.linalg.solve_ex", A.dim() == 2);
  const Tensor& LU = get<0>(f);
  const bool vector_case = B.dim() == 1 || (LU.dim() - 1 == B.dim() && B.sizes() == LU.sizes().slice(0, LU.dim() - 1));
  const Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
  const Tensor result_m = vector_case ? get<0>(m).unsqueeze(-1) : get<0>(m);
  Tensor x = luSolveInto(LU, get<1>(f), B_, left, use_A_T, result_m);
  Tensor result = emptyLike(get<0>(m), A);
  result.copy_(vector_case ? x.squeeze(-1) : x);
  return {result, LU, get<1>(f), get<2>(f)};
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> solveExOut(const Tensor& A, const Tensor& B, bool left,
                                                          bool check_errors, Tensor& result, Tensor& LU, Tensor& pivots,
                                                          Tensor& info) {
  if (!solver::supported(A) || !solver::supported(B))
    return Fallback<at::_ops::_linalg_solve_ex_result>::call(A, B, left, check_errors, result, LU, pivots, info);
  auto r = solveEx(A, B, left, check_errors);
  assignExactOut(result, get<0>(r));
  assignExactOut(LU, get<1>(r));
  assignExactOut(pivots, get<2>(r));
  assignExactOut(info, get<3>(r));
  return {result, LU, pivots, info};
}

// ATen's linalg_inv_ex: solve_ex(A, I).
std::tuple<Tensor, Tensor> invEx(const Tensor& A, bool check_errors) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_inv_ex>::call(A, check_errors);
  auto m = cachedMeta("linalg_inv_ex", [&] { return at::linalg_inv_ex(metaLike(A), false); }, A);
  Tensor eye = emptyLike(get<0>(m), A);
  eye.zero_();
  eye.diagonal(0, -2, -1).fill_(1);
  auto r = solveEx(A, eye, true, false);
  Tensor inverse = emptyLike(get<0>(m), A), info = emptyLike(get<1>(m), A);
  inverse.copy_(get<0>(r));
  info.copy_(get<3>(r));
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
  return {inverse, info};
}

std::tuple<Tensor&, Tensor&> invExOut(const Tensor& A, bool check_errors, Tensor& inverse, Tensor& info) {
  if (!solver::supported(A)) return Fallback<at::_ops::linalg_inv_ex_inverse>::call(A, check_errors, inverse, info);
  auto r = invEx(A, check_errors);
  assignExactOut(inverse, get<0>(r));
  assignExactOut(info, get<1>(r));
  return {inverse, info};
}

// ---- det, slogdet ------------------------------------------------------------------------------------------------

// The determinant of the pivots' permutation: (-1)^(number of rows swapped).
Tensor detP(const Tensor& pivots) {
  return at::ne(at::arange(1, pivots.size(-1) + 1, pivots.options()), pivots)
      .sum(-1, false, at::kLong)
      .fmod_(2)
      .mul_(-2)
      .add_(1);
}

// The LU of A^T for a contiguous real A (det(A^T) = det(A)), as ATen's det and slogdet.
std::tuple<Tensor, Tensor, Tensor> detLu(const Tensor& A, const Tensor& lu_m, const Tensor& piv_m) {
  const Tensor a = A.is_contiguous() && !A.is_complex() ? A.mH() : A;
  Tensor info_m = at::empty(batchShape(A), A.options().dtype(at::kInt).device(at::kMeta));
  return luFactor(a, true, lu_m, piv_m, info_m);
}

std::tuple<Tensor, Tensor, Tensor> linalgDet(const Tensor& A) {
  if (!solver::supported(A)) return Fallback<at::_ops::_linalg_det>::call(A);
  auto m = cachedMeta("_linalg_det", [&] { return at::_linalg_det(metaLike(A)); }, A);
  auto f = detLu(A, get<1>(m), get<2>(m));
  Tensor result = emptyLike(get<0>(m), A);
  at::mul_out(result, detP(get<1>(f)), at::prod(get<0>(f).diagonal(0, -2, -1), -1));
  return {result, get<0>(f), get<1>(f)};
}

std::tuple<Tensor&, Tensor&, Tensor&> detOut(const Tensor& A, Tensor& result, Tensor& LU, Tensor& pivots) {
  if (!solver::supported(A)) return Fallback<at::_ops::_linalg_det_result>::call(A, result, LU, pivots);
  auto r = linalgDet(A);
  assignExactOut(result, get<0>(r));
  assignExactOut(LU, get<1>(r));
  assignExactOut(pivots, get<2>(r));
  return {result, LU, pivots};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalgSlogdet(const Tensor& A) {
  if (!solver::supported(A)) return Fallback<at::_ops::_linalg_slogdet>::call(A);
  auto m = cachedMeta("_linalg_slogdet", [&] { return at::_linalg_slogdet(metaLike(A)); }, A);
  auto f = detLu(A, get<2>(m), get<3>(m));
  const Tensor diag = get<0>(f).diagonal(0, -2, -1);
  Tensor sign = emptyLike(get<0>(m), A), logabsdet = emptyLike(get<1>(m), A);
  at::mul_out(sign, diag.sgn().prod(-1), detP(get<1>(f)));
  at::sum_out(logabsdet, diag.abs().log_(), -1);
  return {sign, logabsdet, get<0>(f), get<1>(f)};
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> slogdetOut(const Tensor& A, Tensor& sign, Tensor& logabsdet, Tensor& LU,
                                                          Tensor& pivots) {
  if (!solver::supported(A)) return Fallback<at::_ops::_linalg_slogdet_sign>::call(A, sign, logabsdet, LU, pivots);
  auto r = linalgSlogdet(A);
  assignExactOut(sign, get<0>(r));
  assignExactOut(logabsdet, get<1>(r));
  assignExactOut(LU, get<2>(r));
  assignExactOut(pivots, get<3>(r));
  return {sign, logabsdet, LU, pivots};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "linalg_lu_factor_ex", luFactorEx);
  MT_IMPL(m, "linalg_lu_factor_ex.out", luFactorExOut);
  MT_IMPL(m, "linalg_lu_solve", luSolve);
  MT_IMPL(m, "linalg_lu_solve.out", luSolveOut);
  MT_IMPL(m, "lu_unpack", luUnpack);
  MT_IMPL(m, "lu_unpack.out", luUnpackOut);
  MT_IMPL(m, "linalg_lu", linalgLu);
  MT_IMPL(m, "linalg_lu.out", linalgLuOut);
  MT_IMPL(m, "_linalg_solve_ex", solveEx);
  MT_IMPL(m, "_linalg_solve_ex.result", solveExOut);
  MT_IMPL(m, "linalg_inv_ex", invEx);
  MT_IMPL(m, "linalg_inv_ex.inverse", invExOut);
  MT_IMPL(m, "_linalg_det", linalgDet);
  MT_IMPL(m, "_linalg_det.result", detOut);
  MT_IMPL(m, "_linalg_slogdet", linalgSlogdet);
  MT_IMPL(m, "_linalg_slogdet.sign", slogdetOut);
}

} // namespace mytorch
