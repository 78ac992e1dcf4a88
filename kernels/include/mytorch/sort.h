// Sort family: sorts independent slices of a tensor, producing values and int64 indices; membership in a sorted
// set (isin) and positions in sorted rows (searchsorted, bucketize): a binary search per element.
//
// Note [Sort engine]
// Elements compare as (value, original index) pairs, so the order is stable and the same on both runtimes;
// NaN sorts above every number (last ascending, first descending), as in ATen. cuda/ sorts slices of up
// to kSharedSortMax elements with a bitonic network in shared memory (one block per slice), longer ones
// with a merge sort in global memory (one thread per slice: correct, not fast); sim/ sorts pairs or keys by radix
// and selects top-k without sorting (Note [Sim sort and top-k]).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/launch.h"

namespace mytorch {

constexpr int64_t kSharedSortMax = 2048;

struct SortArgs {
  DType dtype = DType::Float;
  const void* in = nullptr;     // contiguous [slices, length]
  void* values = nullptr;       // contiguous [slices, length]
  int64_t* indices = nullptr;   // contiguous [slices, length]
  int64_t slices = 0;
  int64_t length = 0;
  bool descending = false;
  // top-k: keep the first k of each sorted slice (values and indices are then [slices, k]); -1 sorts it all. Both
  // runtimes select without sorting the slice (Notes [Sim sort and top-k], [CUDA radix sort and select]).
  int64_t k = -1;
  // Optional: the indices to report instead of positions (indices[j] = in_indices[slice * length + position]); the
  // cuda top-k sorts its selected pairs with it.
  const int64_t* in_indices = nullptr;
  void* scratch = nullptr;      // cuda: sort_workspace_bytes(*this) bytes, from the glue (aligned to 256)
};

// a before b? (value, index) order with NaN above everything.
template <typename O>
MT_HOST_DEVICE inline bool sort_before(O av, int64_t ai, O bv, int64_t bi, bool descending) {
  const bool an = av != av, bn = bv != bv;
  if (an || bn) {
    if (an && bn) return ai < bi;
    return descending ? an : bn;
  }
  if (av == bv) return ai < bi;
  return descending ? av > bv : av < bv;
}

// The unsigned key of a value: ascending key order is the engine's ascending order for unequal values (floats: the
// sign-flipped bits, -0 folded onto +0, every NaN one key above +inf; half types on their own 16 bits; signed
// integers: the sign bit flipped). Descending: the keys inverted (~), so NaN comes first and a stable sort still
// keeps equal values in ascending index order. Only the low sort_key_bits<T>() bits vary.
template <typename T>
using sort_key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
template <typename T>
constexpr int sort_key_bits() {
  return std::is_same_v<T, bool> ? 1 : static_cast<int>(8 * sizeof(T));
}
template <typename T>
MT_HOST_DEVICE inline sort_key_t<T> sort_key(T v) {
  using K = sort_key_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<K>(v);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (std::is_signed_v<T>)
      return static_cast<K>(static_cast<U>(static_cast<U>(v) ^ (U(1) << (sizeof(T) * 8 - 1))));
    else return static_cast<K>(v);
  } else if constexpr (sizeof(T) == 2) {  // c10::Half, c10::BFloat16: their bits
    const float f = static_cast<float>(v);
    if (f != f) return K(0xffff);
    if (f == 0.0f) return K(0x8000);
    const K b = v.x;
    return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
  } else {
    using F = std::conditional_t<sizeof(K) == 8, double, float>;
    F f = static_cast<F>(v);
    if (f != f) return ~K(0);
    if (f == F(0)) f = F(0);
    K b;
    memcpy(&b, &f, sizeof(K));
    const K sign = K(1) << (sizeof(K) * 8 - 1);
    return (b & sign) ? ~b : (b | sign);
  }
}

// Note [CUDA radix sort and select]
// Slices longer than kSharedSortMax are sorted by a stable least-significant-digit radix sort of (sort_key,
// position) pairs, kRadixBits a pass, over every slice at once (segmented): each pass counts each tile's digits
// (a block per kRadixTile elements of a slice), scans those counts per slice in (digit, tile) order, and scatters
// each tile's pairs, ranked stably in shared memory, to their places (the writes of a digit's run coalesced). The
// counting also adds each slice's digit totals (integer atomics), so the scan is a block per (slice, digit). The
// first pass reads the input, the last writes int64 indices and the values restored from their keys (gathered from
// the input only for keys shared by several bit patterns: zeros and NaNs); between them the pairs ping-pong through
// the workspace. 4-bit digits keep the stable ranking's per-thread counters (16 x 256) in shared memory; a pass
// reads 4-8 bytes an element to count and moves 8-12 each way to scatter.
// A top-k over a long slice never sorts it: a radix select finds the k-th key, kSelectBits a pass from the top
// (each pass a histogram, per slice, of the next digit of the keys that share the prefix found so far, then a block
// per slice picking the digit where the count reaches k), then the keys below it and the first ties (in index
// order) are compacted in index order, and those k pairs sorted (bitonic, or the radix sort above). Integer atomics
// only add counts, so every result is deterministic.
constexpr int kRadixBits = 4;
constexpr int kRadixBins = 1 << kRadixBits;
constexpr int kRadixThreads = 256;
constexpr int kRadixItems = 8;
constexpr int64_t kRadixTile = int64_t(kRadixThreads) * kRadixItems;
constexpr int kSelectBits = 8;
constexpr int kSelectBins = 1 << kSelectBits;  // = the select kernels' block size
constexpr int kSelectItems = 4;
constexpr int64_t kSelectTile = int64_t(kSelectBins) * kSelectItems;

