// Normalisation family: GroupNorm and BatchNorm forward and backward over one description (LayerNorm and
// RMSNorm have their own width-specialised kernels: layernorm.h).
//
// Note [Normalisation family]
// Both norms compute statistics per *group* of elements and apply an affine transform per *channel*:
//   Group: input [N, C, HW] with G groups; group = (n, g) spanning C/G channels x HW; channel = c.
//   Batch: input [N, C, HW]; group = channel = c, spanning N x HW (strided).
// The helpers below map (group, j) and (channel, i) to element offsets, so one set of kernels serves all
// both: statistics (Welford in opmath, Chan's combine — the reduction family's accumulator), the
// elementwise apply, the input gradient per group (dx = rstd * (w dy - mean(w dy) - xhat mean(w dy xhat)),
// or dy w rstd for batch norm in eval mode), and the weight/bias gradients per channel. Saved statistics
// are in opmath (fp32 for half types), as CUDA PyTorch saves them; weights, biases and running statistics
// have their own dtype (`param_dtype`). cuda/ gives each group (or channel) a block, or, when the groups are too few
// to fill the device, `splits` blocks each summing a fixed range of it into a partial (in double) that a second
// pass combines in range order (Note [CUDA reduction plan]'s split, with the family's own sums); dx is then an
// elementwise pass.
//
// Note [Two-level sums]
// A group or channel can hold tens of millions of elements (GroupNorm over 1x8x256x256x72 in 2 groups: 19M per
// group); one float accumulator over them drifts by about n * eps (the issue measured 2.1e-2 against the CPU's
// 1.2e-7). Every accumulation of the family (the statistics, the dx sums, the weight/bias gradients) therefore
// runs in chunks of kNormChunk elements in opmath, and the chunks' results are combined in double (Chan's rule
// for the statistics). A lane walks j = first, first + step, ... (sim: one lane, step 1; cuda: a thread of the
// block, step blockDim), so both runtimes share the helpers below.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"
#include "mytorch/ops_math.h"
#include "mytorch/welford.h"

