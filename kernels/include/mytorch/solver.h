// Dense solver family: LU, Cholesky, symmetric/Hermitian eigendecomposition, SVD and Householder QR of batches of
// matrices in float32, float64, complex64 and complex128 (torch.linalg's solve, inv, lu*, det, slogdet, cholesky*,
// eigh, svd, qr, householder_product, ormqr).
//
// Note [Dense solver family]
// Matrices are column-major, as LAPACK's and cuSOLVER's: item b of a batch starts at base + b * stride and element
// (i, j) of it is at i + j * ld (the glue hands the routines A.mT().contiguous() buffers, which torch.linalg's
// outputs already are). Pivots are 1-based int64 row interchanges (LAPACK's, widened as cuSOLVER's 64-bit API
// takes them); info is one int32 per matrix: 0, or i > 0 when the factorization met its i-th failure (a zero pivot,
// a leading minor not positive definite, an eigen/singular-value iteration that did not converge), never raised
// here: the glue returns it (the _ex operators) or checks it as ATen does.
//   cuda: cuSOLVER's 64-bit generic API (cusolverDnX*; orgqr/ormqr from its legacy typed API, the only one with
//         them, 32-bit sizes), opened at run time like cuBLASLt and cuFFT (the
//         declarations it needs: cuda/cusolver_api.h), one handle per (thread, device), the workspace from the
//         caching allocator (a query first: `query` set). A batch is a loop of calls on the stream, as torch.cuda's
//         cuSOLVER path for matrices beyond its batched kernels; nothing synchronises with the host. The emulated
//         build replaces cuSOLVER with reference factorizations in double precision that check the arguments
//         (kernels/emu/cusolver.cpp, Note [What the emulated cuSOLVER checks]).
//   sim:  no kernel. The glue computes with torch's CPU LAPACK on host views of the buffers (the library CPU
//         PyTorch uses, as the sim FFTs and GEMMs use torch's CPU libraries: Note [FFT family]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"

namespace mytorch {

enum class SolverOp : int {
  Getrf,  // a: A (m x n) -> L\U; ipiv: min(m, n) pivots (null: no pivoting)
  Getrs,  // a: L\U (n x n), ipiv; b: B (n x nrhs) -> X with op(A) X = B, op by `trans` ('N', 'T', 'C')
  Potrf,  // a: A (n x n) -> its factor in the `upper` triangle (U^H U) or the lower (L L^H); the other untouched
  Potrs,  // a: the factor of potrf; b: B (n x nrhs) -> X with A X = B
  Syevd,  // a: Hermitian A (n x n, the `upper` or lower triangle read) -> eigenvectors if `vectors`; w: eigenvalues
  Gesvd,  // a: A (m x n, m >= n; destroyed); w: singular values; u (m x m or m x n by `job` 'A'/'S'), vt (n x n);
          // job 'N': neither u nor vt
  Geqrf,  // a: A (m x n) -> R on and above the diagonal, the Householder vectors below; tau: min(m, n) scalars
  Orgqr,  // a: m x n, the first k columns reflectors of geqrf (tau: k) -> the first n columns of Q = H(1)..H(k)
  Ormqr,  // a: reflectors (mA x k, mA = m if `left` else n), tau: k; b: C (m x n) -> op(Q) C or C op(Q), op by
          // `trans` ('N', or 'T' real / 'C' complex)
};

struct SolverArgs {
  SolverOp op = SolverOp::Getrf;
  DType dtype = DType::Float;  // Float, Double, ComplexFloat or ComplexDouble (w holds the real type)
  int64_t batch = 1, m = 0, n = 0, nrhs = 0;
  void* a = nullptr;
  int64_t lda = 1, a_stride = 0;
  void* b = nullptr;
  int64_t ldb = 1, b_stride = 0;
  int64_t* ipiv = nullptr;
  int64_t ipiv_stride = 0;
  void* w = nullptr;
  int64_t w_stride = 0;
  void* u = nullptr;
  int64_t ldu = 1, u_stride = 0;
  void* vt = nullptr;
  int64_t ldvt = 1, vt_stride = 0;
  void* tau = nullptr;      // Geqrf, Orgqr, Ormqr: the reflectors' scalars (the matrix's dtype)
  int64_t tau_stride = 0, k = 0;
  bool left = true;         // Ormqr
  int32_t* info = nullptr;  // batch entries
  char trans = 'N';         // Getrs
  char job = 'N';           // Gesvd
  bool upper = false;       // Potrf, Potrs, Syevd
  bool vectors = true;      // Syevd
  void* work = nullptr;     // device workspace of work_bytes (the query's answer)
  size_t work_bytes = 0;
  size_t* query = nullptr;  // set: only store the device workspace one call needs there, run nothing
};

// Only the CUDA side has it: on sim the glue computes on the host (Note [Dense solver family]).
MT_CUDA_ONLY_LAUNCHER(solver, (const SolverArgs& a, rt::Stream stream), (a, stream),
                      "the dense solvers have no sim kernel (the glue computes them on the host)")

// LU pivots (int32, 1-based, k per matrix) to the row permutation they apply to [0, m): perm starts as the
// identity and row i is swapped with row pivots[i] - 1 for i = 0..k-1 (a pivot outside [1, m] is skipped: the glue
// validates them on sim, where it loops itself).
struct PermutationArgs {
  const int32_t* pivots = nullptr;  // [batch, k]
  int64_t* perm = nullptr;          // [batch, m], the identity on entry
  int64_t batch = 0, k = 0, m = 0;
};
MT_CUDA_ONLY_LAUNCHER(lu_permutation, (const PermutationArgs& a, rt::Stream stream), (a, stream),
                      "lu_permutation has no sim kernel (the glue loops on the host)")

} // namespace mytorch
