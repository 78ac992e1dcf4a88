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
  const void* a = nullptr; int64_t lda = 0, stride_a = 0; bool trans_a = false;   // A: m x k
  const void* b = nullptr; int64_t ldb = 0, stride_b = 0; bool trans_b = false;   // B: k x n
  void* c = nullptr; int64_t ldc = 0, stride_c = 0;                               // C: m x n, unit column stride
  const void* bias = nullptr;   // n values added to every row (requires beta == 0)
  GemmEpilogue epilogue = GemmEpilogue::None;
  double alpha = 1, beta = 0;
  bool allow_tf32 = false;
  void* workspace = nullptr;    // cuda: scratch for cuBLASLt
  size_t workspace_bytes = 0;
};

// Scratch bytes the cuda launcher wants (the glue allocates them from the caching allocator).
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

namespace sim {
rt::Status gemm(const GemmArgs& g, rt::Stream stream);
}
#if MYTORCH_WITH_CUDA
namespace cuda {
rt::Status gemm(const GemmArgs& g, rt::Stream stream);
}
#endif

namespace kernels {
inline rt::Status gemm(const GemmArgs& g, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::cuda_kernels()) return cuda::gemm(g, stream);
#endif
  return sim::gemm(g, stream);
}
} // namespace kernels

} // namespace mytorch
