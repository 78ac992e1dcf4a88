// Fused row-normalisation family: LayerNorm and RMSNorm over the last `cols` elements of each row,
// forward (optionally fused with a residual add: sum = x + residual, y = norm(sum)) and backward.
//
// Note [Fused LayerNorm]
// Statistics are exact two-pass in opmath (fp32 for half types, fp64 for double): the mean, then the mean
// of squared deviations from it (RMSNorm: the mean of squares), rstd = 1 / sqrt(var + eps) (NaN for LayerNorm when
// the variance overflows, lnm::overflow_is_nan); mean and rstd
// are saved per row for the backward. The backward computes, per row,
//   LayerNorm: dx = rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat))
//   RMSNorm:   dx = rstd * (w dy - xhat * mean(w dy xhat))
// in one pass over the row, and the parameter gradients dw = sum_rows(dy xhat), db = sum_rows(dy) through
// per-slot partial sums (a slot is one group of threads, owning its rows: no atomics) and a second,
// column-wise reduction in a fixed order — deterministic.
// cuda/ picks the shape by width: a warp per row for narrow rows (<= 1024 elements), a block per row with
// the row staged in shared memory (read from device memory once) while it fits, and a block per row that
// re-reads the row from device memory for rows too wide for that; loads are 16-byte vectors when the row
// and its alignment allow. sim/ runs the same per-row math in loops — the C++ reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"

namespace mytorch {

struct RowNormArgs {
  bool rms = false;
  DType dtype = DType::Float;        // x, residual, sum, y, dy, dx
  DType param_dtype = DType::Float;  // weight, bias, dweight, dbias (the input's dtype or float32)
  int64_t rows = 0, cols = 0;
  double eps = 1e-5;
  const void* x = nullptr;
  const void* residual = nullptr;    // forward: when set, the normalised input is x + residual ...
  void* sum = nullptr;               // ... written here
  const void* weight = nullptr;      // cols values, or null
  const void* bias = nullptr;        // LayerNorm only, or null
  void* y = nullptr;
  void* mean = nullptr;              // rows values in opmath (LayerNorm; forward writes, backward reads)
  void* rstd = nullptr;              // rows values in opmath
  // backward: x is the normalised input (the saved sum when the forward fused the add)
  const void* dy = nullptr;
  void* dx = nullptr;                // or null when only parameter gradients are wanted
  void* dweight = nullptr;           // cols values, or null
  void* dbias = nullptr;
  void* workspace = nullptr;         // cuda backward: layernorm_workspace_bytes(...)
};

namespace lnm {

template <typename P, typename A>
MT_HOST_DEVICE inline A param(const void* p, int64_t i, A dflt) {
  return p ? static_cast<A>(static_cast<const P*>(p)[i]) : dflt;
}

// LayerNorm's rstd = 1 / sqrt(var + eps): a variance that overflowed to infinity (values near the type's limit)
// gives 0, and the row would read a silent row of zeros; it gives NaN instead, as ATen's CPU LayerNorm does. A
// finite variance never gives 0, so rstd alone tells (0 / 0 is the NaN: no extra register is kept live, which
// the widest kernels cannot afford). RMSNorm keeps 0, as ATen's RMSNorm gives.
template <typename A>
MT_HOST_DEVICE inline A overflow_is_nan(A rstd, bool rms) {
  return rms || rstd != A(0) ? rstd : rstd / rstd;
}

} // namespace lnm

MT_LAUNCHER(layernorm_forward, (const RowNormArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(layernorm_backward, (const RowNormArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER_RETURNING(size_t, layernorm_workspace_bytes, (const RowNormArgs& a), (a))

} // namespace mytorch
