// FFT family: batched discrete Fourier transforms of 1 to 3 dimensions (complex-to-complex, real-to-complex
// one-sided, complex-to-real) in float32 and float64.
//
// Note [FFT family]
// Data is contiguous: `batch` signals one after another, each of `rank` dimensions n[0..rank), the last innermost;
// the complex side of R2C and C2R holds n[rank-1]/2+1 elements on its last dimension (the one-sided half of a
// Hermitian spectrum). Transforms are unnormalised (the glue scales, as ATen does after cuFFT), C2C forward uses
// exp(-2 pi i jk/n), and C2R may overwrite its input (cuFFT's does): the glue hands it a copy.
//   cuda: cuFFT, opened at run time like cuBLASLt (the declarations it needs: cuda/cufft_api.h), one plan per
//         (device, problem) kept in a cache as torch.cuda keeps its cuFFT plans; the emulated build replaces cuFFT
//         with a reference DFT in double precision that checks plans, pointers and streams (kernels/emu/cufft.cpp).
//   sim:  no kernel. The glue computes FFTs with torch's CPU FFT library on host views of the buffers (MKL's DFTI
//         in the x86 wheels, pocketfft elsewhere): what CPU PyTorch computes, bit for bit, from a library torch
//         keeps, with no second FFT library to carry (the GEMMs are done the same way: Note [Sim GEMM]).
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"

namespace mytorch {

enum class FftKind : int { C2C, R2C, C2R };

struct FftArgs {
  FftKind kind = FftKind::C2C;
  DType dtype = DType::Float;  // the real precision: Float (complex64) or Double (complex128)
  int rank = 1;                // 1..3
  int64_t n[3] = {1, 1, 1};    // signal sizes (C2R: of the real output)
  int64_t batch = 1;
  const void* in = nullptr;
  void* out = nullptr;
  bool forward = true;         // C2C only
};

// Only the CUDA side has it: on sim the glue computes with ATen's CPU FFT on host views (Note [FFT family]).
MT_CUDA_ONLY_LAUNCHER(fft, (const FftArgs& a, rt::Stream stream), (a, stream),
                      "fft has no sim kernel (the glue computes it on the host)")

} // namespace mytorch
