// Tensor-core helpers shared by the attention kernels: mma.sync m16n8k16 (fp16 / bf16 in, fp32
// accumulate) and packing two 16-bit values into one fragment register.
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"

namespace mytorch::cuda {

template <typename T> struct Mma;
#if defined(MYTORCH_EMU_ACTIVE)
// The emulated build runs the instruction as a warp collective built from the PTX ISA's fragment layouts.
template <> struct Mma<c10::Half> {
  static void run(float* c, const uint32_t* a, const uint32_t* b) { ::mytorch::emu::mma_m16n8k16(c, a, b, false); }
};
template <> struct Mma<c10::BFloat16> {
  static void run(float* c, const uint32_t* a, const uint32_t* b) { ::mytorch::emu::mma_m16n8k16(c, a, b, true); }
};
#else
template <> struct Mma<c10::Half> {
  __device__ static void run(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <> struct Mma<c10::BFloat16> {
  __device__ static void run(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
#endif

// Two 16-bit values in one register, the lower element first (the fragment layout's order).
template <typename T>
__device__ inline uint32_t pack(T lo, T hi) {
  return static_cast<uint32_t>(lo.x) | (static_cast<uint32_t>(hi.x) << 16);
}

} // namespace mytorch::cuda
