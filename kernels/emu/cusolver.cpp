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
// The algorithms themselves: solver_reference.h.
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
#include "solver_reference.h"

struct cusolverDnContext {
  int device = 0;
  cudaStream_t stream = nullptr;
};
struct cusolverDnParams { int unused = 0; };

namespace mytorch::emu {
namespace {

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

// A bufferSize call's answer: `problem` (empty when the arguments pass) refused, else the workspace of an m x n
// problem (work_bytes) and no host workspace.
cusolverStatus_t answer_size(cusolverDnHandle_t handle, cusolverDnParams_t params, const std::string& problem,
                             long long m, long long n, int type, size_t* device, size_t* host) {
  Call c = begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  if (!problem.empty()) return refuse(CUSOLVER_STATUS_INVALID_VALUE, problem);
  *device = work_bytes(m, n, type);
  *host = 0;
  return CUSOLVER_STATUS_SUCCESS;
}

std::string uplo_problem(int uplo) {
  return uplo == MT_CUBLAS_FILL_MODE_LOWER || uplo == MT_CUBLAS_FILL_MODE_UPPER ? "" : "uplo must be a fill mode";
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
  return emu::answer_size(handle, params, emu::types(dataTypeA, computeType), m, n, dataTypeA, workspaceInBytesOnDevice,
                          workspaceInBytesOnHost);
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
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty()) problem = emu::uplo_problem(uplo);
  return emu::answer_size(handle, params, problem, n, n, dataTypeA, workspaceInBytesOnDevice, workspaceInBytesOnHost);
}

cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int computeType, void* bufferOnDevice,
                                  size_t workspaceInBytesOnDevice, void*, size_t, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty()) problem = emu::uplo_problem(uplo);
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
  if (problem.empty()) problem = emu::uplo_problem(uplo);
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
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && dataTypeW != emu::real_of(dataTypeA)) problem = "W must be A's real type";
  if (problem.empty() && jobz != MT_CUSOLVER_EIG_MODE_NOVECTOR && jobz != MT_CUSOLVER_EIG_MODE_VECTOR)
    problem = "jobz must be an eig mode";
  if (problem.empty()) problem = emu::uplo_problem(uplo);
  return emu::answer_size(handle, params, problem, n, n, dataTypeA, workspaceInBytesOnDevice, workspaceInBytesOnHost);
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
  if (problem.empty()) problem = emu::uplo_problem(uplo);
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
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && (dataTypeS != emu::real_of(dataTypeA) || dataTypeU != dataTypeA || dataTypeVT != dataTypeA))
    problem = "S must be A's real type, U and VT A's type";
  if (problem.empty() && (!svd_job(jobu) || !svd_job(jobvt))) problem = "jobu/jobvt: A, S or N";
  if (problem.empty() && m < n) problem = "gesvd only supports m >= n";
  return emu::answer_size(handle, params, problem, m, n, dataTypeA, workspaceInBytesOnDevice, workspaceInBytesOnHost);
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

cusolverStatus_t cusolverDnXgeqrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                             int dataTypeA, const void*, int64_t, int dataTypeTau, const void*,
                                             int computeType, size_t* workspaceInBytesOnDevice,
                                             size_t* workspaceInBytesOnHost) {
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && dataTypeTau != dataTypeA) problem = "tau must be A's type";
  return emu::answer_size(handle, params, problem, m, n, dataTypeA, workspaceInBytesOnDevice, workspaceInBytesOnHost);
}

