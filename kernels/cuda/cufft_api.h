// The part of cuFFT's C API the FFT family calls (cuda/fft.cu), declared from NVIDIA's cuFFT documentation (the
// values are cuFFT's ABI, unchanged from cuFFT 10 to 12). The library is opened at run time (dynlib.h), so a build
// needs no cuFFT header; the emulated build defines these functions itself (kernels/emu/cufft.cpp).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

extern "C" {

typedef int cufftHandle;

typedef enum cufftResult_t {
  CUFFT_SUCCESS = 0x0,
  CUFFT_INVALID_PLAN = 0x1,
  CUFFT_ALLOC_FAILED = 0x2,
  CUFFT_INVALID_TYPE = 0x3,
  CUFFT_INVALID_VALUE = 0x4,
  CUFFT_INTERNAL_ERROR = 0x5,
  CUFFT_EXEC_FAILED = 0x6,
  CUFFT_SETUP_FAILED = 0x7,
  CUFFT_INVALID_SIZE = 0x8,
  CUFFT_UNALIGNED_DATA = 0x9,
  CUFFT_INVALID_DEVICE = 0xB,
  CUFFT_NO_WORKSPACE = 0xD,
  CUFFT_NOT_IMPLEMENTED = 0xE,
  CUFFT_NOT_SUPPORTED = 0x10,
} cufftResult;

typedef enum cufftType_t {
  CUFFT_R2C = 0x2a,
  CUFFT_C2R = 0x2c,
  CUFFT_C2C = 0x29,
  CUFFT_D2Z = 0x6a,
  CUFFT_Z2D = 0x6c,
  CUFFT_Z2Z = 0x69,
} cufftType;

#define CUFFT_FORWARD (-1)
#define CUFFT_INVERSE (1)

// Data pointers are the library's cufftReal / cufftComplex / cufftDoubleReal / cufftDoubleComplex, all
// passed as pointers: void* has the same ABI.
cufftResult cufftCreate(cufftHandle* plan);
cufftResult cufftDestroy(cufftHandle plan);
cufftResult cufftMakePlanMany64(cufftHandle plan, int rank, long long int* n, long long int* inembed,
                                long long int istride, long long int idist, long long int* onembed,
                                long long int ostride, long long int odist, cufftType type, long long int batch,
                                size_t* work_size);
cufftResult cufftSetStream(cufftHandle plan, cudaStream_t stream);
cufftResult cufftExecC2C(cufftHandle plan, void* idata, void* odata, int direction);
cufftResult cufftExecR2C(cufftHandle plan, void* idata, void* odata);
cufftResult cufftExecC2R(cufftHandle plan, void* idata, void* odata);
cufftResult cufftExecZ2Z(cufftHandle plan, void* idata, void* odata, int direction);
cufftResult cufftExecD2Z(cufftHandle plan, void* idata, void* odata);
cufftResult cufftExecZ2D(cufftHandle plan, void* idata, void* odata);

}  // extern "C"
