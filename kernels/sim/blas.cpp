// The sim kernels' GEMM (Note [Sim GEMM] in sim_blas.h): whatever the glue installed, else a reference loop.
#include <atomic>

#include "mytorch/sim_blas.h"

namespace mytorch::blas {
namespace {

std::atomic<Gemm<float>> g_f32{nullptr};
std::atomic<Gemm<double>> g_f64{nullptr};

template <typename A>
void reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b,
               int64_t ldb, A beta, A* c, int64_t ldc, Threads) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      A acc = 0;
      for (int64_t l = 0; l < k; ++l)
        acc += (ta ? a[l * lda + i] : a[i * lda + l]) * (tb ? b[j * ldb + l] : b[l * ldb + j]);
      c[i * ldc + j] = alpha * acc + (beta == A(0) ? A(0) : beta * c[i * ldc + j]);
    }
}

} // namespace

void install(Gemm<float> f32, Gemm<double> f64) {
  g_f32.store(f32);
  g_f64.store(f64);
}

template <typename A>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, A alpha, const A* a, int64_t lda, const A* b, int64_t ldb,
          A beta, A* c, int64_t ldc, Threads threads) {
  if (m <= 0 || n <= 0) return;
  Gemm<A> f = nullptr;
  if constexpr (sizeof(A) == 4) f = g_f32.load(std::memory_order_acquire);
  else f = g_f64.load(std::memory_order_acquire);
  (f ? f : reference<A>)(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads);
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t, Threads);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t, Threads);

} // namespace mytorch::blas
