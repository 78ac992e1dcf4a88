// sim fused LayerNorm / RMSNorm (Note [Fused LayerNorm]): the per-row math of the CUDA kernels, rows in parallel,
// each row through the row loops of Note [Sim row loops]. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "mytorch/layernorm.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// The parameters as opmath rows (1 and 0 where absent), once per call.
template <typename P, typename A>
std::vector<A> param_row(const void* p, int64_t n, A dflt) {
  std::vector<A> r(static_cast<size_t>(n), dflt);
  if (p) vec::to_opmath(static_cast<const P*>(p), r.data(), n);
  return r;
}

template <typename T, typename P>
void forward(const RowNormArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t n = a.cols;
  const std::vector<A> w = param_row<P, A>(a.weight, n, A(1)), bias = param_row<P, A>(a.bias, n, A(0));
  par::parallel_for(a.rows, par::grain_for(6 * n), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(3 * n));
    A* t = buf.data() + n;
    for (int64_t r = rb; r < re; ++r) {
      const A* v = vec::as_opmath(static_cast<const T*>(a.x) + r * n, buf.data(), n);
      if (a.residual) {
        // the sum as stored, as the unfused add: rounded to T, then read back
        A* w = buf.data() + 2 * n;
        const A* res = vec::as_opmath(static_cast<const T*>(a.residual) + r * n, t, n);
        for (int64_t j = 0; j < n; ++j) w[j] = v[j] + res[j];
        T* sum = static_cast<T*>(a.sum) + r * n;
        vec::from_opmath(w, sum, n);
        v = vec::as_opmath(static_cast<const T*>(sum), w, n);
      }
      const A mean = a.rms ? A(0) : vec::sum(v, n) / static_cast<A>(n);
      const A sq = vec::sum_of<A>(n, [v, mean](int64_t j) { return (v[j] - mean) * (v[j] - mean); });
      const A rstd = lnm::overflow_is_nan(A(1) / std::sqrt(sq / static_cast<A>(n) + static_cast<A>(a.eps)), a.rms);
      if (a.mean) static_cast<A*>(a.mean)[r] = mean;
      static_cast<A*>(a.rstd)[r] = rstd;
      T* y = static_cast<T*>(a.y) + r * n;
      A* out = t;
      if constexpr (std::is_same_v<T, A>) out = y;
      for (int64_t j = 0; j < n; ++j) out[j] = (v[j] - mean) * rstd * w[j] + bias[j];
      if constexpr (!std::is_same_v<T, A>) vec::from_opmath(t, y, n);
    }
  });
}

// The parameter gradients sum over rows: rows are cut into at most kRowChunks chunks fixed by the sizes, each
// chunk's partial sums accumulate in row order, and the partials are added in chunk order (bit-identical at any
// thread count).
constexpr int64_t kRowChunks = 64;

template <typename T, typename P>
void backward(const RowNormArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t n = a.cols;
  const std::vector<A> w = param_row<P, A>(a.weight, n, A(1));
  const bool params = a.dweight || a.dbias;
  const int64_t per = (a.rows + kRowChunks - 1) / kRowChunks, chunks = (a.rows + per - 1) / per;
  std::vector<A> dw(params && a.dweight ? static_cast<size_t>(chunks * n) : 0, A(0));
  std::vector<A> db(params && a.dbias ? static_cast<size_t>(chunks * n) : 0, A(0));
  par::parallel_for(chunks, par::grain_for(8 * n * per), [&](int64_t cb, int64_t ce) {
    std::vector<A> buf(static_cast<size_t>(3 * n));
    A* xh = buf.data();
    A* gb = buf.data() + n;
    A* t = buf.data() + 2 * n;
    for (int64_t c = cb; c < ce; ++c) {
      A* dwc = a.dweight ? dw.data() + c * n : nullptr;
      A* dbc = a.dbias ? db.data() + c * n : nullptr;
      for (int64_t r = c * per; r < std::min(a.rows, (c + 1) * per); ++r) {
        const A mean = a.rms ? A(0) : static_cast<const A*>(a.mean)[r];
        const A rstd = static_cast<const A*>(a.rstd)[r];
        const A* x = vec::as_opmath(static_cast<const T*>(a.x) + r * n, xh, n);
        const A* g = vec::as_opmath(static_cast<const T*>(a.dy) + r * n, gb, n);
        for (int64_t j = 0; j < n; ++j) xh[j] = (x[j] - mean) * rstd;
        if (dwc)
          for (int64_t j = 0; j < n; ++j) dwc[j] += g[j] * xh[j];
        if (dbc)
          for (int64_t j = 0; j < n; ++j) dbc[j] += g[j];
        if (!a.dx) continue;
        for (int64_t j = 0; j < n; ++j) t[j] = g[j] * w[j];  // w dy
        const A s1 = a.rms ? A(0) : vec::sum(t, n), s2 = vec::dot(t, xh, n);
        const A inv_n = A(1) / static_cast<A>(n);
        T* dx = static_cast<T*>(a.dx) + r * n;
        A* out = t;
        if constexpr (std::is_same_v<T, A>) out = dx;
        for (int64_t j = 0; j < n; ++j) out[j] = rstd * (t[j] - s1 * inv_n - xh[j] * s2 * inv_n);
        if constexpr (!std::is_same_v<T, A>) vec::from_opmath(t, dx, n);
      }
    }
  });
  auto total = [&](std::vector<A>& part, void* out) {
    if (!out) return;
    for (int64_t c = 1; c < chunks; ++c)
      for (int64_t j = 0; j < n; ++j) part[j] += part[c * n + j];
    vec::from_opmath(part.data(), static_cast<P*>(out), n);
  };
  total(dw, a.dweight);
  total(db, a.dbias);
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

MT_SIM_ENTRY rt::Status layernorm_forward(const RowNormArgs& a, rt::Stream) { return run<true>(a); }
MT_SIM_ENTRY rt::Status layernorm_backward(const RowNormArgs& a, rt::Stream) { return run<false>(a); }

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, layernorm_forward, (const RowNormArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, layernorm_backward, (const RowNormArgs& a, rt::Stream s), (a, s))
size_t layernorm_workspace_bytes(const RowNormArgs&) { return 0; }
} // namespace mytorch::sim
#endif
