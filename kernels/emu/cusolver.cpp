// The emulated cuSOLVER (kernels/cuda/cusolver_api.h): reference factorizations in double precision, run in stream
// order, that refuse what the real library refuses, so that kernels/cuda/solver.cu's use of it is checked without a
// GPU.
//
// Note [What the emulated cuSOLVER checks]
//  - a handle comes from cusolverDnCreate and is used on the device that was current then, params from
//    cusolverDnCreateParams; the data types are the real or complex float/double ones, the compute type equal to
//    the matrix's, eigen- and singular values of the matching real type;
//  - sizes are non-negative, every leading dimension at least max(1, rows), gesvd's m >= n and its jobs one of
//    'A', 'S', 'N' (equal, as solver.cu passes them), getrs's operation N, T or C;
//  - every matrix, vector, pivot array and info word lies inside one live allocation of the handle's device, and
//    the device workspace is as large as the bufferSize call said (which asks for a real, non-zero amount, so a
//    caller that skips the query or under-allocates is caught) and lies in one too;
//  - eigh without vectors overwrites A with NaN (LAPACK and cuSOLVER document A as destroyed), and gesvd always
//    does: a caller that reads them afterwards is caught.
//  - MYTORCH_EMU_CUSOLVER_UPLO=swap makes potrf and syevd read the other triangle (a negative control).
// The algorithms: LU with partial pivoting as LAPACK's getf2 (the first largest |re| + |im|, a zero pivot recorded
// in info and skipped), Cholesky by columns (info: the order of the first minor that is not positive definite),
// cyclic Jacobi for the Hermitian eigenproblem and one-sided Jacobi (Hestenes) for the SVD, both with unitary
// 2 x 2 rotations; eigenvalues ascending and singular values descending, as the library returns them. Vectors
// are unique only up to a unit factor per column: tests compare reconstructions, not vectors.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <complex>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "cusolver_api.h"
#include "internal.h"

struct cusolverDnContext {
  int device = 0;
  cudaStream_t stream = nullptr;
};
struct cusolverDnParams { int unused = 0; };

