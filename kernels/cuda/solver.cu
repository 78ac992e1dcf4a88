// CUDA dense solvers through cuSOLVER's 64-bit generic API (Note [Dense solver family]). The library is opened on
// first use (dynlib.h; torch's CUDA wheels ship it as nvidia-cusolver). A batch is one call per matrix on the
// stream: the workspace one call needs is queried first (`query`) and provided by the glue from the caching
// allocator, so the calls of a batch share it in stream order.
#include <string>
#include <vector>

#include "common.cuh"
#include "cusolver_api.h"
#include "handle_pool.h"
#include "mytorch/dynlib.h"
#include "mytorch/solver.h"

namespace mytorch::cuda {
namespace {

// clang-format off: a list of the library's functions, one X-macro entry each
#define MT_SOLVER_FUNCS(_)                                                                                  \
  _(cusolverDnCreate) _(cusolverDnSetStream) _(cusolverDnCreateParams) _(cusolverDnXgetrf_bufferSize)        \
  _(cusolverDnXgetrf) _(cusolverDnXgetrs) _(cusolverDnXpotrf_bufferSize) _(cusolverDnXpotrf)                 \
  _(cusolverDnXpotrs) _(cusolverDnXsyevd_bufferSize) _(cusolverDnXsyevd) _(cusolverDnXgesvd_bufferSize)      \
  _(cusolverDnXgesvd) _(cusolverDnXgeqrf_bufferSize) _(cusolverDnXgeqrf) _(cusolverDnSorgqr_bufferSize)          \
  _(cusolverDnSorgqr) _(cusolverDnDorgqr_bufferSize) _(cusolverDnDorgqr) _(cusolverDnCungqr_bufferSize)              \
  _(cusolverDnCungqr) _(cusolverDnZungqr_bufferSize) _(cusolverDnZungqr) _(cusolverDnSormqr_bufferSize)              \
  _(cusolverDnSormqr) _(cusolverDnDormqr_bufferSize) _(cusolverDnDormqr) _(cusolverDnCunmqr_bufferSize)              \
  _(cusolverDnCunmqr) _(cusolverDnZunmqr_bufferSize) _(cusolverDnZunmqr)
// clang-format on

#if defined(MYTORCH_EMU_ACTIVE)
MT_DYNLIB_LINKED(Solver, lib, MT_SOLVER_FUNCS)
#else
MT_DYNLIB(Solver, lib, MT_SOLVER_FUNCS, "cuSOLVER", "install the CUDA toolkit's cuSOLVER or the nvidia-cusolver wheel",
          "libcusolver.so.12", "libcusolver.so.11", "libcusolver.so")
#endif

#if defined(MYTORCH_EMU_ACTIVE)
}  // namespace
}  // namespace mytorch::cuda
namespace mytorch::emu {
const char* cusolver_last_reason();  // why the emulated cuSOLVER refused (kernels/emu/cusolver.cpp)
}
namespace mytorch::cuda {
namespace {
#endif

rt::Status fail(const char* what, cusolverStatus_t s) {
  std::string msg = std::string("linalg: ") + what + " failed with cuSOLVER status " + std::to_string(int(s));
#if defined(MYTORCH_EMU_ACTIVE)
  msg += std::string(" (emu: ") + mytorch::emu::cusolver_last_reason() + ")";
#endif
  return rt::report(rt::Status::Unknown, msg.c_str());
}

#define MT_SOLVER_TRY(call, what)                             \
  do {                                                        \
    cusolverStatus_t s_ = (call);                             \
    if (s_ != CUSOLVER_STATUS_SUCCESS) return fail(what, s_); \
  } while (0)

struct Handle {
  cusolverDnHandle_t h = nullptr;
  cusolverDnParams_t params = nullptr;  // the default algorithms
};

rt::Status handle_for(Handle* out) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return check_launch("linalg");
  return HandlePool<Handle>::get(device, out, [](Handle* made) {
    MT_SOLVER_TRY(lib().cusolverDnCreate(&made->h), "cusolverDnCreate");
    MT_SOLVER_TRY(lib().cusolverDnCreateParams(&made->params), "cusolverDnCreateParams");
    return rt::Status::Success;
  });
}

int data_type(DType t) {
  switch (t) {
    case DType::Double: return MT_CUDA_R_64F;
    case DType::ComplexFloat: return MT_CUDA_C_32F;
    case DType::ComplexDouble: return MT_CUDA_C_64F;
    default: return MT_CUDA_R_32F;
  }
}
int real_type(DType t) { return (t == DType::Double || t == DType::ComplexDouble) ? MT_CUDA_R_64F : MT_CUDA_R_32F; }
int64_t elem(DType t) { return dtype_size(t); }
int64_t real_elem(DType t) { return (t == DType::Double || t == DType::ComplexDouble) ? 8 : 4; }

char* item_ptr(void* base, int64_t item, int64_t stride, int64_t bytes) {
  return base ? static_cast<char*>(base) + item * stride * bytes : nullptr;
}

int fill(bool upper) { return upper ? MT_CUBLAS_FILL_MODE_UPPER : MT_CUBLAS_FILL_MODE_LOWER; }

int operation(char trans) { return trans == 'T' ? MT_CUBLAS_OP_T : trans == 'C' ? MT_CUBLAS_OP_C : MT_CUBLAS_OP_N; }

// The typed legacy functions of `a`'s dtype: orgqr/ungqr and ormqr/unmqr.
struct Typed {
  decltype(&::cusolverDnSorgqr_bufferSize) orgqr_size;
  decltype(&::cusolverDnSorgqr) orgqr;
  decltype(&::cusolverDnSormqr_bufferSize) ormqr_size;
  decltype(&::cusolverDnSormqr) ormqr;
};
Typed typed(DType t) {
  const Solver& l = lib();
  switch (t) {
    case DType::Double:
      return {l.cusolverDnDorgqr_bufferSize, l.cusolverDnDorgqr, l.cusolverDnDormqr_bufferSize, l.cusolverDnDormqr};
    case DType::ComplexFloat:
      return {l.cusolverDnCungqr_bufferSize, l.cusolverDnCungqr, l.cusolverDnCunmqr_bufferSize, l.cusolverDnCunmqr};
    case DType::ComplexDouble:
      return {l.cusolverDnZungqr_bufferSize, l.cusolverDnZungqr, l.cusolverDnZunmqr_bufferSize, l.cusolverDnZunmqr};
    default:
      return {l.cusolverDnSorgqr_bufferSize, l.cusolverDnSorgqr, l.cusolverDnSormqr_bufferSize, l.cusolverDnSormqr};
  }
}

// The legacy API's operation for ormqr: the transpose of a real Q, the adjoint of a complex one.
int q_operation(const SolverArgs& a) {
  if (a.trans == 'N') return MT_CUBLAS_OP_N;
  return (a.dtype == DType::ComplexFloat || a.dtype == DType::ComplexDouble) ? MT_CUBLAS_OP_C : MT_CUBLAS_OP_T;
}

// The device workspace one call of `a` needs (bytes) and the host workspace (resized).
rt::Status workspace(const Handle& h, const SolverArgs& a, size_t* device, std::vector<char>* host) {
  const int t = data_type(a.dtype), rt_ = real_type(a.dtype);
  size_t dev = 0, hst = 0;
  switch (a.op) {
    case SolverOp::Getrf:
      MT_SOLVER_TRY(lib().cusolverDnXgetrf_bufferSize(h.h, h.params, a.m, a.n, t, a.a, a.lda, t, &dev, &hst),
                    "cusolverDnXgetrf_bufferSize");
      break;
    case SolverOp::Potrf:
      MT_SOLVER_TRY(lib().cusolverDnXpotrf_bufferSize(h.h, h.params, fill(a.upper), a.n, t, a.a, a.lda, t, &dev, &hst),
                    "cusolverDnXpotrf_bufferSize");
      break;
    case SolverOp::Syevd:
      MT_SOLVER_TRY(lib().cusolverDnXsyevd_bufferSize(
                        h.h, h.params, a.vectors ? MT_CUSOLVER_EIG_MODE_VECTOR : MT_CUSOLVER_EIG_MODE_NOVECTOR,
                        fill(a.upper), a.n, t, a.a, a.lda, rt_, a.w, t, &dev, &hst),
                    "cusolverDnXsyevd_bufferSize");
      break;
    case SolverOp::Gesvd:
      MT_SOLVER_TRY(lib().cusolverDnXgesvd_bufferSize(h.h, h.params, a.job, a.job, a.m, a.n, t, a.a, a.lda, rt_, a.w, t,
                                                      a.u, a.ldu, t, a.vt, a.ldvt, t, &dev, &hst),
                    "cusolverDnXgesvd_bufferSize");
      break;
    case SolverOp::Geqrf:
      MT_SOLVER_TRY(lib().cusolverDnXgeqrf_bufferSize(h.h, h.params, a.m, a.n, t, a.a, a.lda, t, a.tau, t, &dev, &hst),
                    "cusolverDnXgeqrf_bufferSize");
      break;
    case SolverOp::Orgqr: {
      int lwork = 0;
      MT_SOLVER_TRY(typed(a.dtype).orgqr_size(h.h, int(a.m), int(a.n), int(a.k), a.a, int(a.lda), a.tau, &lwork),
                    "orgqr_bufferSize");
      dev = size_t(lwork) * size_t(elem(a.dtype));
      break;
    }
    case SolverOp::Ormqr: {
      int lwork = 0;
      MT_SOLVER_TRY(
          typed(a.dtype).ormqr_size(h.h, a.left ? MT_CUBLAS_SIDE_LEFT : MT_CUBLAS_SIDE_RIGHT, q_operation(a), int(a.m),
                                    int(a.n), int(a.k), a.a, int(a.lda), a.tau, a.b, int(a.ldb), &lwork),
          "ormqr_bufferSize");
      dev = size_t(lwork) * size_t(elem(a.dtype));
      break;
    }
    case SolverOp::Getrs:
    case SolverOp::Potrs: break;  // no workspace
  }
  *device = dev;
  if (host) host->resize(hst);
  return rt::Status::Success;
}

rt::Status check_args(const SolverArgs& a) {
  if (a.dtype != DType::Float && a.dtype != DType::Double && a.dtype != DType::ComplexFloat &&
      a.dtype != DType::ComplexDouble)
    return rt::report(rt::Status::InvalidValue, "linalg: expected float32, float64, complex64 or complex128");
  if (a.batch < 0 || a.m < 0 || a.n < 0 || a.nrhs < 0)
    return rt::report(rt::Status::InvalidValue, "linalg: negative sizes");
  if (a.op == SolverOp::Gesvd && a.m < a.n)
    return rt::report(rt::Status::InvalidValue, "linalg: gesvd takes m >= n (the glue passes the adjoint)");
  if (a.info == nullptr) return rt::report(rt::Status::InvalidValue, "linalg: info is required");
  const int64_t int_max = 2147483647;
  if ((a.op == SolverOp::Orgqr || a.op == SolverOp::Ormqr) &&
      (a.m > int_max || a.n > int_max || a.lda > int_max || a.ldb > int_max))
    return rt::report(rt::Status::InvalidValue, "linalg: orgqr/ormqr take 32-bit sizes (cuSOLVER's legacy API)");
  return rt::Status::Success;
}

// A thread per matrix: the swaps are sequential.
__global__ void permutation_kernel(PermutationArgs a) {
  for (const int64_t b : grid_stride(a.batch)) {
    const int32_t* piv = a.pivots + b * a.k;
    int64_t* perm = a.perm + b * a.m;
    for (int64_t i = 0; i < a.k; ++i) {
      const int64_t j = static_cast<int64_t>(piv[i]) - 1;
      if (j < 0 || j >= a.m) continue;
      const int64_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  }
}

} // namespace

rt::Status lu_permutation(const PermutationArgs& a, rt::Stream stream) {
  if (a.batch == 0 || a.k == 0) return rt::Status::Success;
  permutation_kernel<<<grid_for(a.batch), kThreads, 0, native(stream)>>>(a);
  return check_launch("lu_unpack");
}

rt::Status solver(const SolverArgs& a, rt::Stream stream) {
  if (rt::Status st = check_args(a); st != rt::Status::Success) return st;
  if (!lib().error.empty()) return rt::report(rt::Status::Unavailable, lib().error.c_str());
  Handle h;
  if (rt::Status st = handle_for(&h); st != rt::Status::Success) return st;
  MT_SOLVER_TRY(lib().cusolverDnSetStream(h.h, native(stream)), "cusolverDnSetStream");
  std::vector<char> host;
  size_t need = 0;
  if (rt::Status st = workspace(h, a, &need, a.query ? nullptr : &host); st != rt::Status::Success) return st;
  if (a.query) {
    *a.query = need;
    return rt::Status::Success;
  }
  if (a.work_bytes < need) return rt::report(rt::Status::InvalidValue, "linalg: the workspace is smaller than queried");
  const int t = data_type(a.dtype), rt_ = real_type(a.dtype);
  const int64_t e = elem(a.dtype), re = real_elem(a.dtype);
  void* hw = host.empty() ? nullptr : host.data();
  for (int64_t i = 0; i < a.batch; ++i) {
    char* A = item_ptr(a.a, i, a.a_stride, e);
    char* B = item_ptr(a.b, i, a.b_stride, e);
    int64_t* piv = a.ipiv ? a.ipiv + i * a.ipiv_stride : nullptr;
    int* info = a.info + i;
    char* tau = item_ptr(a.tau, i, a.tau_stride, e);
    switch (a.op) {
      case SolverOp::Getrf:
        MT_SOLVER_TRY(lib().cusolverDnXgetrf(h.h, h.params, a.m, a.n, t, A, a.lda, piv, t, a.work, a.work_bytes, hw,
                                             host.size(), info),
                      "cusolverDnXgetrf");
        break;
      case SolverOp::Getrs:
        MT_SOLVER_TRY(
            lib().cusolverDnXgetrs(h.h, h.params, operation(a.trans), a.n, a.nrhs, t, A, a.lda, piv, t, B, a.ldb, info),
            "cusolverDnXgetrs");
        break;
      case SolverOp::Potrf:
        MT_SOLVER_TRY(lib().cusolverDnXpotrf(h.h, h.params, fill(a.upper), a.n, t, A, a.lda, t, a.work, a.work_bytes,
                                             hw, host.size(), info),
                      "cusolverDnXpotrf");
        break;
      case SolverOp::Potrs:
        MT_SOLVER_TRY(lib().cusolverDnXpotrs(h.h, h.params, fill(a.upper), a.n, a.nrhs, t, A, a.lda, t, B, a.ldb, info),
                      "cusolverDnXpotrs");
        break;
      case SolverOp::Syevd:
        MT_SOLVER_TRY(lib().cusolverDnXsyevd(h.h, h.params,
                                             a.vectors ? MT_CUSOLVER_EIG_MODE_VECTOR : MT_CUSOLVER_EIG_MODE_NOVECTOR,
                                             fill(a.upper), a.n, t, A, a.lda, rt_, item_ptr(a.w, i, a.w_stride, re), t,
                                             a.work, a.work_bytes, hw, host.size(), info),
                      "cusolverDnXsyevd");
        break;
      case SolverOp::Gesvd:
        MT_SOLVER_TRY(lib().cusolverDnXgesvd(h.h, h.params, a.job, a.job, a.m, a.n, t, A, a.lda, rt_,
                                             item_ptr(a.w, i, a.w_stride, re), t, item_ptr(a.u, i, a.u_stride, e),
                                             a.ldu, t, item_ptr(a.vt, i, a.vt_stride, e), a.ldvt, t, a.work,
                                             a.work_bytes, hw, host.size(), info),
                      "cusolverDnXgesvd");
        break;
      case SolverOp::Geqrf:
        MT_SOLVER_TRY(lib().cusolverDnXgeqrf(h.h, h.params, a.m, a.n, t, A, a.lda, t, tau, t, a.work, a.work_bytes, hw,
                                             host.size(), info),
                      "cusolverDnXgeqrf");
        break;
      case SolverOp::Orgqr:
        MT_SOLVER_TRY(typed(a.dtype).orgqr(h.h, int(a.m), int(a.n), int(a.k), A, int(a.lda), tau, a.work,
                                           int(a.work_bytes / size_t(e)), info),
                      "orgqr");
        break;
      case SolverOp::Ormqr:
        MT_SOLVER_TRY(typed(a.dtype).ormqr(h.h, a.left ? MT_CUBLAS_SIDE_LEFT : MT_CUBLAS_SIDE_RIGHT, q_operation(a),
                                           int(a.m), int(a.n), int(a.k), A, int(a.lda), tau, B, int(a.ldb), a.work,
                                           int(a.work_bytes / size_t(e)), info),
                      "ormqr");
        break;
    }
  }
  return check_launch("linalg");
}

} // namespace mytorch::cuda
