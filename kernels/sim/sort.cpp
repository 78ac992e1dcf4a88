// Sim twin of cuda/sort.cu (Note [Sort engine]), with the sim's own algorithms (Note [Sim sort and top-k]).
#include "mytorch/sort.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"

namespace mytorch::sim {
namespace {

// Note [Sim sort and top-k]
// The sort engine's order is a strict total order on (value, index) pairs (sort.h), so any correct algorithm gives
// the same result, bit for bit, as a stable sort: the sim picks by size.
// - A slice of up to kRadixMin elements: std::sort of (key, index) packed into one 64-bit integer for the types
//   whose keys have 32 bits or fewer (the radix sort's keys, below: no comparator, no branch on NaN; 3600 rows of
//   60 float32 took 2.5 ms with the comparator), of (value, index) pairs under sort_before for the 64-bit ones.
// - Longer slices: a stable least-significant-digit radix sort, 8 bits a pass, of keys whose unsigned order is the
//   engine's order (floats: sign-flipped bits, -0 folded onto +0, every NaN one key above +inf; descending: the
//   keys inverted, so NaN comes first and equal values keep ascending indices, as stable order wants). Passes
//   whose digit is the same for every key are skipped (small integers; sort_key in sort.h).
// - top-k (SortArgs::k >= 0) is a selection, never a sort of the slice: the k first pairs kept in a heap whose top
//   is the one that sorts last, each further element compared with the top (a block of elements is skipped when
//   none of them can enter: one vectorised comparison), then the heap sorted. A long slice with few slices to
//   spread over the threads is cut into fixed parts; each part's top-k is exact under the total order, so merging
//   them gives the same k pairs whatever the thread count.
// Slices run in parallel (each writes its own rows).
constexpr int64_t kRadixMin = 4096;

// Stable LSD radix sort of n (key, index) pairs; the result in (keys, idx).
template <typename K>
void radix_sort(std::vector<K>& keys, std::vector<int64_t>& idx, std::vector<K>& k2, std::vector<int64_t>& i2) {
  const int64_t n = static_cast<int64_t>(keys.size());
  k2.resize(keys.size());
  i2.resize(idx.size());
  for (int shift = 0; shift < static_cast<int>(sizeof(K) * 8); shift += 8) {
    int64_t count[257] = {};
    for (int64_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 0xff) + 1];
    if (count[((keys[0] >> shift) & 0xff) + 1] == n) continue;  // one digit for all: nothing moves
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = count[(keys[i] >> shift) & 0xff]++;
      k2[at] = keys[i];
      i2[at] = idx[i];
    }
    keys.swap(k2);
    idx.swap(i2);
  }
}

template <typename T>
void sort_slice(const SortArgs& a, int64_t s) {
  using O = ew::opmath_t<T>;
  const T* row = static_cast<const T*>(a.in) + s * a.length;
  T* vals = static_cast<T*>(a.values) + s * a.length;
  int64_t* ind = a.indices + s * a.length;
  const int64_t n = a.length;
  using K = sort_key_t<T>;
  if (n < kRadixMin && sizeof(K) == 4) {  // (key, index) packed in one 64-bit integer: its order is the engine's
    thread_local std::vector<uint64_t> packed;
    packed.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const K key = a.descending ? ~sort_key(mt_load(row + i)) : sort_key(mt_load(row + i));
      packed[i] = (static_cast<uint64_t>(key) << 32) | static_cast<uint64_t>(i);
    }
    std::sort(packed.begin(), packed.end());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = static_cast<int64_t>(packed[i] & 0xffffffffu);
      vals[i] = row[at];
      ind[i] = at;
    }
    return;
  }
  if (n < kRadixMin) {
    std::vector<std::pair<O, int64_t>> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[i] = {static_cast<O>(mt_load(row + i)), i};
    std::sort(p.begin(), p.end(), [&](const auto& x, const auto& y) {
      return sort_before<O>(x.first, x.second, y.first, y.second, a.descending);
    });
    for (int64_t i = 0; i < n; ++i) {
      vals[i] = row[p[i].second];
      ind[i] = p[i].second;
    }
    return;
  }
  std::vector<K> keys(static_cast<size_t>(n)), k2;
  std::vector<int64_t> idx(static_cast<size_t>(n)), i2;
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = a.descending ? ~sort_key(mt_load(row + i)) : sort_key(mt_load(row + i));
    idx[i] = i;
  }
  radix_sort(keys, idx, k2, i2);
  for (int64_t i = 0; i < n; ++i) {
    vals[i] = row[idx[i]];
    ind[i] = idx[i];
  }
}

// The top k pairs of row[b, e) in heap order, appended to `heap` (which must be empty).
template <typename T>
void select_part(const SortArgs& a, const T* row, int64_t b, int64_t e,
                 std::vector<std::pair<ew::opmath_t<T>, int64_t>>& heap) {
  using O = ew::opmath_t<T>;
  using P = std::pair<O, int64_t>;
  const bool desc = a.descending;
  auto before = [desc](const P& x, const P& y) { return sort_before<O>(x.first, x.second, y.first, y.second, desc); };
  const int64_t k = a.k;
  int64_t j = b;
  for (; j < e && static_cast<int64_t>(heap.size()) < k; ++j) {
    heap.emplace_back(static_cast<O>(mt_load(row + j)), j);
    std::push_heap(heap.begin(), heap.end(), before);
  }
  if (k == 0) return;
  constexpr int64_t kBlock = 32;
  auto consider = [&](int64_t i) {
    const P c{static_cast<O>(mt_load(row + i)), i};
    if (!before(c, heap.front())) return;
    std::pop_heap(heap.begin(), heap.end(), before);
    heap.back() = c;
    std::push_heap(heap.begin(), heap.end(), before);
  };
  for (; j + kBlock <= e; j += kBlock) {
    // Conservative test of the block against the top (the last kept): no false negatives. An element that ties
    // the top comes later in the row, so sorts after it.
    const O thr = heap.front().first;
    bool any = false;
    if (desc) {
      for (int64_t i = 0; i < kBlock; ++i) any |= !(static_cast<O>(mt_load(row + j + i)) <= thr);
    } else {
      for (int64_t i = 0; i < kBlock; ++i) any |= static_cast<O>(mt_load(row + j + i)) < thr;
      any |= thr != thr;
    }
    if (!any) continue;
    for (int64_t i = j; i < j + kBlock; ++i) consider(i);
  }
  for (; j < e; ++j) consider(j);
}

