// Launch helpers shared by the CUDA kernel families.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "mytorch/runtime.h"

namespace mytorch::cuda {

constexpr int kThreads = 256;

inline unsigned grid_for(int64_t n, int per_thread = 1) {
  int64_t blocks = (n + int64_t(kThreads) * per_thread - 1) / (int64_t(kThreads) * per_thread);
  if (blocks < 1) blocks = 1;
  if (blocks > 65536) blocks = 65536; // kernels loop grid-stride past this
  return static_cast<unsigned>(blocks);
}

inline rt::Status check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return rt::Status::Success;
  std::string msg = std::string(what) + " launch failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  return rt::report(rt::Status::Unknown, msg.c_str());
}

inline cudaStream_t native(rt::Stream s) { return static_cast<cudaStream_t>(s); }

} // namespace mytorch::cuda