struct SelectState {  // per slice: the k-th key's digits found so far and how many keys sort below that prefix
  uint64_t prefix;
  uint64_t mask;
  int64_t below;
};

// Where each part of a cuda sort's workspace lies (byte offsets from SortArgs::scratch), and its size.
struct SortPlan {
  bool radix = false;   // the radix sort (else the bitonic kernel, or nothing)
  bool select = false;  // a radix select then a sort of the k selected
  int64_t tiles = 0;    // radix sort: tiles per slice of the pairs it sorts
  int passes = 0;
  size_t keys[2] = {0, 0}, pay[2] = {0, 0}, hist = 0, totals = 0;  // radix sort
  int64_t sel_tiles = 0;                                            // select: tiles per slice
  size_t sel_hist = 0, sel_state = 0, sel_counts = 0, sel_values = 0, sel_indices = 0;
  size_t bytes = 0;
};

inline size_t sort_align(size_t b) { return (b + 255) / 256 * 256; }

// The radix sort of `slices` x `length` pairs with keys of `key_bytes`, from byte `at` of the workspace.
inline void radix_sort_plan(SortPlan& p, int64_t slices, int64_t length, int key_bytes, int key_bits, size_t at) {
  const size_t n = static_cast<size_t>(slices * length);
  p.radix = true;
  p.tiles = (length + kRadixTile - 1) / kRadixTile;
  p.passes = (key_bits + kRadixBits - 1) / kRadixBits;
  for (int b = 0; b < 2; ++b) {
    p.keys[b] = at;
    at = sort_align(at + n * key_bytes);
  }
  for (int b = 0; b < 2; ++b) {
    p.pay[b] = at;
    at = sort_align(at + n * 4);
  }
  p.hist = at;
  at = sort_align(at + static_cast<size_t>(slices * kRadixBins * p.tiles) * 4);
  p.totals = at;  // per pass and slice, the digits' counts
  p.bytes = sort_align(at + static_cast<size_t>(p.passes * slices * kRadixBins) * 4);
}

inline SortPlan sort_plan(const SortArgs& a) {
  SortPlan p;
  const int es = dtype_size(a.dtype);
  const int key_bytes = es == 8 ? 8 : 4, key_bits = a.dtype == DType::Bool ? 1 : 8 * es;
  const int64_t out_len = a.k >= 0 ? a.k : a.length;
  if (a.slices == 0 || out_len == 0) return p;
  if (a.k >= 0 && a.k < a.length && a.length > kSharedSortMax) {
    p.select = true;
    p.sel_tiles = (a.length + kSelectTile - 1) / kSelectTile;
    size_t at = 0;
    p.sel_hist = at;  // per pass and slice, the histogram of the next digit
    at = sort_align(at + static_cast<size_t>((key_bits + kSelectBits - 1) / kSelectBits * a.slices * kSelectBins) * 4);
    p.sel_state = at;
    at = sort_align(at + static_cast<size_t>(a.slices) * sizeof(SelectState));
    p.sel_counts = at;
    at = sort_align(at + static_cast<size_t>(a.slices * 2 * p.sel_tiles) * 4);
    p.sel_values = at;
    at = sort_align(at + static_cast<size_t>(a.slices * a.k) * es);
    p.sel_indices = at;
    at = sort_align(at + static_cast<size_t>(a.slices * a.k) * 8);
    p.bytes = at;
    if (a.k > kSharedSortMax) radix_sort_plan(p, a.slices, a.k, key_bytes, key_bits, at);
    return p;
  }
  if (a.length > kSharedSortMax) radix_sort_plan(p, a.slices, a.length, key_bytes, key_bits, 0);
  return p;
}
inline size_t sort_workspace_bytes(const SortArgs& a) { return sort_plan(a).bytes; }

// isin: out[i] = (elements[i] is one of the m values of `sorted`) != invert. `sorted` is ascending in the sort
// engine's order (NaN last), elements and sorted share the dtype, both contiguous.
struct IsinArgs {
  DType dtype = DType::Float;
  const void* elements = nullptr;
  int64_t n = 0;
  const void* sorted = nullptr;
  int64_t m = 0;
  bool invert = false;
  bool* out = nullptr;
};

