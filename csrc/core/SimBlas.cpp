// Installs the sim kernels' GEMM (Note [Sim GEMM] in kernels/include/mytorch/sim_blas.h): ATen's CPU GEMMs on
// tensors over the kernel's buffers, outside the dispatcher (no mode, no profiler event per block: the block is
// part of a mytorch kernel).
//
// Which library: torch's CPU wheel has two. Its matmul calls MKL, which on AMD processors runs a generic AVX2
// kernel; oneDNN (ATen's mkldnn_matmul) runs AVX-512 where the CPU has it. On this project's machine (AMD EPYC)
// oneDNN multiplied 64x576 by 576x1024 (a convolution's image) in 0.19 ms against MKL's 0.46 ms, and 1024^3 in
// 4.4 ms against 9.8 ms, but is slower below a few million multiply-adds (128x64x128: 18 us against 13 us, its
// per-call set-up). So large float32 blocks go to oneDNN, when torch has it enabled, and the rest to MKL through
// at::cpu::addmm. mkldnn_matmul is exported by libtorch_cpu but declared in no installed header: it is looked up
// by name at first use, and MKL serves every block when the lookup fails.
#include <ATen/Context.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/from_blob.h>
#include <dlfcn.h>

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

// at::native::mkldnn_matmul(mat1, mat2, result, beta, alpha): result = beta * result + alpha * mat1 . mat2
using MkldnnMatmul = void (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&, float, float);

MkldnnMatmul mkldnnMatmul() {
  static const MkldnnMatmul f = [] {
    void* lib = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    void* sym = lib ? dlsym(lib, "_ZN2at6native13mkldnn_matmulERKNS_6TensorES3_S3_ff") : nullptr;
    return reinterpret_cast<MkldnnMatmul>(sym);
  }();
  return f;
}

constexpr int64_t kOneDnnMin = int64_t(1) << 22;  // multiply-adds from which oneDNN wins (measured above)

template <typename A>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b, int64_t ldb,
          A beta, A* c, int64_t ldc) {
  at::Tensor cc = view<A>(c, false, m, n, ldc);
  at::Tensor aa = view<A>(a, ta, m, k, lda), bb = view<A>(b, tb, k, n, ldb);
  if constexpr (std::is_same_v<A, float>) {
    if (m * n * k >= kOneDnnMin && k > 0 && mkldnnMatmul() && at::globalContext().userEnabledMkldnn()) {
      mkldnnMatmul()(aa, bb, cc, beta, alpha);
      return;
    }
  }
  at::cpu::addmm_out(cc, cc, aa, bb, beta, alpha);
}

const bool kInstalled = [] {
  blas::install(gemm<float>, gemm<double>);
  return true;
}();

} // namespace
} // namespace mytorch
