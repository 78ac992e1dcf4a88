// The part of cuSOLVER's dense C API the solver family calls (cuda/solver.cu): the 64-bit generic API
// (cusolverDnX*), declared from NVIDIA's cuSOLVER documentation. The enum values are the library's ABI (cuBLAS's
// fill mode and operation, the runtime's cudaDataType); the data-type, fill-mode and operation arguments are
// C enums, passed as int. The library is opened at run time (dynlib.h), so a build needs no cuSOLVER header; the
// emulated build defines these functions itself (kernels/emu/cusolver.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

extern "C" {

typedef struct cusolverDnContext* cusolverDnHandle_t;
typedef struct cusolverDnParams* cusolverDnParams_t;

typedef enum {
  CUSOLVER_STATUS_SUCCESS = 0,
  CUSOLVER_STATUS_NOT_INITIALIZED = 1,
  CUSOLVER_STATUS_ALLOC_FAILED = 2,
  CUSOLVER_STATUS_INVALID_VALUE = 3,
  CUSOLVER_STATUS_ARCH_MISMATCH = 4,
  CUSOLVER_STATUS_EXECUTION_FAILED = 6,
  CUSOLVER_STATUS_INTERNAL_ERROR = 7,
  CUSOLVER_STATUS_NOT_SUPPORTED = 15,
} cusolverStatus_t;

// cusolverEigMode_t
#define MT_CUSOLVER_EIG_MODE_NOVECTOR 0
#define MT_CUSOLVER_EIG_MODE_VECTOR 1
// cublasFillMode_t
#define MT_CUBLAS_FILL_MODE_LOWER 0
#define MT_CUBLAS_FILL_MODE_UPPER 1
// cublasOperation_t
#define MT_CUBLAS_OP_N 0
#define MT_CUBLAS_OP_T 1
#define MT_CUBLAS_OP_C 2
// cublasSideMode_t
#define MT_CUBLAS_SIDE_LEFT 0
#define MT_CUBLAS_SIDE_RIGHT 1
// cudaDataType
#define MT_CUDA_R_32F 0
#define MT_CUDA_R_64F 1
#define MT_CUDA_C_32F 4
#define MT_CUDA_C_64F 5

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t* handle);
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t stream);
cusolverStatus_t cusolverDnCreateParams(cusolverDnParams_t* params);

cusolverStatus_t cusolverDnXgetrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                             int dataTypeA, const void* A, int64_t lda, int computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXgetrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int64_t* ipiv, int computeType,
                                  void* bufferOnDevice, size_t workspaceInBytesOnDevice, void* bufferOnHost,
                                  size_t workspaceInBytesOnHost, int* info);
cusolverStatus_t cusolverDnXgetrs(cusolverDnHandle_t handle, cusolverDnParams_t params, int trans, int64_t n,
                                  int64_t nrhs, int dataTypeA, const void* A, int64_t lda, const int64_t* ipiv,
                                  int dataTypeB, void* B, int64_t ldb, int* info);

cusolverStatus_t cusolverDnXpotrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                             int dataTypeA, const void* A, int64_t lda, int computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int computeType, void* bufferOnDevice,
                                  size_t workspaceInBytesOnDevice, void* bufferOnHost, size_t workspaceInBytesOnHost,
                                  int* info);
cusolverStatus_t cusolverDnXpotrs(cusolverDnHandle_t handle, cusolverDnParams_t params, int uplo, int64_t n,
                                  int64_t nrhs, int dataTypeA, const void* A, int64_t lda, int dataTypeB, void* B,
                                  int64_t ldb, int* info);

cusolverStatus_t cusolverDnXsyevd_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int jobz, int uplo,
                                             int64_t n, int dataTypeA, const void* A, int64_t lda, int dataTypeW,
                                             const void* W, int computeType, size_t* workspaceInBytesOnDevice,
                                             size_t* workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXsyevd(cusolverDnHandle_t handle, cusolverDnParams_t params, int jobz, int uplo, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int dataTypeW, void* W, int computeType,
                                  void* bufferOnDevice, size_t workspaceInBytesOnDevice, void* bufferOnHost,
                                  size_t workspaceInBytesOnHost, int* info);

cusolverStatus_t cusolverDnXgesvd_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, signed char jobu,
                                             signed char jobvt, int64_t m, int64_t n, int dataTypeA, const void* A,
                                             int64_t lda, int dataTypeS, const void* S, int dataTypeU, const void* U,
                                             int64_t ldu, int dataTypeVT, const void* VT, int64_t ldvt, int computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXgesvd(cusolverDnHandle_t handle, cusolverDnParams_t params, signed char jobu,
                                  signed char jobvt, int64_t m, int64_t n, int dataTypeA, void* A, int64_t lda,
                                  int dataTypeS, void* S, int dataTypeU, void* U, int64_t ldu, int dataTypeVT, void* VT,
                                  int64_t ldvt, int computeType, void* bufferOnDevice, size_t workspaceInBytesOnDevice,
                                  void* bufferOnHost, size_t workspaceInBytesOnHost, int* info);

cusolverStatus_t cusolverDnXgeqrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                             int dataTypeA, const void* A, int64_t lda, int dataTypeTau,
                                             const void* tau, int computeType, size_t* workspaceInBytesOnDevice,
                                             size_t* workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXgeqrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  int dataTypeA, void* A, int64_t lda, int dataTypeTau, void* tau, int computeType,
                                  void* bufferOnDevice, size_t workspaceInBytesOnDevice, void* bufferOnHost,
                                  size_t workspaceInBytesOnHost, int* info);

// The legacy typed API for forming and applying Q (the 64-bit API has neither): S/D orgqr, ormqr and C/Z ungqr,
// unmqr. Matrices are float*, double*, cuComplex* or cuDoubleComplex*: void* has the same ABI; lwork counts elements.
#define MT_CUSOLVER_ORGQR(name)                                                                                        \
  cusolverStatus_t name##_bufferSize(cusolverDnHandle_t handle, int m, int n, int k, const void* A, int lda,           \
                                     const void* tau, int* lwork);                                                     \
  cusolverStatus_t name(cusolverDnHandle_t handle, int m, int n, int k, void* A, int lda, const void* tau, void* work, \
                        int lwork, int* info);
#define MT_CUSOLVER_ORMQR(name)                                                                                      \
  cusolverStatus_t name##_bufferSize(cusolverDnHandle_t handle, int side, int trans, int m, int n, int k,            \
                                     const void* A, int lda, const void* tau, const void* C, int ldc, int* lwork);   \
  cusolverStatus_t name(cusolverDnHandle_t handle, int side, int trans, int m, int n, int k, const void* A, int lda, \
                        const void* tau, void* C, int ldc, void* work, int lwork, int* info);
MT_CUSOLVER_ORGQR(cusolverDnSorgqr)
MT_CUSOLVER_ORGQR(cusolverDnDorgqr)
MT_CUSOLVER_ORGQR(cusolverDnCungqr)
MT_CUSOLVER_ORGQR(cusolverDnZungqr)
MT_CUSOLVER_ORMQR(cusolverDnSormqr)
MT_CUSOLVER_ORMQR(cusolverDnDormqr)
MT_CUSOLVER_ORMQR(cusolverDnCunmqr)
MT_CUSOLVER_ORMQR(cusolverDnZunmqr)

}  // extern "C"
