// The emulated cuSOLVER's reference factorizations (solver_reference.h).
#include "solver_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cusolver_api.h"

namespace mytorch::emu {

static double cabs1(cd x) { return std::abs(x.real()) + std::abs(x.imag()); }

int getrf(Mat& a, long long* piv) {
  int info = 0;
  const long long k = std::min(a.rows, a.cols);
  for (long long j = 0; j < k; ++j) {
    long long p = j;
    if (piv) {
      for (long long i = j + 1; i < a.rows; ++i)
        if (cabs1(a(i, j)) > cabs1(a(p, j))) p = i;
      piv[j] = p + 1;
    }
    if (a(p, j) != cd(0)) {
      if (p != j)
        for (long long c = 0; c < a.cols; ++c) std::swap(a(j, c), a(p, c));
      for (long long i = j + 1; i < a.rows; ++i) a(i, j) /= a(j, j);
    } else if (info == 0) {
      info = static_cast<int>(j + 1);
    }
    for (long long c = j + 1; c < a.cols; ++c)
      for (long long i = j + 1; i < a.rows; ++i) a(i, c) -= a(i, j) * a(j, c);
  }
  return info;
}

void getrs(Mat& lu, const long long* piv, Mat& b, int trans) {
  const long long n = lu.rows;
  auto op = [&](long long i, long long j) { return trans == MT_CUBLAS_OP_C ? std::conj(lu(j, i)) : lu(j, i); };
  for (long long c = 0; c < b.cols; ++c) {
    if (trans == MT_CUBLAS_OP_N) {
      for (long long i = 0; i < n; ++i)
        if (piv) std::swap(b(i, c), b(piv[i] - 1, c));
      for (long long i = 0; i < n; ++i)
        for (long long p = 0; p < i; ++p) b(i, c) -= lu(i, p) * b(p, c);
      for (long long i = n - 1; i >= 0; --i) {
        for (long long p = i + 1; p < n; ++p) b(i, c) -= lu(i, p) * b(p, c);
        b(i, c) /= lu(i, i);
      }
    } else {  // op(U)^T-like: op(A) = op(L U) = op(U) op(L): solve op(U) y = b, then op(L) z = y, then un-pivot
      for (long long i = 0; i < n; ++i) {
        for (long long p = 0; p < i; ++p) b(i, c) -= op(i, p) * b(p, c);
        b(i, c) /= op(i, i);
      }
      for (long long i = n - 1; i >= 0; --i)
        for (long long p = i + 1; p < n; ++p) b(i, c) -= op(i, p) * b(p, c);
      for (long long i = n - 1; i >= 0; --i)
        if (piv) std::swap(b(i, c), b(piv[i] - 1, c));
    }
  }
}

// Reads the `upper` or lower triangle; writes the factor there (U^H U or L L^H), the other triangle untouched.
int potrf(Mat& a, bool upper) {
  const long long n = a.rows;
  // Work on L (the lower form); the upper factor is its conjugate transpose.
  auto L = [&](long long i, long long j) -> cd& { return upper ? a(j, i) : a(i, j); };
  auto lv = [&](long long i, long long j) { return upper ? std::conj(a(j, i)) : a(i, j); };
  for (long long j = 0; j < n; ++j) {
    double d = L(j, j).real();
    for (long long p = 0; p < j; ++p) d -= std::norm(lv(j, p));
    if (!(d > 0)) {
      L(j, j) = cd(d, 0);
      return static_cast<int>(j + 1);
    }
    const double r = std::sqrt(d);
    L(j, j) = cd(r, 0);
    for (long long i = j + 1; i < n; ++i) {
      cd s = lv(i, j);
      for (long long p = 0; p < j; ++p) s -= lv(i, p) * std::conj(lv(j, p));
      s /= r;
      L(i, j) = upper ? std::conj(s) : s;
    }
  }
  return 0;
}

void potrs(Mat& f, Mat& b, bool upper) {
  const long long n = f.rows;
  auto lv = [&](long long i, long long j) { return upper ? std::conj(f(j, i)) : f(i, j); };  // L, lower
  for (long long c = 0; c < b.cols; ++c) {
    for (long long i = 0; i < n; ++i) {
      for (long long p = 0; p < i; ++p) b(i, c) -= lv(i, p) * b(p, c);
      b(i, c) /= lv(i, i);
    }
    for (long long i = n - 1; i >= 0; --i) {
      for (long long p = i + 1; p < n; ++p) b(i, c) -= std::conj(lv(p, i)) * b(p, c);
      b(i, c) /= std::conj(lv(i, i));
    }
  }
}

// The unitary 2 x 2 rotation that diagonalises [[app, apq], [conj(apq), aqq]] (app, aqq real): columns p, q of X
// become c x_p - s e x_q and s x_p + c e x_q with e = conj(apq) / |apq|.
namespace {
struct Rot {
  double c = 1, s = 0;
  cd e = 1;
};
}  // namespace
static Rot rotation(double app, double aqq, cd apq) {
  Rot r;
  const double g = std::abs(apq);
  const double zeta = (aqq - app) / (2 * g);
  const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
  r.c = 1 / std::sqrt(1 + t * t);
  r.s = t * r.c;
  r.e = std::conj(apq) / g;
  return r;
}
static void rotate_columns(Mat& x, long long p, long long q, const Rot& r) {
  for (long long i = 0; i < x.rows; ++i) {
    const cd xp = x(i, p), xq = x(i, q);
    x(i, p) = r.c * xp - r.s * r.e * xq;
    x(i, q) = r.s * xp + r.c * r.e * xq;
  }
}

int syevd(Mat& a, bool upper, std::vector<double>& w, Mat& vecs) {
  const long long n = a.rows;
  Mat h(n, n);
  for (long long j = 0; j < n; ++j)
    for (long long i = 0; i < n; ++i) {
      const bool stored = upper ? i <= j : i >= j;
      h(i, j) = stored ? a(i, j) : std::conj(a(j, i));
    }
  for (long long i = 0; i < n; ++i) h(i, i) = cd(h(i, i).real(), 0);
  Mat v(n, n);
  for (long long i = 0; i < n; ++i) v(i, i) = 1;
  int sweep = 0;
  for (; sweep < 100; ++sweep) {
    double off = 0, diag = 0;
    for (long long j = 0; j < n; ++j)
      for (long long i = 0; i < n; ++i) (i == j ? diag : off) += std::norm(h(i, j));
    if (off <= 1e-30 * diag || off == 0) break;
    for (long long p = 0; p < n; ++p)
      for (long long q = p + 1; q < n; ++q) {
        if (std::abs(h(p, q)) == 0) continue;
        const Rot r = rotation(h(p, p).real(), h(q, q).real(), h(p, q));
        rotate_columns(h, p, q, r);  // H J
        for (long long j = 0; j < n; ++j) {  // J^H (H J)
          const cd hp = h(p, j), hq = h(q, j);
          h(p, j) = r.c * hp - r.s * std::conj(r.e) * hq;
          h(q, j) = r.s * hp + r.c * std::conj(r.e) * hq;
        }
        h(p, q) = h(q, p) = 0;
        rotate_columns(v, p, q, r);
      }
  }
  std::vector<long long> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](long long x, long long y) { return h(x, x).real() < h(y, y).real(); });
  w.resize(n);
  for (long long k = 0; k < n; ++k) {
    w[k] = h(order[k], order[k]).real();
    for (long long i = 0; i < n; ++i) vecs(i, k) = v(i, order[k]);
  }
  return sweep == 100 ? 1 : 0;
}

