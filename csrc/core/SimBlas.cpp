// The sim runtime's GEMMs (Note [Sim GEMM library]) and the GEMM the sim kernels call for their blocks (Note [Sim
// GEMM] in kernels/include/mytorch/sim_blas.h): ATen's CPU GEMMs on tensors over the buffers, outside the
// dispatcher (no mode, no profiler event per block: the block is part of a mytorch kernel).
#include "csrc/core/SimBlas.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/from_blob.h>
#include <dlfcn.h>

#include <atomic>
#include <optional>

#include "mytorch/sim_blas.h"

namespace mytorch {
namespace {

// Note [Sim GEMM library]
// torch's CPU wheel carries two GEMM libraries. Its float32 matmul calls MKL, which on processors other than
// Intel's runs a generic AVX2 kernel; oneDNN (ATen's mkldnn_matmul, what torch's CPU matmul uses for bfloat16)
// runs AVX-512 where the CPU has it. Measured on this project's machine (AMD EPYC with AVX-512, 2 threads, float32):
//   shape (batch x m x k x n)          MKL            oneDNN
//   2048 x 192 x 576 (the main job)   2.09 ms        0.94 ms
//   96 x 128 x 32 x 128 (attention)   0.52 ms        0.25 ms
//   64 x 576 x 1024 (a conv image)    0.46 ms        0.19 ms
//   1024^3                            9.80 ms        4.38 ms
//   128 x 64 x 128                    13 us          18 us   (oneDNN's per-call set-up)
// So on a CPU that is not Intel's, float32 GEMMs of at least kOneDnnMin multiply-adds go to oneDNN, unless torch's
// mkldnn switch is off; everything else, and every GEMM on Intel processors (where MKL runs its AVX-512 kernels;
// not measured here), goes to MKL as on the CPU. The results differ from the CPU's in rounding only (IEEE float32 in
// both; a float32 precision setting that lets oneDNN use bfloat16 applies as it does to the CPU's own oneDNN calls).
// mkldnn_matmul is exported by libtorch_cpu but declared in no installed header: it is looked up by name once, and
// MKL serves every GEMM when the lookup fails (another torch build).
constexpr int64_t kOneDnnMin = int64_t(1) << 22;

std::atomic<int64_t> g_onednn_calls{0};  // for the tests: that the path is taken where the policy says

using MkldnnMatmul = void (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&, float, float);

MkldnnMatmul mkldnnMatmul() {
  static const MkldnnMatmul f = []() -> MkldnnMatmul {
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel")) return nullptr;
    void* lib = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    void* sym = lib ? dlsym(lib, "_ZN2at6native13mkldnn_matmulERKNS_6TensorES3_S3_ff") : nullptr;
    return reinterpret_cast<MkldnnMatmul>(sym);
  }();
  return f;
}

bool unitStride(const at::Tensor& t) {
  const int64_t d = t.dim();
  return t.stride(d - 1) == 1 || t.stride(d - 2) == 1 || t.size(d - 1) == 1 || t.size(d - 2) == 1;
}

} // namespace

bool simGemmOneDnn(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, float beta, float alpha,
                   const at::Tensor& self) {
  if (a.scalar_type() != at::kFloat || b.scalar_type() != at::kFloat || out.scalar_type() != at::kFloat) return false;
  if (a.dim() != b.dim() || (a.dim() != 2 && a.dim() != 3) || out.dim() != a.dim()) return false;
  const int64_t k = a.size(-1);
  if (k == 0 || out.numel() * k < kOneDnnMin || !mkldnnMatmul() || !at::globalContext().userEnabledMkldnn())
    return false;
  if (!unitStride(a) || !unitStride(b) || !unitStride(out)) return false;
  if (at::get_overlap_status(out, a) != at::MemOverlapStatus::No ||
      at::get_overlap_status(out, b) != at::MemOverlapStatus::No)
    return false;
  if (self.defined() && !self.is_same(out)) {
    if (self.scalar_type() != at::kFloat) return false;
    if (beta != 0) out.copy_(self.expand(out.sizes()));  // oneDNN accumulates onto out
  }
  mkldnnMatmul()(a, b, out, beta, alpha);
  g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t simGemmOneDnnCalls() { return g_onednn_calls.load(); }

namespace {

template <typename A>
at::Tensor view(const A* p, bool t, int64_t rows, int64_t cols, int64_t ld) {
  // op(x) is [rows, cols]; stored transposed, element (r, c) is at c * ld + r
  const auto opts = at::TensorOptions().dtype(c10::CppTypeToScalarType<A>::value);
  return t ? at::from_blob(const_cast<A*>(p), {rows, cols}, {1, ld}, opts)
           : at::from_blob(const_cast<A*>(p), {rows, cols}, {ld, 1}, opts);
}

// Note [Block GEMMs on the calling thread]
// blas::gemm with Threads::Calling runs on the thread that calls it, with MKL's thread-local thread count and
// OpenMP's (which oneDNN reads) set to 1 for the call: a kernel that splits its blocks over the threads itself, in
// blocks fixed by the sizes, then gets each output element's sum over k in one library call's order, whatever the
// thread count. Left to its threads, MKL split a convolution's weight-gradient sum over positions at 4 threads and
// not at 1 or 2 (other bits). Inside a parallel region the libraries already run sequentially; a kernel with a single
// block calls outside one. The functions are looked up by name (MKL's C entry point: mkl_set_num_threads_local is
// its Fortran one, which takes a pointer): a torch without MKL or OpenMP leaves that setting alone.
struct CallingThreadOnly {
  using SetLocal = int (*)(int);
  using SetOmp = void (*)(int);
  using GetOmp = int (*)();
  static SetLocal mklLocal() {
    static const auto f = reinterpret_cast<SetLocal>(dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
    return f;
  }
  static SetOmp ompSet() {
    static const auto f = reinterpret_cast<SetOmp>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    return f;
  }
  static GetOmp ompGet() {
    static const auto f = reinterpret_cast<GetOmp>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    return f;
  }
  int mkl_before = 0, omp_before = 0;
  CallingThreadOnly() {
    if (mklLocal()) mkl_before = mklLocal()(1);
    if (ompSet() && ompGet()) {
      omp_before = ompGet()();
      ompSet()(1);
    }
  }
  ~CallingThreadOnly() {
    if (mklLocal()) mklLocal()(mkl_before);  // 0: back to MKL's global setting
    if (ompSet() && ompGet()) ompSet()(omp_before);
  }
};

template <typename A>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b, int64_t ldb,
          A beta, A* c, int64_t ldc, blas::Threads threads) {
  std::optional<CallingThreadOnly> serial;
  if (threads == blas::Threads::Calling) serial.emplace();
  at::Tensor cc = view<A>(c, false, m, n, ldc);
  at::Tensor aa = view<A>(a, ta, m, k, lda), bb = view<A>(b, tb, k, n, ldb);
  if constexpr (std::is_same_v<A, float>) {
    if (simGemmOneDnn(aa, bb, cc, beta, alpha)) return;
  }
  at::cpu::addmm_out(cc, cc, aa, bb, beta, alpha);
}

const bool kInstalled = [] {
  blas::install(gemm<float>, gemm<double>);
  return true;
}();

} // namespace
} // namespace mytorch
