// Installs the sim kernels' GEMM (Note [Sim GEMM] in kernels/include/mytorch/sim_blas.h): ATen's CPU addmm on
// tensors over the kernel's buffers, called through at::cpu:: so that it bypasses the dispatcher (no mode, no
// profiler event per block: the block is part of a mytorch kernel) and runs the CPU BLAS torch was built with.
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/from_blob.h>

#include "mytorch/sim_blas.h"

namespace mytorch {
namespace {

template <typename A>
at::Tensor view(const A* p, bool t, int64_t rows, int64_t cols, int64_t ld) {
  // op(x) is [rows, cols]; stored transposed, element (r, c) is at c * ld + r
  const auto opts = at::TensorOptions().dtype(c10::CppTypeToScalarType<A>::value);
  return t ? at::from_blob(const_cast<A*>(p), {rows, cols}, {1, ld}, opts)
           : at::from_blob(const_cast<A*>(p), {rows, cols}, {ld, 1}, opts);
}

template <typename A>
void addmm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b, int64_t ldb,
           A beta, A* c, int64_t ldc) {
  at::Tensor cc = view<A>(c, false, m, n, ldc);
  at::cpu::addmm_out(cc, cc, view<A>(a, ta, m, k, lda), view<A>(b, tb, k, n, ldb), beta, alpha);
}

const bool kInstalled = [] {
  blas::install(addmm<float>, addmm<double>);
  return true;
}();

} // namespace
} // namespace mytorch
