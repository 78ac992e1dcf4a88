// GEMM family: C = alpha * op(A) @ op(B) + beta * C (+ bias, + activation), batched with strides.
//
// Note [GEMM family]
// Matrices are described row-major (the way ATen sees them): a matrix with a unit column stride has
// `ld` = its row stride; a transposed operand (unit row stride) sets trans_* and `ld` = its column stride.
// cuda/ hands the product to cuBLASLt (loaded at first use with dlopen, so a build with CUDA still imports
// on a machine without cuBLAS), computing C^T = op(B)^T op(A)^T in cuBLASLt's column-major terms; the bias
// and ReLU/GELU epilogues run inside the GEMM. fp16/bf16 always accumulate in fp32; fp32 uses TF32 tensor
// cores only when `allow_tf32` (torch.set_float32_matmul_precision("high"/"medium")). sim/ is the plain
// reference loop (fp32/fp64 accumulation) that the GPU tests compare cuBLAS against; the torch glue on sim
// prefers ATen's CPU BLAS on host views of the buffers (docs/architecture.md), which is what CPU PyTorch computes.
//
// Note [Integer GEMM]
// torch.mm and its kin take every integer dtype on the CPU (and on CUDA since 2.x for int8 and wider); cuBLASLt
// has no such GEMM beyond int8 x int8 -> int32. The integer dtypes (int8, uint8, int16, int32, int64) therefore
// take the family's own kernel on cuda (cuda/gemm_int.cu: 16 x 16 output tiles, each thread one element, the
// operands staged through shared memory a 16-deep slice of k at a time) and the same loop on sim. Products and
// sums wrap at the dtype's width, as the CPU's integer arithmetic does, by computing in its unsigned twin
// (gemm::wrap_t), and alpha / beta are integers (alpha_int, beta_int); beta == 0 ignores C's old contents.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

enum class GemmEpilogue : int { None, Relu, Gelu /* tanh approximation, as cuBLASLt's */ };

struct GemmArgs {
  DType dtype = DType::Float;   // A, B, C and bias
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  bool trans_a = false;   // A: m x k
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  bool trans_b = false;   // B: k x n
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;                               // C: m x n, unit column stride
  const void* bias = nullptr;   // n values added to every row (requires beta == 0)
  GemmEpilogue epilogue = GemmEpilogue::None;
  double alpha = 1, beta = 0;
  int64_t alpha_int = 1, beta_int = 0;  // the integer dtypes' (Note [Integer GEMM])
  bool allow_tf32 = false;
  void* workspace = nullptr;    // cuda: scratch for cuBLASLt
  size_t workspace_bytes = 0;
};

// Scratch bytes the cuda launcher wants (the glue allocates them from the caching allocator).
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

namespace gemm {
// The unsigned type an integer GEMM computes in, so that products and sums wrap (Note [Integer GEMM]); at least
// 32 bits wide, so that no operand is promoted to a signed int (whose overflow is undefined). The result is cut
// to T's width at the end, which is the same modulo 2^width.
template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

// Element (i, j) of op(A) and op(B) for a GemmArgs' operands at batch offset 0.
template <typename T>
MT_HOST_DEVICE inline T a_at(const GemmArgs& g, const T* a, int64_t i, int64_t l) {
  return g.trans_a ? a[l * g.lda + i] : a[i * g.lda + l];
}
template <typename T>
MT_HOST_DEVICE inline T b_at(const GemmArgs& g, const T* b, int64_t l, int64_t j) {
  return g.trans_b ? b[j * g.ldb + l] : b[l * g.ldb + j];
}

// C = alpha * acc + beta * C, wrapped to T.
template <typename T>
MT_HOST_DEVICE inline T int_result(const GemmArgs& g, wrap_t<T> acc, T c) {
  using W = wrap_t<T>;
  W v = static_cast<W>(static_cast<W>(g.alpha_int) * acc);
  if (g.beta_int != 0) v = static_cast<W>(v + static_cast<W>(static_cast<W>(g.beta_int) * static_cast<W>(c)));
  return static_cast<T>(v);
}
} // namespace gemm

// True for the dtypes the integer path takes (Note [Integer GEMM]).
constexpr bool gemm_integer_dtype(DType t) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64;
}

MT_LAUNCHER(gemm, (const GemmArgs& g, rt::Stream stream), (g, stream))

// Grouped GEMM (torch._grouped_mm, the mixture-of-experts GEMM): G products in one launch, the groups' extents
// read from `offs` on the device (int32 cumulative ends, as ATen's), so the host never waits for them.
//   Rows  (2-D A x 3-D B): rows [offs[g-1], offs[g]) of A and C use B[g]          C: total_m x n
//   Cols  (3-D A x 2-D B): columns [offs[g-1], offs[g]) of B and C use A[g]       C: m x total_n
//   Depth (2-D A x 2-D B): C[g] = A[:, ks:ke] @ B[ks:ke, :] with [ks, ke) from offs  C: G x m x n (zeros if empty)
// Rows / columns no group reaches are not written (as ATen's kernels); extents are clamped to the operands.
// Operands are read through any strides (elements); accumulation is float32. The 3-D x 3-D case is a bmm.
// On sim the glue computes with ATen's CPU implementation on host views (what CPU PyTorch computes), as mm.
enum class GroupMode : int { Rows, Cols, Depth };

struct GroupedGemmArgs {
  DType dtype = DType::BFloat16;  // A, B and C
  GroupMode mode = GroupMode::Rows;
  int64_t groups = 0, m = 0, n = 0, k = 0;  // full extents of C's rows / columns and of the contraction
  const int32_t* offs = nullptr;
  const void* a = nullptr;
  int64_t a_group = 0, a_row = 0, a_col = 0;  // strides; a_group for 3-D A
  const void* b = nullptr;
  int64_t b_group = 0, b_row = 0, b_col = 0;  // b_group for 3-D B
  void* c = nullptr;
  int64_t c_group = 0, c_row = 0, c_col = 0;        // c_group for Depth
};

// Only the CUDA kernels have it: on sim the glue computes with ATen's CPU implementation on host views.
MT_CUDA_ONLY_LAUNCHER(grouped_gemm, (const GroupedGemmArgs& g, rt::Stream stream), (g, stream),
                      "grouped_gemm has no sim kernel (the glue computes it on the host)")

} // namespace mytorch