cusolverStatus_t cusolverDnXgeqrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int dataTypeTau, void* tau, int computeType,
                                  void* bufferOnDevice, size_t workspaceInBytesOnDevice, void*, size_t, int* info) {
  emu::Call c = emu::begin(handle, params);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  const int dev = c.ctx.device;
  const long long k = std::min(m, n);
  std::string problem = emu::types(dataTypeA, computeType);
  if (problem.empty() && dataTypeTau != dataTypeA) problem = "tau must be A's type";
  if (problem.empty()) problem = emu::check_matrix("A", A, dataTypeA, m, n, lda, dev);
  if (problem.empty()) problem = emu::check_vector("tau", tau, k * emu::bytes_of(dataTypeTau), dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty())
    problem = emu::check_work(bufferOnDevice, workspaceInBytesOnDevice, emu::work_bytes(m, n, dataTypeA), dev);
  return emu::run(c, problem, [=] {
    emu::Mat a = emu::read(A, dataTypeA, m, n, lda);
    std::vector<emu::cd> t;
    emu::geqrf(a, t);
    emu::write(A, dataTypeA, a, lda);
    for (long long i = 0; i < k; ++i) emu::store(tau, dataTypeTau, i, t[i]);
    *info = 0;
  });
}

namespace {

// The legacy typed functions: the data type of the name's letter, sizes as int, lwork in elements.
cusolverStatus_t orgqr_size(int type, cusolverDnHandle_t handle, int m, int n, int k, int lda, int* lwork) {
  emu::Call c = emu::begin(handle, nullptr, false);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  if (m < 0 || n < 0 || n > m || k < 0 || k > n || lda < std::max(1, m))
    return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, "orgqr: expected 0 <= k <= n <= m and lda >= max(1, m)");
  *lwork = static_cast<int>(emu::work_bytes(m, n, type) / emu::bytes_of(type));
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t orgqr(int type, cusolverDnHandle_t handle, int m, int n, int k, void* A, int lda, const void* tau,
                       void* work, int lwork, int* info) {
  int need = 0;
  if (cusolverStatus_t s = orgqr_size(type, handle, m, n, k, lda, &need); s != CUSOLVER_STATUS_SUCCESS) return s;
  emu::Call c = emu::begin(handle, nullptr, false);
  const int dev = c.ctx.device;
  std::string problem = emu::check_matrix("A", A, type, m, n, lda, dev);
  if (problem.empty()) problem = emu::check_vector("tau", tau, size_t(k) * emu::bytes_of(type), dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty() && lwork < need) problem = "lwork is below what orgqr_bufferSize asked for";
  if (problem.empty()) problem = emu::check_vector("work", work, size_t(need) * emu::bytes_of(type), dev);
  return emu::run(c, problem, [=] {
    emu::Mat a = emu::read(A, type, m, n, lda);
    std::vector<emu::cd> t(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) t[i] = emu::load(tau, type, i);
    emu::orgqr(a, k, t);
    emu::write(A, type, a, lda);
    *info = 0;
  });
}

bool ormqr_args(int type, int side, int trans, int m, int n, int k, int lda, int ldc, std::string* why) {
  const int rows = side == MT_CUBLAS_SIDE_LEFT ? m : n;
  const bool cplx = emu::complex_type(type);
  if (side != MT_CUBLAS_SIDE_LEFT && side != MT_CUBLAS_SIDE_RIGHT) *why = "side must be LEFT or RIGHT";
  else if (trans != MT_CUBLAS_OP_N && trans != (cplx ? MT_CUBLAS_OP_C : MT_CUBLAS_OP_T))
    *why = cplx ? "unmqr takes CUBLAS_OP_N or CUBLAS_OP_C" : "ormqr takes CUBLAS_OP_N or CUBLAS_OP_T";
  else if (m < 0 || n < 0 || k < 0 || k > rows) *why = "ormqr: expected 0 <= k <= the reflectors' rows";
  else if (lda < std::max(1, rows) || ldc < std::max(1, m)) *why = "ormqr: a leading dimension is too small";
  return why->empty();
}

cusolverStatus_t ormqr_size(int type, cusolverDnHandle_t handle, int side, int trans, int m, int n, int k, int lda,
                            int ldc, int* lwork) {
  emu::Call c = emu::begin(handle, nullptr, false);
  if (c.status != CUSOLVER_STATUS_SUCCESS) return c.status;
  std::string why;
  if (!ormqr_args(type, side, trans, m, n, k, lda, ldc, &why)) return emu::refuse(CUSOLVER_STATUS_INVALID_VALUE, why);
  *lwork = static_cast<int>(emu::work_bytes(m, n, type) / emu::bytes_of(type));
  return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t ormqr(int type, cusolverDnHandle_t handle, int side, int trans, int m, int n, int k, const void* A,
                       int lda, const void* tau, void* C, int ldc, void* work, int lwork, int* info) {
  int need = 0;
  if (cusolverStatus_t s = ormqr_size(type, handle, side, trans, m, n, k, lda, ldc, &need);
      s != CUSOLVER_STATUS_SUCCESS)
    return s;
  emu::Call c = emu::begin(handle, nullptr, false);
  const int dev = c.ctx.device;
  const int rows = side == MT_CUBLAS_SIDE_LEFT ? m : n;
  std::string problem = emu::check_matrix("A", A, type, rows, k, lda, dev);
  if (problem.empty()) problem = emu::check_matrix("C", C, type, m, n, ldc, dev);
  if (problem.empty()) problem = emu::check_vector("tau", tau, size_t(k) * emu::bytes_of(type), dev);
  if (problem.empty()) problem = emu::check_vector("info", info, sizeof(int), dev);
  if (problem.empty() && lwork < need) problem = "lwork is below what ormqr_bufferSize asked for";
  if (problem.empty()) problem = emu::check_vector("work", work, size_t(need) * emu::bytes_of(type), dev);
  return emu::run(c, problem, [=] {
    emu::Mat refl = emu::read(A, type, rows, k, lda), cm = emu::read(C, type, m, n, ldc);
    std::vector<emu::cd> t(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) t[i] = emu::load(tau, type, i);
    emu::ormqr(refl, k, t, cm, side == MT_CUBLAS_SIDE_LEFT, trans != MT_CUBLAS_OP_N);
    emu::write(C, type, cm, ldc);
    *info = 0;
  });
}

}  // namespace

#define MT_EMU_ORGQR(name, type)                                                                                       \
  cusolverStatus_t name##_bufferSize(cusolverDnHandle_t handle, int m, int n, int k, const void*, int lda,             \
                                     const void*, int* lwork) {                                                        \
    return orgqr_size(type, handle, m, n, k, lda, lwork);                                                              \
  }                                                                                                                    \
  cusolverStatus_t name(cusolverDnHandle_t handle, int m, int n, int k, void* A, int lda, const void* tau, void* work, \
                        int lwork, int* info) {                                                                        \
    return orgqr(type, handle, m, n, k, A, lda, tau, work, lwork, info);                                               \
  }
