// The sim's strided walkers (Note [Sim strided walks]): the element order of a strided description visited in
// runs along dimension 0, or in tiles of dimensions 0 and 1 where the operands disagree on which of the two is
// contiguous, or in blocks of whole runs where the runs are short. Shared by the families that walk arbitrary
// layouts (copy, elementwise).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "mytorch/parallel.h"
#include "mytorch/strided.h"

namespace mytorch::sim::walk {

// Note [Sim strided walks]
// ATen's TensorIterator hands the kernels a coalesced description ordered by the output's strides: dimension 0 is
// the output's fastest one. An operand laid out otherwise (the transposed operand of x + y.t(), the source of
// y.t().contiguous()) then moves by a whole row per element of dimension 0: a run along dimension 0 touches one
// cache line per element and uses 4 of its 64 bytes, and a 1024 x 1024 float transpose walked that way took 16 ms
// against the CPU's 1 ms. Where one operand is contiguous along dimension 0 and another along dimension 1, the walk
// goes in kTile x kTile tiles of those two dimensions instead: each operand's lines in a tile stay in L1 until
// every element on them is used. The tiles (and the dimensions above 1) split over the threads; a tile's elements
// are written by the one thread that owns it, so results do not depend on the thread count.
// Inside a run or a tile the families gather strided operands into dense blocks and run their dense (vectorised)
// loops on the blocks (kernels/sim/elementwise.cpp), so the math is vectorised whatever the inner stride.
constexpr int64_t kTile = 32;

// Whether the operands (strides in bytes, nullptr: a scalar) disagree on the contiguous dimension among 0 and 1.
inline bool wants_tiles(const StridedShape& s, const int64_t* const* st, const int* elem, int nops) {
  if (s.ndim < 2 || s.sizes[0] < 8 || s.sizes[1] < 8) return false;
  for (int k = 0; k < nops; ++k) {  // dimension 0 is the output's fastest: another operand's is dimension 1
    // (an operand broadcast along dimension 0, stride 0, reads one element a run: runs suit it)
    if (st[k] && std::llabs(st[k][1]) == elem[k] && st[k][0] != 0 && std::llabs(st[k][0]) != elem[k]) return true;
  }
  return false;
}

// fn(off[nops] byte offsets of a block's first element, n0 elements along dimension 0, n1 along dimension 1), over
// every block of b0 x b1 elements of dimensions 0 and 1, split over the threads; `work` is the element operations
// of one element (for the grain).
template <typename Fn>
void for_each_block(const StridedShape& s, const int64_t* const* st, int nops, int64_t work, int64_t b0, int64_t b1,
                    const Fn& fn) {
  const int64_t t0 = (s.sizes[0] + b0 - 1) / b0, t1 = (s.sizes[1] + b1 - 1) / b1;
  const int64_t planes = s.numel / (s.sizes[0] * s.sizes[1]);
  par::parallel_for(planes * t0 * t1, par::grain_for(b0 * b1 * work), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t i0 = (t % t0) * b0, i1 = (t / t0 % t1) * b1;
      int64_t plane = t / (t0 * t1);
      int64_t off[4] = {0, 0, 0, 0};
      for (int k = 0; k < nops; ++k) off[k] = st[k] ? i0 * st[k][0] + i1 * st[k][1] : 0;
      for (int d = 2; d < s.ndim; ++d) {
        const int64_t i = plane % s.sizes[d];
        plane /= s.sizes[d];
        for (int k = 0; k < nops; ++k) off[k] += st[k] ? i * st[k][d] : 0;
      }
      fn(off, std::min(b0, s.sizes[0] - i0), std::min(b1, s.sizes[1] - i1));
    }
  });
}

// The kTile x kTile tiles (wants_tiles).
template <typename Fn>
void for_each_tile(const StridedShape& s, const int64_t* const* st, int nops, int64_t work, const Fn& fn) {
  for_each_block(s, st, nops, work, kTile, kTile, fn);
}

// Runs along dimension 0 shorter than a tile (x[..., None] + y over a last dimension of 3: a million runs of 3
// elements): each block takes whole runs, as many as fill kTile x kTile elements, so that per-block work (a loop's
// set-up per operand) is paid once for many runs; `short_runs` says whether a description has them.
inline bool short_runs(const StridedShape& s) { return s.ndim >= 2 && s.sizes[0] < kTile && s.sizes[1] > 1; }
template <typename Fn>
void for_each_short_run_block(const StridedShape& s, const int64_t* const* st, int nops, int64_t work, const Fn& fn) {
  for_each_block(s, st, nops, work, s.sizes[0], kTile * kTile / s.sizes[0], fn);
}

// Visits the elements [begin, end) of the description in runs along dimension 0: fn(off[nops] byte offsets of the
// run's first element, count, run strides[nops]).
template <typename Fn>
void for_each_run(const StridedShape& s, const int64_t* const* st, int nops, int64_t begin, int64_t end, Fn fn) {
  int64_t off[4] = {0, 0, 0, 0};
  int64_t inner[4] = {0, 0, 0, 0};
  if (s.ndim == 0) {
    fn(off, 1, inner);
    return;
  }
  for (int k = 0; k < nops; ++k) inner[k] = st[k] ? st[k][0] : 0;
  int64_t idx[kMaxDims] = {};
  int64_t rest = begin;
  for (int d = 0; d < s.ndim; ++d) {
    idx[d] = rest % s.sizes[d];
    rest /= s.sizes[d];
    for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][d] * idx[d] : 0;
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t cnt = std::min(s.sizes[0] - idx[0], end - pos);
    fn(off, cnt, inner);
    pos += cnt;
    for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][0] * cnt : 0;
    idx[0] += cnt;
    if (idx[0] < s.sizes[0]) continue;
    for (int k = 0; k < nops; ++k) off[k] -= st[k] ? st[k][0] * s.sizes[0] : 0;
    idx[0] = 0;
    for (int d = 1; d < s.ndim; ++d) {
      ++idx[d];
      for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][d] : 0;
      if (idx[d] < s.sizes[d]) break;
      for (int k = 0; k < nops; ++k) off[k] -= st[k] ? st[k][d] * s.sizes[d] : 0;
      idx[d] = 0;
    }
  }
}

} // namespace mytorch::sim::walk