// An orthonormal basis completed from the first `have` columns of q (unit columns, orthogonal), by Gram-Schmidt on
// the unit vectors.
static void complete_basis(Mat& q, long long have) {
  long long next = have;
  for (long long e = 0; e < q.rows && next < q.cols; ++e) {
    std::vector<cd> x(q.rows, cd(0));
    x[e] = 1;
    for (int pass = 0; pass < 2; ++pass)
      for (long long k = 0; k < next; ++k) {
        cd dot = 0;
        for (long long i = 0; i < q.rows; ++i) dot += std::conj(q(i, k)) * x[i];
        for (long long i = 0; i < q.rows; ++i) x[i] -= dot * q(i, k);
      }
    double nrm = 0;
    for (auto& z : x) nrm += std::norm(z);
    nrm = std::sqrt(nrm);
    if (nrm < 0.5) continue;
    for (long long i = 0; i < q.rows; ++i) q(i, next) = x[i] / nrm;
    ++next;
  }
}

// One-sided Jacobi: A V = W with W's columns orthogonal; sigma_j = |w_j|, u_j = w_j / sigma_j.
int gesvd(Mat& a, std::vector<double>& s, Mat& u, Mat& vt) {
  const long long m = a.rows, n = a.cols;
  Mat v(n, n);
  for (long long i = 0; i < n; ++i) v(i, i) = 1;
  int sweep = 0;
  for (; sweep < 100; ++sweep) {
    bool rotated = false;
    for (long long p = 0; p < n; ++p)
      for (long long q = p + 1; q < n; ++q) {
        double alpha = 0, beta = 0;
        cd gamma = 0;
        for (long long i = 0; i < m; ++i) {
          alpha += std::norm(a(i, p));
          beta += std::norm(a(i, q));
          gamma += std::conj(a(i, p)) * a(i, q);
        }
        if (std::abs(gamma) <= 1e-15 * std::sqrt(alpha * beta) || std::abs(gamma) == 0) continue;
        rotated = true;
        const Rot r = rotation(alpha, beta, gamma);
        rotate_columns(a, p, q, r);
        rotate_columns(v, p, q, r);
      }
    if (!rotated) break;
  }
  std::vector<double> norms(n);
  for (long long j = 0; j < n; ++j) {
    double t = 0;
    for (long long i = 0; i < m; ++i) t += std::norm(a(i, j));
    norms[j] = std::sqrt(t);
  }
  std::vector<long long> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](long long x, long long y) { return norms[x] > norms[y]; });
  s.resize(n);
  const double tiny = norms.empty() ? 0 : norms[order[0]] * 1e-300;
  long long have = 0;
  for (long long k = 0; k < n; ++k) {
    s[k] = norms[order[k]];
    for (long long i = 0; i < n; ++i) vt(k, i) = std::conj(v(i, order[k]));
    if (u.cols > 0 && s[k] > tiny) {
      for (long long i = 0; i < m; ++i) u(i, k) = a(i, order[k]) / s[k];
      have = k + 1;
    }
  }
  if (u.cols > 0) complete_basis(u, have);
  return sweep == 100 ? 1 : 0;
}

