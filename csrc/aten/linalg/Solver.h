// The dense solvers' primitives for the linear-algebra operators (Note [Dense solver family] in
// kernels/include/mytorch/solver.h): the only place where the runtimes differ. cuda (and emu): cuSOLVER through
// kernels::solver; sim: torch's CPU LAPACK on host views. Every operator (csrc/aten/linalg/LinalgLu.cpp,
// LinalgDecompositions.cpp) is composed from these and native tensor ops, identically on every runtime, so the sim
// alignment suite and the fuzzer exercise the same composition a GPU runs.
//
// Matrices are batched and column-major: a.mT().is_contiguous() (columnMajor() makes such a copy), batch
// dimensions leading. Pivots are torch's: int32, 1-based; info int32 per matrix, returned, never raised.
#pragma once

#include <ATen/core/Tensor.h>

namespace mytorch::solver {

// The dtypes the solvers take: float32, float64, complex64, complex128 (others go to the counted CPU fallback).
bool supported(const at::Tensor& t);

// A fresh column-major copy of `a` (of dtype `dtype` when given), batch dimensions expanded to `batch_shape`.
at::Tensor columnMajor(const at::Tensor& a, at::IntArrayRef batch_shape = {});
// The identity's column-major copies, batch x n x n.
at::Tensor eyeLike(const at::Tensor& a, at::IntArrayRef batch_shape, int64_t n);

// LU with partial pivoting (pivot=false: none, cuda only) of m x n `a`, in place: L below the diagonal (unit
// diagonal implied), U on and above. pivots: [..., min(m, n)]; info: [...].
void lu(at::Tensor& a, at::Tensor& pivots, at::Tensor& info, bool pivot);
// op(A) X = B for square A given by lu(); `b` ([..., n, k], column-major, A's batch shape) becomes X.
// trans: 'N' (A), 'T' (A^T) or 'C' (A^H).
void luSolve(const at::Tensor& lu, const at::Tensor& pivots, at::Tensor& b, char trans);
// The row permutation of lu()'s pivots: perm [..., m] int64, the original row in each position (A = P L U with
// P[perm[i], i] = 1).
at::Tensor permutation(const at::Tensor& pivots, int64_t m);

// Cholesky of Hermitian `a` in place: the factor in the `upper` triangle (A = U^H U) or the lower (A = L L^H); the
// other triangle unspecified (callers clear it). info: [...], i > 0 when the leading minor of order i is not
// positive definite.
void cholesky(at::Tensor& a, bool upper, at::Tensor& info);
// A X = B from cholesky()'s factor; `b` becomes X.
void choleskySolve(const at::Tensor& factor, at::Tensor& b, bool upper);

// Eigenvalues (ascending, into w [..., n], A's real dtype) and, if `vectors`, eigenvectors (into `a`) of Hermitian
// `a`, reading its `upper` or lower triangle; `a` is destroyed when !vectors.
void eigh(at::Tensor& a, at::Tensor& w, bool upper, bool vectors, at::Tensor& info);
// SVD of m x n `a` (destroyed; m >= n on cuda, any shape on sim): s [..., k] descending, k = min(m, n); job 'A'
// (u m x m, vh n x n), 'S' (u m x k, vh k x n) or 'N' (neither; u and vh undefined).
void svd(at::Tensor& a, at::Tensor& s, at::Tensor& u, at::Tensor& vh, char job, at::Tensor& info);

// Householder QR of m x n `a` in place (R on and above the diagonal, the reflectors below); tau [..., min(m, n)].
void geqrf(at::Tensor& a, at::Tensor& tau);
// The first n columns of Q from m x n `a`'s first k = tau.size(-1) columns of reflectors (k <= n <= m), in place.
void orgqr(at::Tensor& a, const at::Tensor& tau);
// op(Q) C (left) or C op(Q) into `c` (m x n), Q from the reflectors `a` (m or n rows by `left`, k columns), op the
// identity or the adjoint (`transpose`: the transpose of a real Q, the adjoint of a complex one, as ATen's ormqr).
void ormqr(const at::Tensor& a, const at::Tensor& tau, at::Tensor& c, bool left, bool transpose);

} // namespace mytorch::solver
