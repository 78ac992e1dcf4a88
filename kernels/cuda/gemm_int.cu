// CUDA integer GEMM (Note [Integer GEMM]): what cuBLASLt does not have. A 16 x 16 block computes a 16 x 16 tile
// of C, staging 16-deep slices of op(A) and op(B) through shared memory so that each operand element is read
// from global memory once per tile row or column; accumulation wraps in gemm::wrap_t.
#include <algorithm>

#include "common.cuh"
#include "mytorch/gemm.h"

namespace mytorch::cuda {
namespace {

constexpr int kTile = 16;

template <typename T>
__global__ void gemm_int_kernel(GemmArgs g) {
  using W = gemm::wrap_t<T>;
  __shared__ W as[kTile][kTile + 1];
  __shared__ W bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kTile + ty;  // row of C
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kTile + tx;  // column of C
  for (int64_t p = blockIdx.z; p < g.batch; p += gridDim.z) {
    const T* a = static_cast<const T*>(g.a) + p * g.stride_a;
    const T* b = static_cast<const T*>(g.b) + p * g.stride_b;
    W acc = 0;
    for (int64_t l0 = 0; l0 < g.k; l0 += kTile) {
      const int64_t la = l0 + tx, lb = l0 + ty;
      as[ty][tx] = (i < g.m && la < g.k) ? static_cast<W>(gemm::a_at(g, a, i, la)) : W(0);
      bs[ty][tx] = (lb < g.k && j < g.n) ? static_cast<W>(gemm::b_at(g, b, lb, j)) : W(0);
      __syncthreads();
#pragma unroll
      for (int l = 0; l < kTile; ++l) acc = static_cast<W>(acc + static_cast<W>(as[ty][l] * bs[l][tx]));
      __syncthreads();
    }
    if (i < g.m && j < g.n) {
      T* c = static_cast<T*>(g.c) + p * g.stride_c + i * g.ldc + j;
      *c = gemm::int_result<T>(g, acc, g.beta_int != 0 ? *c : T(0));
    }
  }
}

} // namespace

rt::Status gemm_integer(const GemmArgs& g, rt::Stream stream) {
  const int64_t tiles_n = (g.n + kTile - 1) / kTile, tiles_m = (g.m + kTile - 1) / kTile;
  if (tiles_n > 0x7fffffff || tiles_m > kMaxGridYZ)
    return rt::report(rt::Status::InvalidValue, "gemm: the integer GEMM's rows exceed the grid");
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m),
                  static_cast<unsigned>(std::min<int64_t>(g.batch, kMaxGridYZ)));
  const dim3 block(kTile, kTile);
  const bool ok = dispatch_integer(
      g.dtype, [&](auto tag) { gemm_int_kernel<decltype(tag)><<<grid, block, 0, native(stream)>>>(g); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "gemm: expected an integer dtype");
  return check_launch("gemm (integer)");
}

} // namespace mytorch::cuda
