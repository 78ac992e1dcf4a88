// The GEMM the sim kernels call for their blocks (Note [Sim GEMM]): the CPU BLAS, installed by the glue.
// kernels/ sees only this header: no BLAS, no ATen.
#pragma once

#include <cstdint>

namespace mytorch::blas {

// Note [Sim GEMM]
// Tiled sim kernels (attention's score and output blocks) multiply blocks with the CPU's BLAS, as the sim's GEMM
// family does on host views: the glue installs a runner at start-up (csrc/core/SimBlas.cpp: ATen's CPU addmm,
// outside the dispatcher) the way it installs the parallel runner (Note [Sim parallelism]). Without one, e.g. in
// kernels' own self-tests, a reference loop runs. Called from inside parallel loops, the BLAS runs on the calling
// thread (a nested parallel region is sequential); outside one it uses the library's threads, unless the caller asks
// for the calling thread only (Threads::Calling, Note [Block GEMMs on the calling thread] in csrc/core/SimBlas.cpp):
// then an element's sum over k is one sequential call's, whatever the thread count.
//
// c[m, n] = alpha * op(a)[m, k] . op(b)[k, n] + beta * c, row-major with leading dimensions lda, ldb, ldc;
// op(x) = x, or x transposed when ta / tb (a is then stored [k, m], b [n, k]). beta == 0 ignores c's contents.
enum class Threads : int { Library, Calling };

template <typename A>
using Gemm = void (*)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b,
                      int64_t ldb, A beta, A* c, int64_t ldc, Threads threads);

void install(Gemm<float> f32, Gemm<double> f64);

template <typename A>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b, int64_t ldb,
          A beta, A* c, int64_t ldc, Threads threads = Threads::Library);

} // namespace mytorch::blas