template <typename T>
void topk_slice(const SortArgs& a, int64_t s, int parts) {
  using O = ew::opmath_t<T>;
  using P = std::pair<O, int64_t>;
  const T* row = static_cast<const T*>(a.in) + s * a.length;
  const bool desc = a.descending;
  auto before = [desc](const P& x, const P& y) { return sort_before<O>(x.first, x.second, y.first, y.second, desc); };
  std::vector<P> best;
  best.reserve(static_cast<size_t>(a.k));
  if (parts <= 1) {
    select_part<T>(a, row, 0, a.length, best);
  } else {
    std::vector<std::vector<P>> part(static_cast<size_t>(parts));
    const int64_t step = (a.length + parts - 1) / parts;
    par::parallel_for(parts, 1, [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        part[p].reserve(static_cast<size_t>(a.k));
        select_part<T>(a, row, std::min(a.length, p * step), std::min(a.length, (p + 1) * step), part[p]);
      }
    });
    for (auto& p : part) best.insert(best.end(), p.begin(), p.end());
    std::sort(best.begin(), best.end(), before);
    best.resize(static_cast<size_t>(std::min<int64_t>(a.k, static_cast<int64_t>(best.size()))));
  }
  std::sort(best.begin(), best.end(), before);
  T* vals = static_cast<T*>(a.values) + s * a.k;
  int64_t* ind = a.indices + s * a.k;
  for (int64_t i = 0; i < a.k; ++i) {
    vals[i] = row[best[i].second];
    ind[i] = best[i].second;
  }
}

} // namespace

rt::Status sort(const SortArgs& a, rt::Stream) {
  if (a.k > a.length) return rt::report(rt::Status::InvalidValue, "sort: expected k <= the slice length");
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      if (a.k >= 0) {
        // a few long rows: each cut into parts of at least 64K elements (fixed by the sizes, not the threads)
        const int parts = a.slices >= par::threads() ? 1 : static_cast<int>(std::min<int64_t>(16, a.length / 65536));
        if (parts > 1) {
          for (int64_t s = 0; s < a.slices; ++s) topk_slice<T>(a, s, parts);
        } else {
          par::parallel_for(a.slices, par::grain_for(a.length), [&](int64_t b, int64_t e) {
            for (int64_t s = b; s < e; ++s) topk_slice<T>(a, s, 1);
          });
        }
        return;
      }
      par::parallel_for(a.slices, par::grain_for(a.length * 8), [&](int64_t b, int64_t e) {
        for (int64_t s = b; s < e; ++s) sort_slice<T>(a, s);
      });
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "sort: unsupported dtype");
}

rt::Status rank_select(const RankSelectArgs& a, rt::Stream) {
  if (a.length > kRankSelectMax) return rt::report(rt::Status::InvalidValue, "rank_select: slices of at most 64");
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      using O = ew::opmath_t<T>;
      const T* in = static_cast<const T*>(a.in);
      T* values = static_cast<T*>(a.values);
      par::parallel_for(a.slices, par::grain_for(8 * a.length), [&](int64_t b, int64_t e) {
        int64_t order[kRankSelectMax];
        for (int64_t s = b; s < e; ++s) {
          const T* v = in + s * a.length;
          const int64_t pos = rank_select_position<O>(v, a.length, a.what, a.k);
          for (int64_t j = 0; j < a.length; ++j) order[j] = j;
          std::nth_element(order, order + pos, order + a.length, [&](int64_t x, int64_t y) {
            return sort_before<O>(static_cast<O>(v[x]), x, static_cast<O>(v[y]), y, false);
          });
          values[s] = v[order[pos]];
          a.indices[s] = order[pos];
        }
      });
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "rank_select: unsupported dtype");
}

rt::Status isin(const IsinArgs& a, rt::Stream) {
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      using O = ew::opmath_t<T>;
      const T* el = static_cast<const T*>(a.elements);
      const T* sorted = static_cast<const T*>(a.sorted);
      par::parallel_for(a.n, par::grain_for(32), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) a.out[i] = sorted_contains<O>(sorted, a.m, static_cast<O>(el[i])) != a.invert;
      });
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "isin: unsupported dtype");
}

rt::Status searchsorted(const SearchArgs& a, rt::Stream) {
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same_v<T, bool>) {
      using O = ew::opmath_t<T>;
      const T* values = static_cast<const T*>(a.values);
      const T* bd = static_cast<const T*>(a.boundaries);
      par::parallel_for(a.n, par::grain_for(32), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t p = search_bound<O>(a, values, bd, i);
          if (a.out_int32) static_cast<int32_t*>(a.out)[i] = static_cast<int32_t>(p);
          else static_cast<int64_t*>(a.out)[i] = p;
        }
      });
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "searchsorted: unsupported dtype");
}

} // namespace mytorch::sim