namespace mytorch {

enum class NormKind : int { Group, Batch };

struct NormArgs {
  NormKind kind = NormKind::Batch;
  DType dtype = DType::Float;        // x, y, dy, dx
  DType param_dtype = DType::Float;  // weight, bias, running stats, dweight, dbias
  int64_t n = 0, c = 0, hw = 1, groups = 1;
  const void* x = nullptr;
  void* y = nullptr;
  const void* weight = nullptr;      // per channel, or null
  const void* bias = nullptr;
  void* mean = nullptr;              // per group, opmath (forward: written, or read in eval batch norm)
  void* rstd = nullptr;
  void* running_mean = nullptr;      // Batch
  void* running_var = nullptr;
  bool training = true;              // Batch: batch statistics (and running-stat update) vs running stats
  double momentum = 0.1, eps = 1e-5;
  // backward
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dweight = nullptr;
  void* dbias = nullptr;
  void* workspace = nullptr;         // cuda: norm_workspace_bytes(*this) bytes, from the glue
};

namespace nrm {

MT_HOST_DEVICE inline int64_t group_count(const NormArgs& a) {
  return a.kind == NormKind::Group ? a.n * a.groups : a.c;
}
MT_HOST_DEVICE inline int64_t group_len(const NormArgs& a) {
  return a.kind == NormKind::Group ? (a.c / a.groups) * a.hw : a.n * a.hw;
}
// Offset and channel of element j of group g.
MT_HOST_DEVICE inline int64_t group_offset(const NormArgs& a, int64_t g, int64_t j, int64_t* ch) {
  if (a.kind == NormKind::Group) {
    const int64_t cpg = a.c / a.groups, n = g / a.groups, gi = g % a.groups;
    *ch = gi * cpg + j / a.hw;
    return n * a.c * a.hw + gi * cpg * a.hw + j;
  }
  *ch = g;
  return (j / a.hw) * a.c * a.hw + g * a.hw + j % a.hw;
}
// Group and channel of the element at a flat offset.
MT_HOST_DEVICE inline int64_t group_of(const NormArgs& a, int64_t off, int64_t* ch) {
  const int64_t c = (off / a.hw) % a.c;
  *ch = c;
  if (a.kind == NormKind::Group) return (off / (a.c * a.hw)) * a.groups + c / (a.c / a.groups);
  return c;
}
MT_HOST_DEVICE inline int64_t channel_len(const NormArgs& a) { return a.n * a.hw; }
// Offset and group of element i of channel ch.
MT_HOST_DEVICE inline int64_t channel_offset(const NormArgs& a, int64_t ch, int64_t i, int64_t* g) {
  const int64_t n = i / a.hw;
  *g = a.kind == NormKind::Group ? n * a.groups + ch / (a.c / a.groups) : ch;
  return n * a.c * a.hw + ch * a.hw + i % a.hw;
}

template <typename T>
MT_HOST_DEVICE inline double ld(const void* p, int64_t i) {
  return static_cast<double>(static_cast<const T*>(p)[i]);
}

// A parameter (weight/bias/running stat) of dtype P as opmath A; `dflt` when absent.
template <typename P, typename A>
MT_HOST_DEVICE inline A param(const void* p, int64_t i, A dflt) {
  return p ? static_cast<A>(static_cast<const P*>(p)[i]) : dflt;
}

// Statistics of group g from its Welford accumulator; batch norm in training also updates running stats.
template <typename T, typename P, typename A>
MT_HOST_DEVICE inline void finish_stats(const NormArgs& a, int64_t g, const red::Acc<A>& acc) {
  A* mean = static_cast<A*>(a.mean);
  A* rstd = static_cast<A*>(a.rstd);
  const A var = acc.n > 0 ? acc.b / static_cast<A>(acc.n) : A(0);
  mean[g] = acc.n > 0 ? acc.a : A(0);
  rstd[g] = static_cast<A>(1) / std::sqrt(var + static_cast<A>(a.eps));
  if (a.kind == NormKind::Batch && a.running_mean) {
    P* rm = static_cast<P*>(a.running_mean);
    P* rv = static_cast<P*>(a.running_var);
    const A m = static_cast<A>(a.momentum);
    const A unbiased = acc.n > 1 ? acc.b / static_cast<A>(acc.n - 1) : static_cast<A>(NAN);
    rm[g] = static_cast<P>((A(1) - m) * static_cast<A>(rm[g]) + m * mean[g]);
    rv[g] = static_cast<P>((A(1) - m) * static_cast<A>(rv[g]) + m * unbiased);
  }
}

// Eval-mode batch norm: the statistics of channel g come from the running stats.
template <typename P, typename A>
MT_HOST_DEVICE inline void eval_stats(const NormArgs& a, int64_t g) {
  static_cast<A*>(a.mean)[g] = static_cast<A>(static_cast<const P*>(a.running_mean)[g]);
  static_cast<A*>(a.rstd)[g] =
      A(1) / std::sqrt(static_cast<A>(static_cast<const P*>(a.running_var)[g]) + static_cast<A>(a.eps));
}

// The two per-element formulas, one form for every path (the per-element kernels here, the sim's plane loops):
// y = xhat w + b, and dx = rstd (w dy - c1 - xhat c2) with c1 = sum(w dy) / n, c2 = sum(w dy xhat) / n.
template <typename A>
MT_HOST_DEVICE inline A affine(A x, A mean, A rstd, A w, A b) {
  return (x - mean) * rstd * w + b;
}
template <typename A>
MT_HOST_DEVICE inline A dx_value(A wdy, A xhat, A rstd, A c1, A c2) {
  return rstd * (wdy - c1 - xhat * c2);
}

template <typename T, typename P, typename A>
MT_HOST_DEVICE inline void apply(const NormArgs& a, int64_t off) {
  int64_t ch = 0;
  const int64_t g = group_of(a, off, &ch);
  static_cast<T*>(a.y)[off] = static_cast<T>(
      affine<A>(static_cast<A>(static_cast<const T*>(a.x)[off]), static_cast<const A*>(a.mean)[g],
                static_cast<const A*>(a.rstd)[g], param<P, A>(a.weight, ch, A(1)), param<P, A>(a.bias, ch, A(0))));
}

// dx of the element at `off` (of group g, channel ch), given the group's sums s1 = sum(w dy) and s2 = sum(w dy xhat).
template <typename T, typename P, typename A>
MT_HOST_DEVICE inline void dx_at(const NormArgs& a, int64_t off, int64_t g, int64_t ch, A s1, A s2) {
  const A mean = static_cast<const A*>(a.mean)[g], rstd = static_cast<const A*>(a.rstd)[g];
  const A wdy = static_cast<A>(static_cast<const T*>(a.dy)[off]) * param<P, A>(a.weight, ch, A(1));
  A r;
  if (a.kind == NormKind::Batch && !a.training) {
    r = wdy * rstd;
  } else {
    const A inv_n = A(1) / static_cast<A>(group_len(a));
    const A xhat = (static_cast<A>(static_cast<const T*>(a.x)[off]) - mean) * rstd;
    r = dx_value<A>(wdy, xhat, rstd, s1 * inv_n, s2 * inv_n);
  }
  static_cast<T*>(a.dx)[off] = static_cast<T>(r);
}
template <typename T, typename P, typename A>
MT_HOST_DEVICE inline void dx_element(const NormArgs& a, int64_t g, int64_t j, A s1, A s2) {
  int64_t ch = 0;
  const int64_t off = group_offset(a, g, j, &ch);
  dx_at<T, P, A>(a, off, g, ch, s1, s2);
}

// The sums of element j of group g (for dx) — w dy and w dy xhat.
template <typename T, typename P, typename A>
MT_HOST_DEVICE inline void dx_sums(const NormArgs& a, int64_t g, int64_t j, A* s1, A* s2) {
  int64_t ch = 0;
  const int64_t off = group_offset(a, g, j, &ch);
  const A wdy = static_cast<A>(static_cast<const T*>(a.dy)[off]) * param<P, A>(a.weight, ch, A(1));
  const A xhat = (static_cast<A>(static_cast<const T*>(a.x)[off]) - static_cast<const A*>(a.mean)[g]) *
                 static_cast<const A*>(a.rstd)[g];
  *s1 += wdy;
  *s2 += wdy * xhat;
}

// The weight/bias gradient terms of element i of channel ch: dy xhat and dy.
template <typename T, typename A>
MT_HOST_DEVICE inline void dw_terms(const NormArgs& a, int64_t ch, int64_t i, A* dw, A* db) {
  int64_t g = 0;
  const int64_t off = channel_offset(a, ch, i, &g);
  const A dy = static_cast<A>(static_cast<const T*>(a.dy)[off]);
  const A xhat = (static_cast<A>(static_cast<const T*>(a.x)[off]) - static_cast<const A*>(a.mean)[g]) *
                 static_cast<const A*>(a.rstd)[g];
  *dw += dy * xhat;
  *db += dy;
}

// 64: a float partial of 64 terms stays within a few ulps; chunks of 1,024 put batch norm's weight gradient over
// 20-30k elements per channel 2-3x further from float64 than the CPU (test_gpu_norm.py).
constexpr int64_t kNormChunk = 64;

// Note [Two-level sums]: the Welford statistics of the lane's elements of group g.
template <typename T, typename A>
MT_HOST_DEVICE inline red::Acc<A> lane_stats(const NormArgs& a, int64_t g, int64_t first, int64_t step,
                                             int64_t len = -1) {
  if (len < 0) len = group_len(a);  // else the end of a range of the group (cuda's split plan)
  red::Acc<double> total{0.0, 0.0, 0};
  red::Acc<A> part{A(0), A(0), 0};
  int64_t ch = 0, k = 0;
  for (int64_t j = first; j < len; j += step) {
    red::welford_push(part, static_cast<A>(static_cast<const T*>(a.x)[group_offset(a, g, j, &ch)]));
    if (++k == kNormChunk || j + step >= len) {
      red::welford_combine(total, red::Acc<double>{double(part.a), double(part.b), part.n});
      part = red::Acc<A>{A(0), A(0), 0};
      k = 0;
    }
  }
  return red::Acc<A>{static_cast<A>(total.a), static_cast<A>(total.b), total.n};
}

// Note [Two-level sums]: two sums over the lane's indices i < len, term(i, &p1, &p2) adding to the chunk's
// partials, added to *s1 and *s2.
template <typename A, typename F>
MT_HOST_DEVICE inline void lane_sum2(int64_t first, int64_t step, int64_t len, F term, A* s1, A* s2) {
  double t1 = 0, t2 = 0;
  A p1 = 0, p2 = 0;
  int64_t k = 0;
  for (int64_t i = first; i < len; i += step) {
    term(i, &p1, &p2);
    if (++k == kNormChunk) {
      t1 += double(p1);
      t2 += double(p2);
      p1 = p2 = A(0);
      k = 0;
    }
  }
  *s1 += static_cast<A>(t1 + double(p1));
  *s2 += static_cast<A>(t2 + double(p2));
}

// The lane's part of the dx sums of group g.
template <typename T, typename P, typename A>
MT_HOST_DEVICE inline void lane_dx_sums(const NormArgs& a, int64_t g, int64_t first, int64_t step, A* s1, A* s2,
                                        int64_t len = -1) {
  lane_sum2<A>(
      first, step, len < 0 ? group_len(a) : len, [&](int64_t j, A* x, A* y) { dx_sums<T, P, A>(a, g, j, x, y); }, s1,
      s2);
}

// The lane's part of the weight and bias gradients of channel ch.
template <typename T, typename A>
MT_HOST_DEVICE inline void lane_dw_terms(const NormArgs& a, int64_t ch, int64_t first, int64_t step, A* dw, A* db,
                                         int64_t len = -1) {
  lane_sum2<A>(
      first, step, len < 0 ? channel_len(a) : len, [&](int64_t i, A* x, A* y) { dw_terms<T, A>(a, ch, i, x, y); }, dw,
      db);
}

} // namespace nrm

// Phases: forward (stats + apply) and backward (dx when set, dweight/dbias when set); the cuda runtime's split
// sums need norm_workspace_bytes (0 on sim; the same for the forward and the backward of one NormArgs).
MT_LAUNCHER_RETURNING(size_t, norm_workspace_bytes, (const NormArgs& a), (a))
MT_LAUNCHER(norm_forward, (const NormArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(norm_backward, (const NormArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
