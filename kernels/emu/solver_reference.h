// The emulated cuSOLVER's reference factorizations (kernels/emu/cusolver.cpp; Note [What the emulated cuSOLVER
// checks]), in double precision on complex numbers (real data has zero imaginary parts), column-major:
// LU with partial pivoting as LAPACK's getf2 (the first largest |re| + |im|, a zero pivot recorded in info and
// skipped), Cholesky by columns (info: the order of the first minor that is not positive definite), cyclic Jacobi
// for the Hermitian eigenproblem and one-sided Jacobi (Hestenes) for the SVD, both with unitary 2 x 2 rotations
// (eigenvalues ascending, singular values descending, as the library returns them; vectors are unique only up to a
// unit factor per column: tests compare reconstructions), and Householder QR with LAPACK's reflectors (geqr2,
// larfg), Q formed or applied from them (orgqr, ormqr).
#pragma once

#include <complex>
#include <vector>

namespace mytorch::emu {

using cd = std::complex<double>;

// A column-major rows x cols matrix in double (complex; the imaginary parts of real data stay zero).
struct Mat {
  long long rows = 0, cols = 0;
  std::vector<cd> v;
  Mat(long long r, long long c) : rows(r), cols(c), v(static_cast<size_t>(r * c)) {}
  cd& operator()(long long i, long long j) { return v[static_cast<size_t>(i + j * rows)]; }
};

// Each returns LAPACK's info (0, or the failure's 1-based position) where the routine has one.
int getrf(Mat& a, long long* piv);                                  // piv null: no pivoting
void getrs(Mat& lu, const long long* piv, Mat& b, int trans);       // trans: cuBLAS's N, T or C
int potrf(Mat& a, bool upper);                                      // the `upper` or lower triangle read and written
void potrs(Mat& f, Mat& b, bool upper);
int syevd(Mat& a, bool upper, std::vector<double>& w, Mat& vecs);   // vecs: n x n
int gesvd(Mat& a, std::vector<double>& s, Mat& u, Mat& vt);         // m >= n; u: m x (0, n or m); vt: n x n
void geqrf(Mat& a, std::vector<cd>& tau);
void orgqr(Mat& a, long long k, const std::vector<cd>& tau);       // a: m x n, its first k columns reflectors
void ormqr(Mat& refl, long long k, const std::vector<cd>& tau, Mat& c, bool left, bool adjoint);

}  // namespace mytorch::emu