// Whether x is among s[0..m) (ascending): the first position not below x, then equality. NaN equals nothing,
// as in ATen's isin.
template <typename O, typename T>
MT_HOST_DEVICE inline bool sorted_contains(const T* s, int64_t m, O x) {
  int64_t lo = 0, hi = m;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<O>(s[mid]) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo < m && static_cast<O>(s[lo]) == x;
}

// searchsorted / bucketize: out[i] = the first position p in value i's row of `boundaries` (read through `sorter`
// when given) whose boundary is >= the value (> with `right`): ATen's lower and upper bounds, written with ATen's
// comparisons (`!(b >= v)`), so a NaN value lands past every boundary as it does there. Values, boundaries and
// sorter are contiguous and share the dtype; a row of `bd_len` boundaries serves `inner` consecutive values, or
// every value when `one_row` (1-D boundaries).
struct SearchArgs {
  DType dtype = DType::Float;
  const void* values = nullptr;
  int64_t n = 0, inner = 1;
  const void* boundaries = nullptr;
  int64_t bd_len = 0;
  bool one_row = true;
  const int64_t* sorter = nullptr;
  bool right = false, out_int32 = false;
  void* out = nullptr;
};

template <typename O, typename T>
MT_HOST_DEVICE inline int64_t search_bound(const SearchArgs& a, const T* values, const T* bd, int64_t i) {
  const int64_t row = a.one_row ? 0 : (i / a.inner) * a.bd_len;
  const O v = static_cast<O>(values[i]);
  int64_t lo = 0, hi = a.bd_len;
  while (lo < hi) {
    const int64_t mid = lo + ((hi - lo) >> 1);
    const O b = static_cast<O>(bd[row + (a.sorter ? a.sorter[row + mid] : mid)]);
    const bool before = a.right ? !(b > v) : !(b >= v);
    if (before) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Note [Selection in short slices]
// median, nanmedian and kthvalue along a dimension of at most kRankSelectMax elements pick the selected position of
// each slice without sorting it: the element whose rank in the engine's (value, index) order (sort_before) is that
// position, by counting, for each element, the elements before it (n^2 comparisons, one kernel, where the sort and
// the gathers around it took about ten launches: median of 15 elements at 0.10x the CPU). The position is ATen's:
// median's lower median, (n - 1) / 2, or its first NaN, n - NaNs, when it has any; nanmedian's lower median of the
// valid values, (valid - 1) / 2 (0, a NaN, when all are NaN); kthvalue's k - 1. The same element as the stable sort's
// at that position, so the same value and index as the sorted route of longer slices. The sim finds it with
// std::nth_element under the same order (a strict total order: one element has each position).
constexpr int64_t kRankSelectMax = 64;
enum class RankSelect : int { Median, NanMedian, Kth };

struct RankSelectArgs {
  DType dtype = DType::Float;
  const void* in = nullptr;  // contiguous [slices, length], length <= kRankSelectMax
  int64_t slices = 0, length = 0;
  RankSelect what = RankSelect::Median;
  int64_t k = 1;             // kthvalue's k, 1 <= k <= length
  void* values = nullptr;    // [slices]
  int64_t* indices = nullptr;  // [slices]
};

// The position selected in slice v[0..n) sorted (Note [Selection in short slices]).
template <typename O, typename T>
MT_HOST_DEVICE inline int64_t rank_select_position(const T* v, int64_t n, RankSelect what, int64_t k) {
  int64_t nans = 0;
  for (int64_t j = 0; j < n; ++j) nans += static_cast<O>(v[j]) != static_cast<O>(v[j]);
  if (what == RankSelect::Median) return nans > 0 ? n - nans : (n - 1) / 2;
  if (what == RankSelect::NanMedian) return n - nans > 0 ? (n - nans - 1) / 2 : 0;
  return k - 1;
}

// The selected element of slice v[0..n): the one with as many elements before it as its position (the CUDA kernel's
// thread per slice; the sim selects the same element with std::nth_element).
template <typename O, typename T>
MT_HOST_DEVICE inline int64_t rank_select(const T* v, int64_t n, RankSelect what, int64_t k) {
  const int64_t pos = rank_select_position<O>(v, n, what, k);
  for (int64_t i = 0; i < n; ++i) {
    const O vi = static_cast<O>(v[i]);
    int64_t rank = 0;
    for (int64_t j = 0; j < n; ++j) rank += sort_before<O>(static_cast<O>(v[j]), j, vi, i, false);
    if (rank == pos) return i;
  }
  return 0;  // not reached: the ranks are a permutation of 0..n-1
}

MT_LAUNCHER(sort, (const SortArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(rank_select, (const RankSelectArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(isin, (const IsinArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(searchsorted, (const SearchArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
