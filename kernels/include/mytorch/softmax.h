// Softmax family: softmax / log_softmax forward and backward along one dimension.
//
// Note [Softmax family]
// The glue hands a contiguous tensor viewed as [outer, dim, inner]; a "line" is one (outer, inner) pair.
// Statistics accumulate in opmath (fp32 for half types): the line's max, then the sum of exp(x - max),
// then the write — the order ATen's CPU kernels use, so sim matches them closely. Forward may widen
// (half in, float out: _softmax's half_to_float). cuda/ gives each line of the common inner == 1 case a
// block (block-wide max and sum reductions, coalesced row reads; rows up to 40 KB in opmath are staged in
// shared memory, so device memory is read once per row); other layouts run a thread per line with the
// same line function sim/ runs.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"

namespace mytorch {

struct SoftmaxArgs {
  bool log = false;
  bool backward = false;
  DType in_dtype = DType::Float;    // forward: input; backward: grad_output and output
  DType out_dtype = DType::Float;   // forward: output; backward: grad_input
  const void* in = nullptr;         // forward: input; backward: grad_output
  const void* out_saved = nullptr;  // backward: the forward's output
  void* out = nullptr;              // forward: output; backward: grad_input
  int64_t outer = 0, dim = 0, inner = 1;
};

namespace smx {

// Forward of line `l` (inputs I, outputs O, accumulation A).
template <typename I, typename O, typename A>
MT_HOST_DEVICE inline void forward_line(const SoftmaxArgs& s, int64_t l) {
  const int64_t o = l / s.inner, i = l % s.inner;
  const I* x = static_cast<const I*>(s.in) + o * s.dim * s.inner + i;
  O* y = static_cast<O*>(s.out) + o * s.dim * s.inner + i;
  A mx = -INFINITY;
  for (int64_t j = 0; j < s.dim; ++j) {
    const A v = static_cast<A>(x[j * s.inner]);
    mx = (v != v || v > mx) ? v : mx;
  }
  A sum = 0;
  for (int64_t j = 0; j < s.dim; ++j) sum += std::exp(static_cast<A>(x[j * s.inner]) - mx);
  const A lse = std::log(sum);
  for (int64_t j = 0; j < s.dim; ++j) {
    const A v = static_cast<A>(x[j * s.inner]) - mx;
    y[j * s.inner] = static_cast<O>(s.log ? v - lse : std::exp(v) / sum);
  }
}

// Backward of line `l`: softmax gI = y * (g - sum(g * y)); log_softmax gI = g - exp(y) * sum(g).
template <typename G, typename O, typename A>
MT_HOST_DEVICE inline void backward_line(const SoftmaxArgs& s, int64_t l) {
  const int64_t o = l / s.inner, i = l % s.inner, base = o * s.dim * s.inner + i;
  const G* g = static_cast<const G*>(s.in) + base;
  const G* y = static_cast<const G*>(s.out_saved) + base;
  O* gi = static_cast<O*>(s.out) + base;
  A sum = 0;
  for (int64_t j = 0; j < s.dim; ++j) {
    const A gv = static_cast<A>(g[j * s.inner]);
    sum += s.log ? gv : gv * static_cast<A>(y[j * s.inner]);
  }
  for (int64_t j = 0; j < s.dim; ++j) {
    const A gv = static_cast<A>(g[j * s.inner]), yv = static_cast<A>(y[j * s.inner]);
    gi[j * s.inner] = static_cast<O>(s.log ? gv - std::exp(yv) * sum : yv * (gv - sum));
  }
}

} // namespace smx

MT_LAUNCHER(softmax, (const SoftmaxArgs& s, rt::Stream stream), (s, stream))

} // namespace mytorch
