// sim fused LayerNorm / RMSNorm (Note [Fused LayerNorm]): the per-row math in loops — the reference.
#include <vector>

#include "mytorch/layernorm.h"

namespace mytorch::sim {
namespace {

// Pairwise summation (blocks of 64 summed in order, then halves combined): error O(log n) rather than
// O(n), the accuracy class of the CUDA kernels' per-thread partials and tree reductions and of ATen's
// CPU kernels.
template <typename A>
A pairwise(const A* v, int64_t n) {
  if (n <= 64) {
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += v[i];
    return s;
  }
  const int64_t h = n / 2;
  return pairwise(v, h) + pairwise(v + h, n - h);
}

template <typename T, typename P>
void forward(const RowNormArgs& a) {
  using A = ew::opmath_t<T>;
  std::vector<A> v(static_cast<size_t>(a.cols)), d(static_cast<size_t>(a.cols));
  for (int64_t r = 0; r < a.rows; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * a.cols;
    const T* res = a.residual ? static_cast<const T*>(a.residual) + r * a.cols : nullptr;
    T* sum = a.sum ? static_cast<T*>(a.sum) + r * a.cols : nullptr;
    for (int64_t j = 0; j < a.cols; ++j) {
      A val = static_cast<A>(x[j]);
      if (res) {
        const T t = static_cast<T>(val + static_cast<A>(res[j]));  // the sum as stored, as the unfused add
        sum[j] = t;
        val = static_cast<A>(t);
      }
      v[j] = val;
    }
    const A mean = a.rms ? A(0) : pairwise(v.data(), a.cols) / static_cast<A>(a.cols);
    for (int64_t j = 0; j < a.cols; ++j) d[j] = (v[j] - mean) * (v[j] - mean);
    const A sq = pairwise(d.data(), a.cols);
    const A rstd = lnm::overflow_is_nan(A(1) / std::sqrt(sq / static_cast<A>(a.cols) + static_cast<A>(a.eps)), a.rms);
    if (a.mean) static_cast<A*>(a.mean)[r] = mean;
    static_cast<A*>(a.rstd)[r] = rstd;
    T* y = static_cast<T*>(a.y) + r * a.cols;
    for (int64_t j = 0; j < a.cols; ++j)
      y[j] = static_cast<T>((v[j] - mean) * rstd * lnm::param<P, A>(a.weight, j, A(1)) +
                            lnm::param<P, A>(a.bias, j, A(0)));
  }
}

template <typename T, typename P>
void backward(const RowNormArgs& a) {
  using A = ew::opmath_t<T>;
  std::vector<A> dw(a.dweight ? a.cols : 0, A(0)), db(a.dbias ? a.cols : 0, A(0));
  std::vector<A> t1(static_cast<size_t>(a.cols)), t2(static_cast<size_t>(a.cols));
  for (int64_t r = 0; r < a.rows; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * a.cols;
    const T* dy = static_cast<const T*>(a.dy) + r * a.cols;
    const A mean = a.rms ? A(0) : static_cast<const A*>(a.mean)[r];
    const A rstd = static_cast<const A*>(a.rstd)[r];
    for (int64_t j = 0; j < a.cols; ++j) {
      const A xhat = (static_cast<A>(x[j]) - mean) * rstd;
      const A g = static_cast<A>(dy[j]);
      const A wdy = g * lnm::param<P, A>(a.weight, j, A(1));
      t1[j] = wdy;
      t2[j] = wdy * xhat;
      if (a.dweight) dw[j] += g * xhat;
      if (a.dbias) db[j] += g;
    }
    const A s1 = pairwise(t1.data(), a.cols), s2 = pairwise(t2.data(), a.cols);
    if (!a.dx) continue;
    const A inv_n = A(1) / static_cast<A>(a.cols);
    T* dx = static_cast<T*>(a.dx) + r * a.cols;
    for (int64_t j = 0; j < a.cols; ++j) {
      const A xhat = (static_cast<A>(x[j]) - mean) * rstd;
      const A wdy = static_cast<A>(dy[j]) * lnm::param<P, A>(a.weight, j, A(1));
      dx[j] = static_cast<T>(rstd * (wdy - (a.rms ? A(0) : s1 * inv_n) - xhat * s2 * inv_n));
    }
  }
  for (int64_t j = 0; j < static_cast<int64_t>(dw.size()); ++j) static_cast<P*>(a.dweight)[j] = static_cast<P>(dw[j]);
  for (int64_t j = 0; j < static_cast<int64_t>(db.size()); ++j) static_cast<P*>(a.dbias)[j] = static_cast<P>(db[j]);
}

template <bool fwd>
rt::Status run(const RowNormArgs& a) {
  if (a.rows == 0 || a.cols == 0) return rt::Status::Success;
  const bool ok = dispatch_floating_with_param(a.dtype, a.param_dtype, [&](auto t, auto p) {
    fwd ? forward<decltype(t), decltype(p)>(a) : backward<decltype(t), decltype(p)>(a);
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue,
                         "layernorm: expected floating inputs with parameters of the same dtype or float32");
}

} // namespace

rt::Status layernorm_forward(const RowNormArgs& a, rt::Stream) { return run<true>(a); }
rt::Status layernorm_backward(const RowNormArgs& a, rt::Stream) { return run<false>(a); }
size_t layernorm_workspace_bytes(const RowNormArgs&) { return 0; }

} // namespace mytorch::sim
