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
// A loop unrolled on both compilers, so that a local constant table it reads folds into the instructions (a
// Chebyshev series: Note [Bessel functions by Chebyshev expansions]); MT_UNROLL leaves host loops to GCC's choice.
#if defined(__CUDACC__)
#define MT_UNROLL_ALL _Pragma("unroll")
#else
#define MT_UNROLL_ALL _Pragma("GCC unroll 64")
#endif
// Inlined whatever its size: a functor body that a dense loop must see whole to vectorise (GCC left a large
// branch-free special function as a call, and the loop scalar: Note [Special functions in float]).
#if defined(__CUDACC__)
#define MT_FORCE_INLINE __forceinline__
#else
#define MT_FORCE_INLINE inline __attribute__((always_inline))
#endif

namespace mytorch {
// Most dimensions a strided kernel argument carries after dimension coalescing
// (the same bound ATen's CUDA kernels use).
constexpr int kMaxDims = 25;
} // namespace mytorch
