// Tensor-core helpers shared by the attention and grouped GEMM kernels: mma.sync m16n8k16 (fp16 / bf16 in, fp32
// accumulate), ldmatrix fragment loads, cp.async staging, the swizzled tile layout, and packing two 16-bit values
// into one fragment register. The emulated build runs ldmatrix and mma.sync as warp collectives from the PTX
// ISA's layouts and cp.async as a copy that lands at the wait covering it (kernels/emu/include/mytorch_emu/cuda.h).
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

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane l names row l % 8 of matrix l / 8 (16 bytes of shared
// memory, 16-byte aligned); register i receives matrix i's fragment (transposed with Trans).
template <bool Trans = false>
__device__ inline void ldmatrix_x4(uint32_t* r, const void* row) {
#if defined(MYTORCH_EMU_ACTIVE)
  ::mytorch::emu::ldmatrix_x4(r, *static_cast<const uint4*>(row), Trans);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

// cp.async.cg of 16 bytes from global to shared memory (both 16-byte aligned): the first `bytes` (0..16, even)
// from `src`, the rest zero-filled (with 0 the source is not read, but must still be a mapped address: pass the
// tensor's base).
__device__ inline void cp_async16(void* dst, const void* src, int bytes) {
#if defined(MYTORCH_EMU_ACTIVE)
  ::mytorch::emu::cp_async16(dst, src, bytes);
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
#endif
}
__device__ inline void cp_async_commit() {
#if defined(MYTORCH_EMU_ACTIVE)
  ::mytorch::emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
__device__ inline void cp_async_wait() {
#if defined(MYTORCH_EMU_ACTIVE)
  ::mytorch::emu::cp_async_wait(Pending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

// A tile of 16-bit elements with rows of `Chunks` 16-byte chunks, stored swizzled: chunk c of row r lives at chunk
// c ^ (r % 8). The 8 rows an ldmatrix phase reads (same logical chunk, consecutive rows) and the 8 chunks of a
// row a cp.async stage writes then fall in 8 distinct bank groups: no bank conflicts, no padding.
template <int Chunks>
__host__ __device__ constexpr int swizzled(int row, int chunk) {
  static_assert(Chunks % 8 == 0, "rows of a swizzled tile are whole multiples of 128 bytes");
  return row * Chunks * 8 + ((chunk ^ (row & 7)) * 8);  // in 16-bit elements
}

// Rows [r0, r0 + Rows) of a matrix of `len` rows of D 16-bit elements (row stride ss elements, rows 16-byte
// aligned) into a swizzled tile by cp.async, the block's threads on consecutive chunks (coalesced); rows past `len`
// are zero-filled. The caller commits the group.
template <typename T, int D, int Rows>
__device__ inline void stage_tile(T* tile, const T* src, int64_t r0, int64_t len, int64_t ss) {
  constexpr int C = D / 8;
  for (int idx = threadIdx.x; idx < Rows * C; idx += blockDim.x) {
    const int r = idx / C, c = idx % C;
    const bool valid = r0 + r < len;
    cp_async16(tile + swizzled<C>(r, c), valid ? src + (r0 + r) * ss + c * 8 : src, valid ? 16 : 0);
  }
}

} // namespace mytorch::cuda
