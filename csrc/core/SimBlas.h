// The sim runtime's GEMM library choice (Note [Sim GEMM library], SimBlas.cpp): the GEMM family's sim path and the
// GEMM blocks of sim kernels (kernels/include/mytorch/sim_blas.h) ask here first.
#pragma once

#include <ATen/core/Tensor.h>

namespace mytorch {

// out = beta * self + alpha * a . b (self: out itself when undefined or out) for float32 CPU tensors (2-D, or 3-D
// batched; each operand with a unit stride in one of its last two dimensions; out not sharing memory with a or b;
// self broadcastable to out), through oneDNN when the policy picks it. false: nothing was done, and the caller
// runs ATen's CPU GEMM (MKL), as torch's CPU matmul does.
bool simGemmOneDnn(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, float beta, float alpha,
                   const at::Tensor& self = at::Tensor());

} // namespace mytorch