namespace mytorch::emu {
namespace {

using cd = std::complex<double>;

thread_local std::string t_reason;

cusolverStatus_t refuse(cusolverStatus_t s, std::string why) {
  t_reason = std::move(why);
  return s;
}

std::mutex g_mu;
std::vector<cusolverDnContext*>& handles() {
  static auto* h = new std::vector<cusolverDnContext*>();
  return *h;
}
std::vector<cusolverDnParams*>& params_list() {
  static auto* p = new std::vector<cusolverDnParams*>();
  return *p;
}

bool complex_type(int t) { return t == MT_CUDA_C_32F || t == MT_CUDA_C_64F; }
size_t bytes_of(int t) { return t == MT_CUDA_R_32F ? 4 : t == MT_CUDA_R_64F || t == MT_CUDA_C_32F ? 8 : 16; }
int real_of(int t) { return (t == MT_CUDA_R_64F || t == MT_CUDA_C_64F) ? MT_CUDA_R_64F : MT_CUDA_R_32F; }

cd load(const void* p, int t, long long i) {
  switch (t) {
    case MT_CUDA_R_32F: return cd(static_cast<const float*>(p)[i], 0);
    case MT_CUDA_R_64F: return cd(static_cast<const double*>(p)[i], 0);
    case MT_CUDA_C_32F: {
      auto v = static_cast<const std::complex<float>*>(p)[i];
      return cd(v.real(), v.imag());
    }
    default: return static_cast<const cd*>(p)[i];
  }
}
void store(void* p, int t, long long i, cd v) {
  switch (t) {
    case MT_CUDA_R_32F: static_cast<float*>(p)[i] = static_cast<float>(v.real()); break;
    case MT_CUDA_R_64F: static_cast<double*>(p)[i] = v.real(); break;
    case MT_CUDA_C_32F:
      static_cast<std::complex<float>*>(p)[i] = std::complex<float>(float(v.real()), float(v.imag()));
      break;
    default: static_cast<cd*>(p)[i] = v;
  }
}

// A column-major rows x cols matrix in double (complex; the imaginary parts of real data stay zero).
struct Mat {
  long long rows = 0, cols = 0;
  std::vector<cd> v;
  Mat(long long r, long long c) : rows(r), cols(c), v(static_cast<size_t>(r * c)) {}
  cd& operator()(long long i, long long j) { return v[static_cast<size_t>(i + j * rows)]; }
};
Mat read(const void* p, int t, long long rows, long long cols, long long ld) {
  Mat m(rows, cols);
  for (long long j = 0; j < cols; ++j)
    for (long long i = 0; i < rows; ++i) m(i, j) = load(p, t, i + j * ld);
  return m;
}
void write(void* p, int t, Mat& m, long long ld) {
  for (long long j = 0; j < m.cols; ++j)
    for (long long i = 0; i < m.rows; ++i) store(p, t, i + j * ld, m(i, j));
}
void poison(void* p, int t, long long rows, long long cols, long long ld) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (long long j = 0; j < cols; ++j)
    for (long long i = 0; i < rows; ++i) store(p, t, i + j * ld, cd(nan, nan));
}

// MYTORCH_EMU_CUSOLVER_UPLO=swap: potrf and syevd read the other triangle than asked (test_linalg_native's negative
// control: the checks of which triangle is read must then fail).
bool upper_of(int uplo) {
  const char* e = std::getenv("MYTORCH_EMU_CUSOLVER_UPLO");
  const bool swap = e && std::string(e) == "swap";
  return (uplo == MT_CUBLAS_FILL_MODE_UPPER) != swap;
}

double cabs1(cd x) { return std::abs(x.real()) + std::abs(x.imag()); }

// ---- the reference algorithms ------------------------------------------------------------------------------------

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
struct Rot {
  double c = 1, s = 0;
  cd e = 1;
};
Rot rotation(double app, double aqq, cd apq) {
  Rot r;
  const double g = std::abs(apq);
  const double zeta = (aqq - app) / (2 * g);
  const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
  r.c = 1 / std::sqrt(1 + t * t);
  r.s = t * r.c;
  r.e = std::conj(apq) / g;
  return r;
}
void rotate_columns(Mat& x, long long p, long long q, const Rot& r) {
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
void complete_basis(Mat& q, long long have) {
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

// ---- argument checks ---------------------------------------------------------------------------------------------

struct Call {
  cusolverDnContext ctx;
  cusolverStatus_t status = CUSOLVER_STATUS_SUCCESS;
};

Call begin(cusolverDnHandle_t handle, cusolverDnParams_t params, bool need_params = true) {
  Call c;
  std::lock_guard<std::mutex> lock(g_mu);
  if (std::find(handles().begin(), handles().end(), handle) == handles().end()) {
    c.status = refuse(CUSOLVER_STATUS_NOT_INITIALIZED, "the handle did not come from cusolverDnCreate");
    return c;
  }
  if (need_params && std::find(params_list().begin(), params_list().end(), params) == params_list().end()) {
    c.status = refuse(CUSOLVER_STATUS_INVALID_VALUE, "params did not come from cusolverDnCreateParams");
    return c;
  }
  c.ctx = *handle;
  if (c.ctx.device != current_device()) {
    c.status =
        refuse(CUSOLVER_STATUS_INVALID_VALUE, "the handle was made on device " + std::to_string(c.ctx.device) +
                                                  " but device " + std::to_string(current_device()) + " is current");
  }
  return c;
}

bool known_type(int t) { return t == MT_CUDA_R_32F || t == MT_CUDA_R_64F || t == MT_CUDA_C_32F || t == MT_CUDA_C_64F; }

// "" when the arguments pass; else what is wrong.
std::string check_matrix(const char* name, const void* p, int t, long long rows, long long cols, long long ld,
                         int device) {
  if (rows < 0 || cols < 0) return std::string(name) + ": negative size";
  if (ld < std::max(1LL, rows)) return std::string(name) + ": leading dimension below max(1, rows)";
  if (rows == 0 || cols == 0) return "";
  if (device_of_range(p, static_cast<size_t>(((cols - 1) * ld + rows)) * bytes_of(t)) != device)
    return std::string(name) + " is not inside one live allocation of the handle's device";
  return "";
}
std::string check_vector(const char* name, const void* p, size_t bytes, int device) {
  if (bytes == 0) return "";
  if (device_of_range(p, bytes) != device)
    return std::string(name) + " is not inside one live allocation of the handle's device";
  return "";
}

// The workspace the emulated routines ask for: one matrix of the problem, so that it is real and checked.
size_t work_bytes(long long m, long long n, int t) {
  return static_cast<size_t>(std::max(1LL, m * n)) * bytes_of(t) + 256;
}

std::string check_work(void* buf, size_t bytes, size_t need, int device) {
  if (bytes < need)
    return "the device workspace is " + std::to_string(bytes) + " bytes, below the " + std::to_string(need) +
           " the bufferSize call asked for";
  return check_vector("bufferOnDevice", buf, need, device);
}

cusolverStatus_t run(const Call& c, const std::string& problem, std::function<void()> task) {
  if (!problem.empty()) return refuse(CUSOLVER_STATUS_INVALID_VALUE, problem);
  cudaError_t e = submit(c.ctx.stream, std::move(task));
  if (e != cudaSuccess) return refuse(CUSOLVER_STATUS_EXECUTION_FAILED, std::string("launch: ") + cudaGetErrorName(e));
  return CUSOLVER_STATUS_SUCCESS;
}

std::string types(int a, int compute) {
  if (!known_type(a)) return "unsupported data type " + std::to_string(a);
  if (compute != a) return "the compute type must equal the matrix's";
  return "";
}

}  // namespace

const char* cusolver_last_reason() { return t_reason.c_str(); }

}  // namespace mytorch::emu

namespace emu = mytorch::emu;

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t* handle) {
  auto* h = new cusolverDnContext();
  h->device = emu::current_device();
  std::lock_guard<std::mutex> lock(emu::g_mu);
  emu::handles().push_back(h);
  *handle = h;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(emu::g_mu);
  if (std::find(emu::handles().begin(), emu::handles().end(), handle) == emu::handles().end())
    return emu::refuse(CUSOLVER_STATUS_NOT_INITIALIZED, "setting the stream of an unknown handle");
  handle->stream = stream;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnCreateParams(cusolverDnParams_t* params) {
  auto* p = new cusolverDnParams();
  std::lock_guard<std::mutex> lock(emu::g_mu);
  emu::params_list().push_back(p);
  *params = p;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXgetrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                             int dataTypeA, const void*, int64_t, int computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  if (std::string t = emu::types(dataTypeA, computeType); !t.empty())
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, t);
  *workspaceInBytesOnDevice = emu::work_bytes(m, n, dataTypeA);
  *workspaceInBytesOnHost = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXgetrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int64_t* ipiv, int computeType,
                                  void* bufferOnDevice, size_t workspaceInBytesOnDevice, void*, size_t, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  const long long k = std::min(m, n);
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, m, n, lda, dev);
  if (problem.empty() && ipiv) problem = emu::check_vector("ipiv", ipiv, k * sizeof(int64_t), dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty())
    problem = emu::check_work(bufferOnDevice, workspaceInBytesOnDevice, emu::work_bytes(m, n, dataTypeA), dev);
  return emu::run(c, problem, [=] {
    emu::Mat a = emu::read(A, dataTypeA, m, n, lda);
    std::vector<long long> piv(static_cast<size_t>(k));
    *info = emu::getrf(a, ipiv ? piv.data() : nullptr);
    emu::write(A, dataTypeA, a, lda);
    if (ipiv) std::copy(piv.begin(), piv.end(), ipiv);
  });
}

