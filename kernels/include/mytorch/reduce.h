// Reduction family: reduce an input over some dimensions into an output (plus an index or mean output
// for max/min/var_mean), and inclusive scans along one dimension (cumsum, cumprod).
//
// Note [Reduction engine]
// The glue splits the input's dimensions into output dims (each with the input stride and the output
// stride) and reduced dims (input stride only). Each output element is the combination of per-thread
// accumulators: sums accumulate in opmath (float for half types, double for double, int64 for
// integers), variance with Welford's update and Chan's combine, arg-reductions keep the first index of
// the extreme value (NaN counts as the extreme, as in ATen). cuda/ gives each output element a block whose
// threads stride over the reduced elements and combine in shared memory; sim/ does the same work as
// blocked loops (partials of 256 elements), so both sum in a similar order.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"

namespace mytorch {

enum class RedOp : int { Sum, Mean, Prod, Max, Min, ArgMax, ArgMin, All, Any, CountNonzero, Norm, Var };

struct ReduceArgs {
  RedOp op = RedOp::Sum;
  DType in_dtype = DType::Float;
  DType out_dtype = DType::Float;
  const void* in = nullptr;
  void* out = nullptr;
  void* out2 = nullptr;          // indices (int64) for ArgMax/ArgMin with values, or mean for var_mean
  bool want_values = true;       // ArgMax/ArgMin: write values to `out` as well as indices to `out2`
  int out_ndim = 0;
  int64_t out_sizes[kMaxDims] = {};
  int64_t out_in_strides[kMaxDims] = {};   // elements
  int64_t out_strides[kMaxDims] = {};      // elements, for out and out2
  int64_t out2_strides[kMaxDims] = {};
  int red_ndim = 0;
  int64_t red_sizes[kMaxDims] = {};
  int64_t red_in_strides[kMaxDims] = {};   // elements
  int64_t out_numel = 0;
  int64_t red_numel = 0;
  double p = 2;                  // Norm order
  double correction = 1;         // Var: divisor is N - correction
  bool take_sqrt = false;        // Var -> std
};

struct ScanArgs {
  bool prod = false;             // cumprod, else cumsum
  DType dtype = DType::Float;    // input and output (the glue casts)
  const void* in = nullptr;
  void* out = nullptr;
  int64_t lines = 0;             // independent scans
  int64_t length = 0;            // elements per scan
  int outer_ndim = 0;
  int64_t outer_sizes[kMaxDims] = {};
  int64_t outer_in_strides[kMaxDims] = {};
  int64_t outer_out_strides[kMaxDims] = {};
  int64_t in_stride = 1, out_stride = 1;   // along the scanned dimension (elements)
};

namespace red {

// Integer sums and products accumulate in int64; predicates and counts in double (exact for counts up to
// 2^53 and for comparisons with zero in every dtype); everything else in opmath.
template <RedOp op, typename T>
using acc_t = std::conditional_t<
    (op == RedOp::Sum || op == RedOp::Prod) && std::is_integral_v<T>, int64_t,
    std::conditional_t<op == RedOp::All || op == RedOp::Any || op == RedOp::CountNonzero, double, ew::opmath_t<T>>>;

// Offset of reduced element j (row-major over the reduced dims: the last one moves fastest).
MT_HOST_DEVICE inline int64_t red_offset(const ReduceArgs& r, int64_t j) {
  if (r.red_ndim == 1) return j * r.red_in_strides[0];  // the common case: no division
  int64_t off = 0;
  for (int d = r.red_ndim - 1; d >= 0; --d) {
    off += (j % r.red_sizes[d]) * r.red_in_strides[d];
    j /= r.red_sizes[d];
  }
  return off;
}

// Scan line l (row-major over the outer dims), accumulated in int64 for integers and opmath otherwise.
template <typename T>
MT_HOST_DEVICE inline void scan_line(const ScanArgs& s, int64_t l) {
  int64_t in_off = 0, out_off = 0;
  for (int d = s.outer_ndim - 1; d >= 0; --d) {
    const int64_t i = l % s.outer_sizes[d];
    l /= s.outer_sizes[d];
    in_off += i * s.outer_in_strides[d];
    out_off += i * s.outer_out_strides[d];
  }
  const T* in = static_cast<const T*>(s.in) + in_off;
  T* out = static_cast<T*>(s.out) + out_off;
  using A = std::conditional_t<std::is_integral_v<T>, int64_t, ew::opmath_t<T>>;
  A acc = s.prod ? A(1) : A(0);
  for (int64_t i = 0; i < s.length; ++i) {
    const A v = static_cast<A>(in[i * s.in_stride]);
    acc = s.prod ? acc * v : acc + v;
    out[i * s.out_stride] = static_cast<T>(acc);
  }
}

// The accumulator of every reduction: value (a), second moment or count-like (b), index or count (n).
template <typename A>
struct Acc {
  A a;
  A b;
  int64_t n;
};

template <typename T>
MT_HOST_DEVICE inline bool is_nan(T v) { return v != v; }

template <RedOp op, typename A>
MT_HOST_DEVICE inline Acc<A> init(double p) {
  switch (op) {
    case RedOp::Prod: case RedOp::All: return {A(1), A(0), 0};
    case RedOp::Max: case RedOp::ArgMax: return {std::numeric_limits<A>::lowest(), A(0), -1};
    case RedOp::Min: case RedOp::ArgMin: return {std::numeric_limits<A>::max(), A(0), -1};
    case RedOp::Norm:  // (Norm reads floating types only: the -inf norm's identity is +inf)
      if (p == -INFINITY) return {static_cast<A>(INFINITY), A(0), 0};
      return {A(0), A(0), 0};
    default: return {A(0), A(0), 0};
  }
}

template <RedOp op, typename A>
MT_HOST_DEVICE inline void push(Acc<A>& s, A v, int64_t idx, double p) {
  if constexpr (op == RedOp::Sum || op == RedOp::Mean) {
    s.a += v;
  } else if constexpr (op == RedOp::Prod) {
    s.a *= v;
  } else if constexpr (op == RedOp::All) {
    s.a = (s.a != A(0) && v != A(0)) ? A(1) : A(0);
  } else if constexpr (op == RedOp::Any) {
    s.a = (s.a != A(0) || v != A(0)) ? A(1) : A(0);
  } else if constexpr (op == RedOp::CountNonzero) {
    s.n += v != A(0);
  } else if constexpr (op == RedOp::Max || op == RedOp::ArgMax) {
    // NaN wins, and among equal values (or NaNs) the first index.
    if (s.n < 0 || (!is_nan(s.a) && (is_nan(v) || v > s.a))) { s.a = v; s.n = idx; }
  } else if constexpr (op == RedOp::Min || op == RedOp::ArgMin) {
    if (s.n < 0 || (!is_nan(s.a) && (is_nan(v) || v < s.a))) { s.a = v; s.n = idx; }
  } else if constexpr (op == RedOp::Norm) {
    using std::abs;
    const A x = v < A(0) ? -v : v;
    if (p == 2) s.a += x * x;
    else if (p == 1) s.a += x;
    else if (p == INFINITY) s.a = (is_nan(x) || x > s.a) ? x : s.a;
    else if (p == -INFINITY) s.a = (is_nan(x) || x < s.a) ? x : s.a;
    else if (p == 0) s.a += x != A(0) ? A(1) : A(0);
    else s.a += static_cast<A>(std::pow(x, static_cast<A>(p)));
  } else if constexpr (op == RedOp::Var) {  // Welford
    s.n += 1;
    const A delta = v - s.a;
    s.a += delta / static_cast<A>(s.n);
    s.b += delta * (v - s.a);
  }
}

template <RedOp op, typename A>
MT_HOST_DEVICE inline void combine(Acc<A>& s, const Acc<A>& o, double p) {
  if constexpr (op == RedOp::Sum || op == RedOp::Mean) {
    s.a += o.a;
  } else if constexpr (op == RedOp::Prod) {
    s.a *= o.a;
  } else if constexpr (op == RedOp::All) {
    s.a = (s.a != A(0) && o.a != A(0)) ? A(1) : A(0);
  } else if constexpr (op == RedOp::Any) {
    s.a = (s.a != A(0) || o.a != A(0)) ? A(1) : A(0);
  } else if constexpr (op == RedOp::CountNonzero) {
    s.n += o.n;
  } else if constexpr (op == RedOp::Max || op == RedOp::ArgMax || op == RedOp::Min || op == RedOp::ArgMin) {
    if (o.n < 0) return;
    if (s.n < 0) { s = o; return; }
    const bool take_max = op == RedOp::Max || op == RedOp::ArgMax;
    const bool better = is_nan(o.a) ? !is_nan(s.a) || o.n < s.n
                        : (!is_nan(s.a) && (take_max ? o.a > s.a : o.a < s.a));
    const bool tie = !is_nan(o.a) && !is_nan(s.a) && o.a == s.a && o.n < s.n;
    if (better || tie) s = o;
  } else if constexpr (op == RedOp::Norm) {
    if (p == INFINITY) s.a = (is_nan(o.a) || o.a > s.a) ? o.a : s.a;
    else if (p == -INFINITY) s.a = (is_nan(o.a) || o.a < s.a) ? o.a : s.a;
    else s.a += o.a;
  } else if constexpr (op == RedOp::Var) {  // Chan et al.
    if (o.n == 0) return;
    if (s.n == 0) { s = o; return; }
    const int64_t n = s.n + o.n;
    const A delta = o.a - s.a;
    s.a += delta * static_cast<A>(o.n) / static_cast<A>(n);
    s.b += o.b + delta * delta * static_cast<A>(s.n) * static_cast<A>(o.n) / static_cast<A>(n);
    s.n = n;
  }
}

// The reduced value (before the cast to the output dtype); `mean` receives Var's mean.
template <RedOp op, typename A>
MT_HOST_DEVICE inline A finish(const Acc<A>& s, const ReduceArgs& r, A* mean) {
  if constexpr (op == RedOp::Mean) {
    return s.a / static_cast<A>(r.red_numel);
  } else if constexpr (op == RedOp::CountNonzero) {
    return static_cast<A>(s.n);
  } else if constexpr (op == RedOp::Norm) {
    if (r.p == 2) return static_cast<A>(std::sqrt(s.a));
    if (r.p == 1 || r.p == 0 || r.p == INFINITY || r.p == -INFINITY) return s.a;
    return static_cast<A>(std::pow(s.a, static_cast<A>(1.0 / r.p)));
  } else if constexpr (op == RedOp::Var) {
    if (mean) *mean = s.n ? s.a : static_cast<A>(NAN);
    A div = static_cast<A>(s.n) - static_cast<A>(r.correction);
    if (div < A(0)) div = A(0);
    const A v = s.b / div;  // 0/0 -> NaN, m2/0 -> inf, as ATen
    return r.take_sqrt ? static_cast<A>(std::sqrt(v)) : v;
  } else {
    return s.a;
  }
}

} // namespace red

namespace sim {
rt::Status reduce(const ReduceArgs& r, rt::Stream stream);
rt::Status scan(const ScanArgs& s, rt::Stream stream);
} // namespace sim
#if MYTORCH_WITH_CUDA
namespace cuda {
rt::Status reduce(const ReduceArgs& r, rt::Stream stream);
rt::Status scan(const ScanArgs& s, rt::Stream stream);
} // namespace cuda
#endif

namespace kernels {
inline rt::Status reduce(const ReduceArgs& r, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::cuda_kernels()) return cuda::reduce(r, stream);
#endif
  return sim::reduce(r, stream);
}
inline rt::Status scan(const ScanArgs& s, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::cuda_kernels()) return cuda::scan(s, stream);
#endif
  return sim::scan(s, stream);
}
} // namespace kernels

} // namespace mytorch
