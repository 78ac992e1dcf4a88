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
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"

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
  bool allow_tf32 = false;
  void* workspace = nullptr;    // cuda: scratch for cuBLASLt
  size_t workspace_bytes = 0;
};

// Scratch bytes the cuda launcher wants (the glue allocates them from the caching allocator).
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

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

#if MYTORCH_WITH_CUDA
namespace cuda {
rt::Status grouped_gemm(const GroupedGemmArgs& g, rt::Stream stream);
}
#endif

namespace kernels {
// Only the CUDA kernels have it: on sim the glue computes with ATen's CPU implementation on host views.
inline rt::Status grouped_gemm(const GroupedGemmArgs& g, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::cuda_kernels()) return cuda::grouped_gemm(g, stream);
#endif
  (void)g;
  (void)stream;
  return rt::report(rt::Status::InvalidValue, "grouped_gemm has no sim kernel (the glue computes it on the host)");
}
} // namespace kernels

} // namespace mytorch