cusolverStatus_t cusolverDnXgetrs(cusolverDnHandle_t handle, cusolverDnParams_t params, int trans, int64_t n,
                                  int64_t nrhs, int dataTypeA, const void* A, int64_t lda, const int64_t* ipiv,
                                  int dataTypeB, void* B, int64_t ldb, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  std::string problem = emu::types(dataTypeA, dataTypeB);
  if (problem.empty() && trans != MT_CUBLAS_OP_N && trans != MT_CUBLAS_OP_T && trans != MT_CUBLAS_OP_C)
    problem = "trans must be CUBLAS_OP_N, _T or _C";
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, n, n, lda, dev);
  if (problem.empty()) problem = emu::check_matrix("B", B, dataTypeB, n, nrhs, ldb, dev);
  if (problem.empty() && ipiv) problem = emu::check_vector("ipiv", ipiv, n * sizeof(int64_t), dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  return emu::run(c, problem, [=] {
    emu::Mat lu = emu::read(A, dataTypeA, n, n, lda), b = emu::read(B, dataTypeB, n, nrhs, ldb);
    std::vector<long long> piv(ipiv ? ipiv : nullptr, ipiv ? ipiv + n : nullptr);
    emu::getrs(lu, ipiv ? piv.data() : nullptr, b, trans);
    emu::write(B, dataTypeB, b, ldb);
    *info = 0;
  });
}