// LAPACK's geqr2: for each column a reflector H = I - tau v v^H (v(0) = 1, larfg's choice of beta = -sign(re a) |(a,
// x)|), H^H applied to the columns right of it.
void geqrf(Mat& a, std::vector<cd>& tau) {
  const long long m = a.rows, n = a.cols, k = std::min(m, n);
  tau.assign(static_cast<size_t>(k), cd(0));
  for (long long i = 0; i < k; ++i) {
    double xnorm = 0;
    for (long long r = i + 1; r < m; ++r) xnorm += std::norm(a(r, i));
    xnorm = std::sqrt(xnorm);
    const cd alpha = a(i, i);
    if (xnorm == 0 && alpha.imag() == 0) continue;  // H = I
    const double mag = std::sqrt(std::norm(alpha) + xnorm * xnorm);
    const double beta = alpha.real() >= 0 ? -mag : mag;
    tau[i] = cd((beta - alpha.real()) / beta, -alpha.imag() / beta);
    const cd scale = cd(1) / (alpha - beta);
    for (long long r = i + 1; r < m; ++r) a(r, i) *= scale;
    a(i, i) = beta;
    for (long long c = i + 1; c < n; ++c) {  // (I - conj(tau) v v^H) column c
      cd dot = a(i, c);
      for (long long r = i + 1; r < m; ++r) dot += std::conj(a(r, i)) * a(r, c);
      const cd f = std::conj(tau[i]) * dot;
      a(i, c) -= f;
      for (long long r = i + 1; r < m; ++r) a(r, c) -= f * a(r, i);
    }
  }
}

// C <- (I - t v v^H) C from the left (rows `from`..), or C (I - t v v^H) from the right (columns `from`..); v is
// column i of `refl` with an implicit 1 at row i, rows i.. .
static void reflect(Mat& c, Mat& refl, long long i, cd t, bool left) {
  const long long len = refl.rows - i;
  auto v = [&](long long r) { return r == 0 ? cd(1) : refl(i + r, i); };
  if (left) {
    for (long long col = 0; col < c.cols; ++col) {
      cd dot = 0;
      for (long long r = 0; r < len; ++r) dot += std::conj(v(r)) * c(i + r, col);
      for (long long r = 0; r < len; ++r) c(i + r, col) -= t * v(r) * dot;
    }
  } else {
    for (long long row = 0; row < c.rows; ++row) {
      cd dot = 0;
      for (long long r = 0; r < len; ++r) dot += c(row, i + r) * v(r);
      for (long long r = 0; r < len; ++r) c(row, i + r) -= t * dot * std::conj(v(r));
    }
  }
}

// The first n columns of Q = H(0) H(1) .. H(k-1): the identity's, the reflectors applied last to first.
void orgqr(Mat& a, long long k, const std::vector<cd>& tau) {
  Mat q(a.rows, a.cols);
  for (long long i = 0; i < std::min(a.rows, a.cols); ++i) q(i, i) = 1;
  for (long long i = k - 1; i >= 0; --i) reflect(q, a, i, tau[i], true);
  a = q;
}

// op(Q) C (left) or C op(Q) (right), Q = H(0) .. H(k-1), op the identity or the adjoint.
void ormqr(Mat& refl, long long k, const std::vector<cd>& tau, Mat& c, bool left, bool adjoint) {
  // left N: H(k-1) first; left C: H(0)^H first; right N: H(0) first; right C: H(k-1)^H first.
  const bool forward = left == adjoint;
  for (long long s = 0; s < k; ++s) {
    const long long i = forward ? s : k - 1 - s;
    reflect(c, refl, i, adjoint ? std::conj(tau[i]) : tau[i], left);
  }
}

}  // namespace mytorch::emu
