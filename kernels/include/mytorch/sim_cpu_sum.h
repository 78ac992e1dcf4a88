// The CPU's order of a float32/float64 sum over one contiguous row (Note [The CPU's summation order]), for the sim's
// reduction engine (sim/reduce.cpp). In the compile's ISA namespace, as sim_vec.h (Note [Sim ISA variants]).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "mytorch/reduce.h"
#include "mytorch/sim_isa.h"

namespace mytorch::sim::MT_SIM_ISA_NS {

// Note [The CPU's summation order]
// A float32 or float64 sum, nansum or mean over one contiguous row of at most kCpuSerial elements is added in
// the order of PyTorch's CPU kernel (cascade_sum in ATen's SumKernel.cpp), so its bits are the CPU's: a short
// sum feeding a cancellation (cov's gradient sums 9 terms, then subtracts nearly equal values) otherwise lands
// its rounding error where the CPU's did not. That order: rows of n >= W elements (W = 32 bytes of lanes, 8
// floats or 4 doubles: x86 PyTorch does not dispatch its sum to AVX-512) are read as n / W vectors, summed by
// row_sum below into W lanes; the n % W tail is added in sequence from zero, then the W lanes in order. Rows
// shorter than W go through row_sum on single values. row_sum interleaves its items over 4 accumulators
// (ATen's ilp_factor), each a cascade of 4 levels of 16 items (multi_row_sum); the items after the last whole
// group of 4 go into accumulator 0, then accumulators 1..3 are added to it in order. Such a row is one chunk,
// on one worker (32768 floats: microseconds). Longer rows keep the lanes' path: above kCpuSerial elements (ATen's
// GRAIN_SIZE) the CPU splits a row between its threads, so its bits depend on its thread count.
constexpr int64_t kCpuSerial = 32768;
template <typename R, typename A, typename T>
constexpr bool kCpuOrder = std::is_base_of_v<red::Reduction<RedOp::Sum>, R> && std::is_same_v<A, T> &&
                           (std::is_same_v<T, float> || std::is_same_v<T, double>);
template <typename R, typename A, typename T>
bool cpu_order_path(const ReduceArgs& r) {
  return kCpuOrder<R, A, T> && r.red_ndim == 1 && r.red_in_strides[0] == 1 && r.red_numel <= kCpuSerial;
}

constexpr int kCpuIlp = 4;    // ATen's row_sum: items interleaved over 4 accumulators
constexpr int kCpuLevels = 4; // ATen's multi_row_sum: levels of its cascade

inline int ceil_log2(int64_t x) { // ATen's utils::CeilLog2
  int b = 0;
  for (uint64_t v = static_cast<uint64_t>(x) - 1; v != 0; v >>= 1) ++b;
  return x <= 2 ? 1 : b;
}

// out := ATen's row_sum of `size` items of W values each; add(i, acc) adds item i's values to acc lane-wise.
template <int W, typename A, typename Add>
void cpu_row_sum(int64_t size, A (&out)[W], const Add& add) {
  const int64_t rows = size / kCpuIlp;
  // Levels from `used` up are zero and not yet written: a short row never reaches them, so only level 0 is cleared
  // here (clearing all four, 512 bytes for floats, was a tenth of a 120-float row's sum). A level summed from +0 is
  // never -0, so a level's first fold copies where adding to zero would give the same value: the same bits.
  A acc[kCpuLevels][kCpuIlp][W];
  int used = 1;
  for (int k = 0; k < kCpuIlp; ++k)
    for (int l = 0; l < W; ++l) acc[0][k][l] = A(0);
  const int lp = std::max(4, ceil_log2(rows) / kCpuLevels);
  const int64_t step = int64_t(1) << lp, mask = step - 1;
  auto fold = [&](int into, int from) {
    const bool first = into >= used;
    used = std::max(used, into + 1);
    for (int k = 0; k < kCpuIlp; ++k)
      for (int l = 0; l < W; ++l) acc[into][k][l] = first ? acc[from][k][l] : acc[into][k][l] + acc[from][k][l];
  };
  int64_t i = 0;
  while (i + step <= rows) {
    for (int64_t j = 0; j < step; ++j, ++i)
      for (int k = 0; k < kCpuIlp; ++k) add(i * kCpuIlp + k, acc[0][k]);
    for (int j = 1; j < kCpuLevels; ++j) {
      fold(j, j - 1);
      for (int k = 0; k < kCpuIlp; ++k)
        for (int l = 0; l < W; ++l) acc[j - 1][k][l] = A(0);
      if ((i & (mask << (j * lp))) != 0) break;
    }
  }
  for (; i < rows; ++i)
    for (int k = 0; k < kCpuIlp; ++k) add(i * kCpuIlp + k, acc[0][k]);
  for (int j = 1; j < used; ++j) fold(0, j);  // the levels above are zero
  for (int64_t t = rows * kCpuIlp; t < size; ++t) add(t, acc[0][0]);
  for (int k = 1; k < kCpuIlp; ++k)
    for (int l = 0; l < W; ++l) acc[0][0][l] += acc[0][k][l];
  for (int l = 0; l < W; ++l) out[l] = acc[0][0][l];
}

// The sum of x[0..n) in the CPU's order (NaNs as zero for nansum).
template <typename R, typename T>
T cpu_order_sum(const T* x, int64_t n) {
  constexpr int W = 32 / sizeof(T);
  auto ld = [x](int64_t j) {
    const T v = x[j];
    if constexpr (std::is_same_v<R, red::Reduction<RedOp::NanSum>>) return v != v ? T(0) : v;
    else return v;
  };
  if (n < W) {
    T s[1];
    cpu_row_sum<1>(n, s, [&](int64_t i, T(&a)[1]) { a[0] += ld(i); });
    return s[0];
  }
  const int64_t vecs = n / W;
  T lanes[W];
  cpu_row_sum<W>(vecs, lanes, [&](int64_t i, T(&a)[W]) {
    for (int l = 0; l < W; ++l) a[l] += ld(i * W + l);
  });
  T f = T(0);
  for (int64_t j = vecs * W; j < n; ++j) f += ld(j);
  for (int l = 0; l < W; ++l) f += lanes[l];
  return f;
}

} // namespace mytorch::sim::MT_SIM_ISA_NS
