// sim GEMM: the reference loop of the GEMM family (Note [GEMM family]); fp32 accumulation for half types
// and fp32, fp64 for fp64, epilogues applied in the accumulation type; integers wrap (Note [Integer GEMM]).
#include <cmath>

#include "mytorch/gemm.h"
#include "mytorch/ops_math.h"

namespace mytorch::sim {
namespace {

template <typename T>
void run(const GemmArgs& g) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  const T* bias = static_cast<const T*>(g.bias);
  T* c = static_cast<T*>(g.c);
  for (int64_t p = 0; p < g.batch; ++p) {
    const T* ap = a + p * g.stride_a;
    const T* bp = b + p * g.stride_b;
    T* cp = c + p * g.stride_c;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        A acc = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          const A x = static_cast<A>(g.trans_a ? ap[l * g.lda + i] : ap[i * g.lda + l]);
          const A y = static_cast<A>(g.trans_b ? bp[j * g.ldb + l] : bp[l * g.ldb + j]);
          acc += x * y;
        }
        A v = static_cast<A>(g.alpha) * acc;
        if (g.beta != 0) v += static_cast<A>(g.beta) * static_cast<A>(cp[i * g.ldc + j]);
        if (bias) v += static_cast<A>(bias[j]);
        if (g.epilogue == GemmEpilogue::Relu) v = v > A(0) ? v : A(0);
        if (g.epilogue == GemmEpilogue::Gelu) {
          const A inner = A(0.7978845608028654) * (v + A(0.044715) * v * v * v);
          v = A(0.5) * v * (A(1) + std::tanh(inner));
        }
        cp[i * g.ldc + j] = static_cast<T>(v);
      }
    }
  }
}

// Note [Integer GEMM]: the loop of cuda/gemm_int.cu, wrapping in gemm::wrap_t.
template <typename T>
void run_integer(const GemmArgs& g) {
  using W = gemm::wrap_t<T>;
  for (int64_t p = 0; p < g.batch; ++p) {
    const T* ap = static_cast<const T*>(g.a) + p * g.stride_a;
    const T* bp = static_cast<const T*>(g.b) + p * g.stride_b;
    T* cp = static_cast<T*>(g.c) + p * g.stride_c;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        W acc = 0;
        for (int64_t l = 0; l < g.k; ++l)
          acc = static_cast<W>(
              acc + static_cast<W>(static_cast<W>(gemm::a_at(g, ap, i, l)) * static_cast<W>(gemm::b_at(g, bp, l, j))));
        T* c = cp + i * g.ldc + j;
        *c = gemm::int_result<T>(g, acc, g.beta_int != 0 ? *c : T(0));
      }
  }
}

} // namespace

rt::Status gemm(const GemmArgs& g, rt::Stream) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return rt::Status::Success;
  if (gemm_integer_dtype(g.dtype)) {
    const bool ok = dispatch_integer(g.dtype, [&](auto tag) { run_integer<decltype(tag)>(g); });
    return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "gemm: unexpected dtype");
  }
  const bool ok = dispatch_floating(g.dtype, [&](auto tag) { run<decltype(tag)>(g); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "gemm: expected a floating dtype");
}

} // namespace mytorch::sim
