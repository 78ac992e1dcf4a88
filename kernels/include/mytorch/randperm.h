// randperm (Note [Random permutation]): its own header, apart from random.h, because the cuda launcher's workspace
// is the sort engine's (sort.h), which the random family's other users (attention, dropout) do not need.
#pragma once

#include <cstdint>

#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/random.h"
#include "mytorch/sort.h"

namespace mytorch {

// Note [Random permutation]
// randperm(n) in three steps whose result depends on (seed, offset, n) alone, so both runtimes and every thread
// count give the same permutation: element i draws a bucket b_i uniform in [0, B) with B = ceil(n / kPermBucket)
// (word i of the PermBucket lane); the elements are grouped by bucket, each bucket in ascending element order (a
// stable counting sort on the sim, the stable radix sort of the sort engine on cuda); then each bucket's run
// [s, e) is shuffled by Fisher-Yates, position s + k (k from e - s - 1 down to 1) swapping with s + j, j uniform
// in [0, k] from word s + k of the PermSwap lane. The result is uniform: a permutation pi arises from exactly one
// bucket assignment per vector of bucket sizes (its positions fix each element's bucket), with probability
// B^-n times the shuffles' 1 / prod(size_b!), and summed over the size vectors that is B^-n B^n / n! = 1 / n! (the
// multinomial theorem). The uniform draws are (word * range) >> 32: the outcomes' probabilities differ by less
// than range / 2^32 relative (1e-7 for the 391 buckets of n = 100,000, and for a swap in a bucket of 400), as
// the CPU's randperm draws modulo a range. A call takes n words of each lane, so it advances the generator by n
// like a fill of n elements. It replaced a sort of n random 64-bit keys, which ran at 0.17x the CPU's serial
// Fisher-Yates on the sim (docs/speed.md).
constexpr int64_t kPermBucket = 256;  // the mean elements per bucket

MT_HOST_DEVICE inline int64_t perm_buckets(int64_t n) { return (n + kPermBucket - 1) / kPermBucket; }

// Word i of a lane's stream at (resolved) `offset`: word offset + i of the lane, block (offset + i) / 4.
MT_HOST_DEVICE inline uint32_t perm_word(uint64_t seed, uint64_t offset, int64_t i, PhiloxLane lane) {
  const uint64_t w = offset + static_cast<uint64_t>(i);
  return Philox4x32(seed, w / 4, static_cast<uint64_t>(lane)).c[w % 4];
}
// A draw in [0, range) from a 32-bit word.
MT_HOST_DEVICE inline uint32_t perm_below(uint32_t word, uint64_t range) {
  return static_cast<uint32_t>((static_cast<uint64_t>(word) * range) >> 32);
}

struct RandpermArgs {
  int64_t* out = nullptr;  // contiguous [n]
  int64_t n = 0;
  uint64_t seed = 0, offset = 0;
  const uint64_t* philox_dev = nullptr;  // as RandomArgs::philox_dev
  void* scratch = nullptr;               // cuda: randperm_workspace_bytes(n) bytes, from the glue (aligned to 256)
};

// Fisher-Yates over out[s, e) (Note [Random permutation]); word(k) is the PermSwap word of position s + k.
template <typename Word>
MT_HOST_DEVICE inline void perm_shuffle_run(int64_t* out, int64_t s, int64_t e, const Word& word) {
  for (int64_t k = e - s - 1; k > 0; --k) {
    const int64_t j = perm_below(word(k), static_cast<uint64_t>(k + 1));
    const int64_t t = out[s + k];
    out[s + k] = out[s + j];
    out[s + j] = t;
  }
}

// The cuda launcher's workspace: the bucket of every element, the same sorted, and the sort engine's own (the
// bucket ids sorted as int32 with their positions).
inline SortArgs randperm_sort_args(int64_t n) {
  SortArgs a;
  a.dtype = DType::Int32;
  a.slices = 1;
  a.length = n;
  return a;
}
inline size_t randperm_workspace_bytes(int64_t n) {
  const size_t ids = sort_align(static_cast<size_t>(n) * 4);
  return 2 * ids + sort_workspace_bytes(randperm_sort_args(n));
}

inline void capture_replay_fix(RandpermArgs& a) { rt::detail::philox_replay_fix(a.seed, a.offset); }
MT_LAUNCHER(randperm, (const RandpermArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