cusolverStatus_t cusolverDnXpotrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                             int dataTypeA, const void*, int64_t, int computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  if (std::string t = emu::types(dataTypeA, computeType); !t.empty())
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, t);
  if (uplo != MT_CUBLAS_FILL_MODE_LOWER && uplo != MT_CUBLAS_FILL_MODE_UPPER)
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "uplo must be a fill mode");
  *workspaceInBytesOnDevice = emu::work_bytes(n, n, dataTypeA);
  *workspaceInBytesOnHost = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int computeType, void* bufferOnDevice,
                                  size_t workspaceInBytesOnDevice, void*, size_t, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && uplo != MT_CUBLAS_FILL_MODE_LOWER && uplo != MT_CUBLAS_FILL_MODE_UPPER)
    problem = "uplo must be a fill mode";
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, n, n, lda, dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty())
    problem = emu::check_work(bufferOnDevice, workspaceInBytesOnDevice, emu::work_bytes(n, n, dataTypeA), dev);
  return emu::run(c, problem, [=] {
    emu::Mat a = emu::read(A, dataTypeA, n, n, lda);
    *info = emu::potrf(a, emu::upper_of(uplo));
    emu::write(A, dataTypeA, a, lda);
  });
}

cusolverStatus_t cusolverDnXpotrs(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                  int64_t nrhs, int dataTypeA, const void* A, int64_t lda, int dataTypeB, void* B,
                                  int64_t ldb, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  std::string problem = emu::types(dataTypeA, dataTypeB);
  if (problem.empty() && uplo != MT_CUBLAS_FILL_MODE_LOWER && uplo != MT_CUBLAS_FILL_MODE_UPPER)
    problem = "uplo must be a fill mode";
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, n, n, lda, dev);
  if (problem.empty()) problem = emu::check_matrix("B", B, dataTypeB, n, nrhs, ldb, dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  return emu::run(c, problem, [=] {
    emu::Mat f = emu::read(A, dataTypeA, n, n, lda), b = emu::read(B, dataTypeB, n, nrhs, ldb);
    emu::potrs(f, b, uplo == MT_CUBLAS_FILL_MODE_UPPER);
    emu::write(B, dataTypeB, b, ldb);
    *info = 0;
  });
}

cusolverStatus_t cusolverDnXsyevd_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int jobz, int uplo,
                                             int64_t n, int dataTypeA, const void*, int64_t, int dataTypeW, const void*,
                                             int computeType, size_t* workspaceInBytesOnDevice,
                                             size_t* workspaceInBytesOnHost) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  if (std::string t = emu::types(dataTypeA, computeType); !t.empty())
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, t);
  if (dataTypeW != emu::real_of(dataTypeA))
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "W must be A's real type");
  if (jobz != MT_CUSOLVER_EIG_MODE_NOVECTOR && jobz != MT_CUSOLVER_EIG_MODE_VECTOR)
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "jobz must be an eig mode");
  if (uplo != MT_CUBLAS_FILL_MODE_LOWER && uplo != MT_CUBLAS_FILL_MODE_UPPER)
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "uplo must be a fill mode");
  *workspaceInBytesOnDevice = emu::work_bytes(n, n, dataTypeA);
  *workspaceInBytesOnHost = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXsyevd(cusolverDnHandle_t handle, cusolverDnParams_t params, int jobz, int uplo, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int dataTypeW, void* W, int computeType,
                                  void* bufferOnDevice, size_t workspaceInBytesOnDevice, void*, size_t, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && dataTypeW != emu::real_of(dataTypeA)) problem = "W must be A's real type";
  if (problem.empty() && jobz != MT_CUSOLVER_EIG_MODE_NOVECTOR && jobz != MT_CUSOLVER_EIG_MODE_VECTOR)
    problem = "jobz must be an eig mode";
  if (problem.empty() && uplo != MT_CUBLAS_FILL_MODE_LOWER && uplo != MT_CUBLAS_FILL_MODE_UPPER)
    problem = "uplo must be a fill mode";
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, n, n, lda, dev);
  if (problem.empty()) problem = emu::check_vector("W", W, n * emu::bytes_of(dataTypeW), dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty())
    problem = emu::check_work(bufferOnDevice, workspaceInBytesOnDevice, emu::work_bytes(n, n, dataTypeA), dev);
  return emu::run(c, problem, [=] {
    emu::Mat a = emu::read(A, dataTypeA, n, n, lda), vecs(n, n);
    std::vector<double> w;
    *info = emu::syevd(a, emu::upper_of(uplo), w, vecs);
    for (long long i = 0; i < n; ++i) emu::store(W, dataTypeW, i, emu::cd(w[i], 0));
    if (jobz == MT_CUSOLVER_EIG_MODE_VECTOR) emu::write(A, dataTypeA, vecs, lda);
    else emu::poison(A, dataTypeA, n, n, lda);
  });
}

