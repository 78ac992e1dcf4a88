// Symmetric-memory family (Note [Symmetric memory kernels]): the signal-pad synchronisation and the collectives
// torch's `symm_mem` operators run over buffers every rank of a group can address directly (the peers' copies
// mapped into this process: CUDA IPC on a GPU, the sim's shared memory files elsewhere). The CUDA kernels are in
// cuda/symm_mem.cu, their sim twins in sim/symm_mem.cpp; the index arithmetic both share is here.
#pragma once

#include <cstdint>

#include "mytorch/device_error.h"
#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

// Note [Symmetric memory kernels]
// Signal pads: every rank's allocation ends in a pad of uint32 slots; slot (channel * world + src) of rank dst's
// pad is the one src signals dst through. put_signal(dst) waits for that slot to be 0 and sets it to 1;
// wait_signal(src) waits for its own slot (channel, src) to be 1 and sets it back to 0 (compare-and-swap, so a
// signal is neither lost nor counted twice, and the pads are zero again after every completed exchange, as
// torch's Note [symmetric memory signal pad] requires). A barrier on a channel is a put to every peer then a wait
// on every peer. A wait that exceeds its timeout gives up and records the error (the kernel's ErrorSite: on sim
// it is raised at once, on a device at the next synchronisation), so a peer that exited never hangs the caller.
// A kernel with several blocks synchronises block b with block b of every peer on channel b (as torch's
// sync_remote_blocks): the element ranges are assigned to blocks identically on every rank, so block-local
// synchronisation orders every access a block makes to the peers' memory.
//
// Reductions (sum only, as torch's CUDA ones) add the ranks' values in rank order 0..world-1 in float32 (double
// for double), so every rank computes the same bits; the modes:
//   OneShot:      out[i] = sum_r buf_r[off + i]        (local_in, when given, first copied into this rank's buffer)
//   TwoShot:      rank r reduces its chunk [r*c, (r+1)*c) (c = ceil(numel / world)) and writes it into every
//                 rank's buffer; after a barrier every buffer holds the whole reduction (in place)
//   TwoShotOut:   as TwoShot, but the chunk goes to this rank's buffer only and then every rank gathers all
//                 chunks into out (the input buffers of the other chunks untouched)
//   ReduceScatter: out[i] = sum_r buf_r[off + rank*n/world + i] (numel divisible by world);
//                 with split_last_dim the chunk is the rank's slice of the last dimension of every row.
// All-to-all (pull: each rank reads what its peers hold for it):
//   Vdev:        in_splits[world] rows to each rank; out_splits_offsets[0][s] = peer s's in_splits[rank],
//                out_splits_offsets[1][s] = their exclusive prefix sum; rows copied from peer s's input at the
//                prefix of s's splits before `rank`.
//   Dispatch2d:  in_splits[world * ne] (rank-major: (dst, expert)); the output is expert-major: for expert e, for
//                source s, the rows s holds for (rank, e); each expert's segment starts at a multiple of major_align
//                and is at least major_align rows long when major_align > 0 (torch's rule for empty bins).
//   Combine2d:   in_splits_offsets[2][ne * world] (expert-major, with explicit offsets); the output is rank-major:
//                for source s, for expert e, the rows s's expert e holds for this rank, packed.
enum class SymmSignalOp : int { Barrier = 0, Put = 1, Wait = 2 };
enum class SymmReduceMode : int { OneShot = 0, TwoShot = 1, TwoShotOut = 2, ReduceScatter = 3 };
enum class SymmAllToAllMode : int { Vdev = 0, Dispatch2d = 1, Combine2d = 2 };

constexpr int kSymmMaxSplits = 1024;     // world * experts of an all-to-all
constexpr int kSymmReduceMaxBlocks = 24;  // torch's bound for the one- and two-shot kernels
constexpr int kSymmMaxWorld = 256;        // a block's threads signal the peers one each

struct SymmSync {
  uint32_t* const* pads = nullptr;  // [world] signal pads (an array in device memory)
  int rank = 0, world = 1;
  int64_t channels = 1;    // slots per rank in a pad: a channel must be below this
  uint64_t timeout_ms = 0;  // 0: wait without limit
  ErrorSite error;          // a timeout: value = the peer waited for, dim = the channel
  const int32_t* pids = nullptr;  // [world] process ids (host memory): the sim's waits notice a peer that exited
  bool (*exited)(int pid) = nullptr;  // through this (the glue passes the runtime's rt::process_exited)
};

struct SymmSignalArgs {
  SymmSync sync;
  SymmSignalOp op = SymmSignalOp::Barrier;
  int channel = 0;
  int peer = 0;  // Put: the destination; Wait: the source
};

struct SymmReduceArgs {
  SymmSync sync;
  void* const* bufs = nullptr;  // [world] buffer bases (device array)
  int64_t offset = 0;           // elements from every base
  int64_t numel = 0;            // elements reduced (ReduceScatter: of the whole input)
  int64_t last_dim = 0;         // ReduceScatter with split_last_dim: the input's last dimension, else 0
  const void* local_in = nullptr;  // OneShot: copied into this rank's buffer first
  void* out = nullptr;
  DType dtype = DType::Float;
  SymmReduceMode mode = SymmReduceMode::OneShot;
};

