// Shared macros for the torch-free device layer: host/device qualifiers and limits.
#pragma once

#if defined(__CUDACC__)
#define MT_HOST_DEVICE __host__ __device__
#define MT_DEVICE __device__
#else
#define MT_HOST_DEVICE
#define MT_DEVICE
#endif

namespace mytorch {
// Most dimensions a strided kernel argument carries after dimension coalescing
// (the same bound ATen's CUDA kernels use).
constexpr int kMaxDims = 25;
} // namespace mytorch
