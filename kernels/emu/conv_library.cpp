// Emulated build: cuDNN is a closed library and cannot be emulated, so the library pass of a convolution reports
// itself unavailable and csrc takes the im2col + GEMM path (whose kernels and GEMM the emulator does run).
#include "mytorch/conv.h"

namespace mytorch::cuda {

rt::Status convolution(const ConvArgs&, size_t*, rt::Stream) {
  return rt::report(rt::Status::Unavailable, "cuDNN is not emulated: convolutions take im2col + GEMM on emu");
}

}  // namespace mytorch::cuda