struct SymmAllToAllArgs {
  SymmSync sync;
  const void* const* inputs = nullptr;  // [world] the peers' input allocations (device array)
  int64_t input_offset = 0;             // bytes from each to the input rows
  const void* const* splits = nullptr;  // [world] the peers' in_splits / in_splits_offsets allocations
  int64_t splits_offset = 0;            // bytes from each to the int64 table
  void* out = nullptr;                    // this rank's output rows
  int64_t* out_splits_offsets = nullptr;  // [2][nsplits]
  int64_t row_bytes = 0;
  int64_t in_rows = 0, out_rows = 0;      // bounds: a split beyond them is an error
  int experts = 1;                         // per rank (1 for Vdev)
  int64_t major_align = 0;
  SymmAllToAllMode mode = SymmAllToAllMode::Vdev;
  ErrorSite bad_split;  // a split or offset outside the tensors: value = the offending end, the copy skipped
};

namespace symm {

// Records a wait on `peer` over channel that ran past the timeout.
MT_HOST_DEVICE inline void timed_out(const SymmSync& s, int channel, int peer) {
  ErrorSite e = s.error;
  e.dim = channel;
  e.size = static_cast<int64_t>(s.timeout_ms);
  record_error(e, peer);
}

// The first element of rank r's two-shot chunk and the chunk length.
MT_HOST_DEVICE inline int64_t chunk(int64_t numel, int world) { return (numel + world - 1) / world; }

// The source position (peer, split index in the peer's tables) of output segment j of rank `rank` and whether
// the output is expert-major (Dispatch2d) or rank-major (Vdev, Combine2d); nsplits = world * experts.
MT_HOST_DEVICE inline void source_of(SymmAllToAllMode mode, int j, int rank, int world, int experts, int* peer,
                                     int* index) {
  if (mode == SymmAllToAllMode::Dispatch2d) {  // j = e * world + s; s holds it at (rank, e) rank-major
    const int e = j / world, s = j % world;
    *peer = s;
    *index = rank * experts + e;
  } else if (mode == SymmAllToAllMode::Combine2d) {  // j = s * experts + e; s holds it at (e, rank) expert-major
    const int s = j / experts, e = j % experts;
    *peer = s;
    *index = e * world + rank;
  } else {
    *peer = j;
    *index = rank;
  }
}

// Output segment j's row count and its first row in the source peer's input.
MT_HOST_DEVICE inline void plan_segment(const SymmAllToAllArgs& a, int j, int64_t* split, int64_t* source) {
  const int n = a.sync.world * a.experts;
  int peer = 0, index = 0;
  source_of(a.mode, j, a.sync.rank, a.sync.world, a.experts, &peer, &index);
  const int64_t* t = reinterpret_cast<const int64_t*>(static_cast<const char*>(a.splits[peer]) + a.splits_offset);
  *split = t[index];
  if (a.mode == SymmAllToAllMode::Combine2d) {
    *source = t[n + index];
    return;
  }
  int64_t at = 0;
  for (int k = 0; k < index; ++k) at += t[k];
  *source = at;
}

// Every segment's first output row, from the segments' row counts: segments in groups of `minor` (the sources
// of one expert for Dispatch2d, the experts of one source for Combine2d, one group for Vdev), a group's length
// rounded up to major_align (and at least major_align) for Dispatch2d.
MT_HOST_DEVICE inline void plan_destinations(const SymmAllToAllArgs& a, const int64_t* split, int64_t* dest) {
  const int n = a.sync.world * a.experts;
  const int minor = a.mode == SymmAllToAllMode::Combine2d ? a.experts : a.sync.world;
  int64_t at = 0;
  for (int g = 0; g < n / minor; ++g) {
    int64_t len = 0;
    for (int k = 0; k < minor; ++k) {
      dest[g * minor + k] = at + len;
      len += split[g * minor + k];
    }
    if (a.mode == SymmAllToAllMode::Dispatch2d && a.major_align > 0) {
      len = (len + a.major_align - 1) / a.major_align * a.major_align;
      if (len < a.major_align) len = a.major_align;
    }
    at += len;
  }
}

// Peer p's input rows.
MT_HOST_DEVICE inline const char* input_of(const SymmAllToAllArgs& a, int p) {
  return static_cast<const char*>(a.inputs[p]) + a.input_offset;
}

// Whether a segment lies inside the source's input and this rank's output; else the error is recorded (the
// offending end row) and the segment skipped.
MT_HOST_DEVICE inline bool segment_ok(const SymmAllToAllArgs& a, int64_t split, int64_t source, int64_t dest) {
  if (split < 0 || source < 0) {
    record_error(a.bad_split, split < 0 ? split : source);
    return false;
  }
  if (source + split > a.in_rows) {
    record_error(a.bad_split, source + split);
    return false;
  }
  if (dest + split > a.out_rows) {
    record_error(a.bad_split, dest + split);
    return false;
  }
  return true;
}

}  // namespace symm

MT_LAUNCHER(symm_signal, (const SymmSignalArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(symm_reduce, (const SymmReduceArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(symm_all_to_all, (const SymmAllToAllArgs& a, rt::Stream stream), (a, stream))

}  // namespace mytorch
