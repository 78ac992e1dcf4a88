// Embedding family: the dense backward of embedding (the gradient of the weight), deterministic.
//
// Note [Embedding backward]
// The glue sorts the flattened indices with a stable sort (the native sort), so equal indices form runs in
// their original order. Each run sums its gradient rows in that order (opmath accumulation), scales by
// 1/count for scale_grad_by_freq, and writes one weight row; padding_idx rows stay zero. No atomics: the
// same inputs give the same bits on every run. A bad index sets the error flag (the glue raises).
#pragma once

#include <cstdint>

#include "mytorch/device_error.h"
#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"

namespace mytorch {

struct EmbeddingBackwardArgs {
  DType dtype = DType::Float;
  const int64_t* sorted = nullptr;   // sorted indices, n of them
  const int64_t* order = nullptr;    // position of each sorted index in the original flattening
  const void* grad = nullptr;        // [n, dim] contiguous
  void* out = nullptr;               // [num_weights, dim], zeroed by the glue
  int64_t n = 0, dim = 0, num_weights = 0;
  int64_t padding_idx = -1;
  bool scale_grad_by_freq = false;
  ErrorSite error;  // an index out of range is recorded there (device_error.h)
};

namespace emb {

// Run starting at sorted position s, columns [c0, c1): sums and writes; no-op unless s starts a run.
template <typename T>
MT_HOST_DEVICE inline void run(const EmbeddingBackwardArgs& a, int64_t s, int64_t c0, int64_t c1) {
  using A = ew::opmath_t<T>;
  const int64_t idx = a.sorted[s];
  if (s > 0 && a.sorted[s - 1] == idx) return;
  if (idx < 0 || idx >= a.num_weights) {
    record_error(a.error, idx);
    return;
  }
  if (idx == a.padding_idx) return;
  int64_t e = s;
  while (e < a.n && a.sorted[e] == idx) ++e;
  const A scale = a.scale_grad_by_freq ? A(1) / static_cast<A>(e - s) : A(1);
  const T* g = static_cast<const T*>(a.grad);
  T* o = static_cast<T*>(a.out) + idx * a.dim;
  for (int64_t c = c0; c < c1; ++c) {
    A acc = 0;
    for (int64_t k = s; k < e; ++k) acc += static_cast<A>(g[a.order[k] * a.dim + c]);
    o[c] = static_cast<T>(acc * scale);
  }
}

} // namespace emb

MT_LAUNCHER(embedding_backward, (const EmbeddingBackwardArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
