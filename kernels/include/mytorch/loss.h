// Loss family: negative log-likelihood (nll_loss, nll_loss2d and cross_entropy's second half), forward and
// backward, with class weights, ignore_index and the three reductions.
//
// Note [NLL loss]
// The glue hands log-probabilities viewed as [n, c, inner] (inner = the spatial size for nll_loss2d, 1
// otherwise) and targets as [n, inner]. An element contributes -w[t] * logp[n, t, i] and weight w[t] unless
// its target is ignore_index; a target outside [0, c) sets the error flag and is skipped (the glue raises
// IndexError; CUDA PyTorch stops the process with a device assert instead). Reductions accumulate in
// opmath over a fixed order — sim sequentially, cuda in one block (as CUDA PyTorch does, deterministic);
// mean divides by the total weight (0/0 gives NaN, as ATen). Backward writes -w[t] * g into a zeroed
// grad_input.
#pragma once

#include <cstdint>

#include "mytorch/device_error.h"
#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"

namespace mytorch {

enum class Reduction : int { None = 0, Mean = 1, Sum = 2 };  // at::Reduction's values

struct NllArgs {
  bool backward = false;
  DType dtype = DType::Float;        // logp, weight, output, grad_output, grad_input, total_weight
  const void* logp = nullptr;        // forward input
  const int64_t* target = nullptr;
  const void* weight = nullptr;      // c values, or null
  void* out = nullptr;               // forward: [n, inner] (None) or a scalar; backward: grad_input [n, c, inner]
  void* total_weight = nullptr;      // forward: written (Mean/Sum); backward: read
  const void* grad_out = nullptr;    // backward: [n, inner] (None) or a scalar
  int64_t n = 0, c = 0, inner = 1;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  ErrorSite error;  // a target out of range is recorded there (device_error.h)
};

namespace nll {

// Target of element e (row-major over [n, inner]) and its class weight; false when ignored or bad.
template <typename T, typename A>
MT_HOST_DEVICE inline bool element(const NllArgs& a, int64_t e, int64_t* t, A* w) {
  *t = a.target[e];
  if (*t == a.ignore_index) return false;
  if (*t < 0 || *t >= a.c) {
    record_error(a.error, *t);
    return false;
  }
  *w = a.weight ? static_cast<A>(static_cast<const T*>(a.weight)[*t]) : A(1);
  return true;
}

// Offset of logp / grad_input for element e and class t.
MT_HOST_DEVICE inline int64_t offset(const NllArgs& a, int64_t e, int64_t t) {
  return (e / a.inner) * a.c * a.inner + t * a.inner + e % a.inner;
}

} // namespace nll

MT_LAUNCHER(nll_loss, (const NllArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
