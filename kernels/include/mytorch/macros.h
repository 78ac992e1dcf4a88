// Shared macros for the torch-free device layer: host/device qualifiers and limits.
#pragma once

#if defined(__CUDACC__)
#define MT_HOST_DEVICE __host__ __device__
#define MT_DEVICE __device__
#define MT_UNROLL _Pragma("unroll")  // a loop of constant trip count whose arrays should live in registers
#else
#define MT_HOST_DEVICE
#define MT_DEVICE
#define MT_UNROLL
#endif

namespace mytorch {
// Most dimensions a strided kernel argument carries after dimension coalescing
// (the same bound ATen's CUDA kernels use).
constexpr int kMaxDims = 25;
} // namespace mytorch