namespace {
bool svd_job(signed char j) { return j == 'A' || j == 'S' || j == 'N'; }
}  // namespace

cusolverStatus_t cusolverDnXgesvd_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, signed char jobu,
                                             signed char jobvt, int64_t m, int64_t n, int dataTypeA, const void*,
                                             int64_t, int dataTypeS, const void*, int dataTypeU, const void*, int64_t,
                                             int dataTypeVT, const void*, int64_t, int computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  if (std::string t = emu::types(dataTypeA, computeType); !t.empty())
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, t);
  if (dataTypeS != emu::real_of(dataTypeA) || dataTypeU != dataTypeA || dataTypeVT != dataTypeA)
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "S must be A's real type, U and VT A's type");
  if (!svd_job(jobu) || !svd_job(jobvt)) return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "jobu/jobvt: A, S or N");
  if (m < n) return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "gesvd only supports m >= n");
  *workspaceInBytesOnDevice = emu::work_bytes(m, n, dataTypeA);
  *workspaceInBytesOnHost = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXgesvd(cusolverDnHandle_t handle, cusolverDnParams_t params, signed char jobu,
                                  signed char jobvt, int64_t m, int64_t n, int dataTypeA, void* A, int64_t lda,
                                  int dataTypeS, void* S, int dataTypeU, void* U, int64_t ldu, int dataTypeVT, void* VT,
                                  int64_t ldvt, int computeType, void* bufferOnDevice, size_t workspaceInBytesOnDevice,
                                  void*, size_t, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && (dataTypeS != emu::real_of(dataTypeA) || dataTypeU != dataTypeA || dataTypeVT != dataTypeA))
    problem = "S must be A's real type, U and VT A's type";
  if (problem.empty() && (!svd_job(jobu) || !svd_job(jobvt) || jobu != jobvt))
    problem = "jobu/jobvt: A, S or N (the emulation takes them equal)";
  if (problem.empty() && m < n) problem = "gesvd only supports m >= n";
  const long long ucols = jobu == 'A' ? m : jobu == 'S' ? n : 0;
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, m, n, lda, dev);
  if (problem.empty()) problem = emu::check_vector("S", S, n * emu::bytes_of(dataTypeS), dev);
  if (problem.empty() && ucols > 0) problem = emu::check_matrix("U", U, dataTypeU, m, ucols, ldu, dev);
  if (problem.empty() && jobvt != 'N') problem = emu::check_matrix("VT", VT, dataTypeVT, n, n, ldvt, dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty())
    problem = emu::check_work(bufferOnDevice, workspaceInBytesOnDevice, emu::work_bytes(m, n, dataTypeA), dev);
  return emu::run(c, problem, [=] {
    emu::Mat a = emu::read(A, dataTypeA, m, n, lda), u(m, ucols), vt(n, n);
    std::vector<double> s;
    *info = emu::gesvd(a, s, u, vt);
    for (long long i = 0; i < n; ++i) emu::store(S, dataTypeS, i, emu::cd(s[i], 0));
    if (ucols > 0) emu::write(U, dataTypeU, u, ldu);
    if (jobvt != 'N') emu::write(VT, dataTypeVT, vt, ldvt);
    emu::poison(A, dataTypeA, m, n, lda);
  });
}