#define MT_EMU_ORMQR(name, type)                                                                                       \
  cusolverStatus_t name##_bufferSize(cusolverDnHandle_t handle, int side, int trans, int m, int n, int k, const void*, \
                                     int lda, const void*, const void*, int ldc, int* lwork) {                         \
    return ormqr_size(type, handle, side, trans, m, n, k, lda, ldc, lwork);                                            \
  }                                                                                                                    \
  cusolverStatus_t name(cusolverDnHandle_t handle, int side, int trans, int m, int n, int k, const void* A, int lda,   \
                        const void* tau, void* C, int ldc, void* work, int lwork, int* info) {                         \
    return ormqr(type, handle, side, trans, m, n, k, A, lda, tau, C, ldc, work, lwork, info);                          \
  }
MT_EMU_ORGQR(cusolverDnSorgqr, MT_CUDA_R_32F)
MT_EMU_ORGQR(cusolverDnDorgqr, MT_CUDA_R_64F)
MT_EMU_ORGQR(cusolverDnCungqr, MT_CUDA_C_32F)
MT_EMU_ORGQR(cusolverDnZungqr, MT_CUDA_C_64F)
MT_EMU_ORMQR(cusolverDnSormqr, MT_CUDA_R_32F)
MT_EMU_ORMQR(cusolverDnDormqr, MT_CUDA_R_64F)
MT_EMU_ORMQR(cusolverDnCunmqr, MT_CUDA_C_32F)
MT_EMU_ORMQR(cusolverDnZunmqr, MT_CUDA_C_64F)
