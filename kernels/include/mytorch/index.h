// Index family: gather (index_select, gather, take, advanced indexing) and scatter (scatter, scatter_add,
// scatter_reduce, index_put_, index_add_, index_copy_) over one description.
//
// nonzero (and masked_select, masked_scatter_, boolean indexing, which the glue builds on it): Note [Nonzero by
// prefix sums].
//
// Note [Index engine]
// The glue describes an iteration shape (row-major, last dimension fastest) and, per operand, element
// strides over it. Up to kMaxIndices index tensors (int64) add `index * indexed_stride` to the target's
// offset after wrapping negative values (unless the op refuses them) and checking them against `bound`. gather: out[o] = src[at(o)];
// scatter: dst[at(o)] (op)= src[o] or a scalar. An index out of bounds is not used: the launcher reports
// the first such value through `error` (device_error.h; the glue raises IndexError). Duplicate targets in a scatter
// accumulate atomically on cuda (compare-and-swap, any dtype) and in order on sim; plain assignment with
// duplicates keeps one of the values (on sim the last, as on the CPU).
#pragma once

#include <cstdint>

#include "mytorch/device_error.h"
#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"

namespace mytorch {

constexpr int kMaxIndices = 8;

enum class ScatterOp : int { Assign, Add, Mul, Max, Min };

struct IndexArgs {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t numel = 0;
  DType dtype = DType::Float;
  int elem_size = 0;
  void* target = nullptr; // gather: the source read through the indices; scatter: dst
  int64_t target_strides[kMaxDims] = {};
  void* other = nullptr; // gather: out; scatter: src (unused when src_is_scalar)
  int64_t other_strides[kMaxDims] = {};
  bool src_is_scalar = false;
  alignas(16) unsigned char scalar[16] = {};
  int nidx = 0;
  const int64_t* idx[kMaxIndices] = {};
  int64_t idx_strides[kMaxIndices][kMaxDims] = {};
  int64_t idx_bound[kMaxIndices] = {};
  int64_t idx_target_stride[kMaxIndices] = {};
  bool negative_wraps = true; // -1 is the last position (indexing, take, put, index_fill); else out of bounds
  ScatterOp op = ScatterOp::Assign;
  // A scatter whose positions with different coordinates along this dimension write disjoint targets (the
  // gather/scatter family into a target without internal overlap: only the indexed dimension's coordinate changes);
  // -1 when the glue does not know one. The sim splits such a scatter over that coordinate (Note [Sim scatter]).
  int split_dim = -1;
  ErrorSite error; // an index out of bounds is recorded there (device_error.h)
};

MT_LAUNCHER(gather, (const IndexArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(scatter, (const IndexArgs& a, rt::Stream stream), (a, stream))

// Note [Nonzero by prefix sums]
// The coordinates of the elements of a contiguous input that are not zero (mt_cast<bool>: NaN is not zero, -0 is),
// in row-major order, as count rows of ndim int64, stored by column (coordinate d of row r at out[d * count + r]:
// the transposed layout the CPU and CUDA return, whose columns are the index tensors of as_tuple and of boolean
// indexing). The input is cut into blocks of kNonzeroBlock elements.
// nonzero_count writes each block's count to counts[b] and their total to counts[nblocks]; the glue reads the total
// (the only synchronisation, as on the CPU and CUDA), allocates the rows, and nonzero_write writes each block's rows
// from the sum of the counts before it. The rows do not depend on the schedule. With ndim 1 and sizes {n} the rows
// are linear positions (masked_select's take).
constexpr int64_t kNonzeroBlock = 4096;
MT_HOST_DEVICE inline int64_t nonzero_blocks(int64_t n) { return (n + kNonzeroBlock - 1) / kNonzeroBlock; }

struct NonzeroArgs {
  DType dtype = DType::Bool;
  const void* in = nullptr; // contiguous, n elements
  int64_t n = 0;
  int ndim = 1; // coordinates per row: the input's sizes (the glue passes {n} for linear positions)
  int64_t sizes[kMaxDims] = {};
  int64_t* counts = nullptr; // device, nonzero_blocks(n) + 1 int64: per block, then the total
  int64_t* out = nullptr; // device, ndim x total (nonzero_write): column d holds the d-th coordinates
};

MT_LAUNCHER(nonzero_count, (const NonzeroArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(nonzero_write, (const NonzeroArgs& a, rt::Stream stream), (a, stream))

// The decoded position of iteration element `o`: the target's and the other operand's offsets without the indices,
// and each index tensor's offset. Element o + j of the same row (the last dimension) adds j times the last
// dimension's strides (index_at): a loop over a row decodes it once instead of once per element.
struct IndexPos {
  int64_t t = 0, u = 0;
  int64_t idx_off[kMaxIndices] = {};
};
MT_HOST_DEVICE inline IndexPos index_pos(const IndexArgs& a, int64_t o) {
  IndexPos p;
  int64_t rem = o;
  for (int d = a.ndim - 1; d >= 0; --d) {
    const int64_t i = rem % a.sizes[d];
    rem /= a.sizes[d];
    p.t += i * a.target_strides[d];
    p.u += i * a.other_strides[d];
    for (int k = 0; k < a.nidx; ++k) p.idx_off[k] += i * a.idx_strides[k][d];
  }
  return p;
}

// Offsets of element j along the last dimension from position p (shared by both runtimes): the target offset
// including the indices (false when an index is out of bounds, with *bad set to it) and the other operand's offset.
MT_HOST_DEVICE inline bool index_at(const IndexArgs& a, const IndexPos& p, int64_t j, int64_t* target, int64_t* other,
                                    int64_t* bad) {
  const int last = a.ndim - 1;
  int64_t t = p.t + (last >= 0 ? j * a.target_strides[last] : 0);
  for (int k = 0; k < a.nidx; ++k) {
    int64_t v = a.idx[k][p.idx_off[k] + (last >= 0 ? j * a.idx_strides[k][last] : 0)];
    if (v < (a.negative_wraps ? -a.idx_bound[k] : 0) || v >= a.idx_bound[k]) {
      *bad = v;
      return false;
    }
    if (v < 0) v += a.idx_bound[k];
    t += v * a.idx_target_stride[k];
  }
  *target = t;
  *other = p.u + (last >= 0 ? j * a.other_strides[last] : 0);
  return true;
}

// One index tensor (the gather/scatter family), along the last dimension from position p: the bounds check of a
// run of elements as one loop that vectorises, then each checked element's target offset without a branch out of
// the caller's loop (index_at's arithmetic without its checks).
struct OneIndexRow {
  const int64_t* ip;
  int64_t is, bound, lo, step;
  MT_HOST_DEVICE OneIndexRow(const IndexArgs& a, const IndexPos& p)
      : ip(a.idx[0] + p.idx_off[0]),
        is(a.idx_strides[0][a.ndim - 1]),
        bound(a.idx_bound[0]),
        lo(a.negative_wraps ? -a.idx_bound[0] : 0),
        step(a.idx_target_stride[0]) {}
  // Whether the indices of elements [j0, j1) are all in bounds.
  MT_HOST_DEVICE bool in_bounds(int64_t j0, int64_t j1) const {
    bool ok = true;
    for (int64_t j = j0; j < j1; ++j) ok &= ip[j * is] >= lo && ip[j * is] < bound;
    return ok;
  }
  // The offset element j's checked index adds to the target's.
  MT_HOST_DEVICE int64_t offset(int64_t j) const {
    const int64_t v = ip[j * is];
    return (v < 0 ? v + bound : v) * step;
  }
};

// Offsets of iteration element `o`: index_at of its own position.
MT_HOST_DEVICE inline bool index_offsets(const IndexArgs& a, int64_t o, int64_t* target, int64_t* other, int64_t* bad) {
  return index_at(a, index_pos(a, o), 0, target, other, bad);
}

} // namespace mytorch
