// CUDA sort family (Note [Sort engine]).
#include "common.cuh"
#include "mytorch/ops_math.h"
#include "mytorch/sort.h"
#include "sort_radix.cuh"

namespace mytorch::cuda {
namespace {

// One block per slice: load (value, index) pairs padded to a power of two, bitonic network, store.
template <typename T>
__global__ void bitonic_kernel(SortArgs a, int64_t padded) {
  using O = ew::opmath_t<T>;
  extern __shared__ unsigned char smem[];
  // The int64 indices first: placed after `padded` values of a 4-, 2- or 1-byte type they would be misaligned
  // for short slices (a misaligned shared store is a fault that kills the context).
  int64_t* ix = reinterpret_cast<int64_t*>(smem);
  O* v = reinterpret_cast<O*>(ix + padded);
  const int64_t s = blockIdx.x;
  const T* row = static_cast<const T*>(a.in) + s * a.length;
  for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) {
    if (i < a.length) {
      v[i] = static_cast<O>(mt_load(row + i));
      ix[i] = i;
    } else {
      ix[i] = -1;  // padding sorts after everything
    }
  }
  __syncthreads();
  for (int64_t k = 2; k <= padded; k <<= 1) {
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) {
        const int64_t p = i ^ j;
        if (p > i) {
          const bool up = (i & k) == 0;
          // "x before y": real elements before padding, else the (value, index) order.
          auto before = [&](int64_t x, int64_t y) {
            if (ix[x] < 0) return false;
            if (ix[y] < 0) return true;
            return sort_before<O>(v[x], ix[x], v[y], ix[y], a.descending);
          };
          const bool swap = up ? before(p, i) : before(i, p);
          if (swap) {
            const O tv = v[i];
            v[i] = v[p];
            v[p] = tv;
            const int64_t ti = ix[i];
            ix[i] = ix[p];
            ix[p] = ti;
          }
        }
      }
      __syncthreads();
    }
  }
  const int64_t out_len = a.k >= 0 && a.k < a.length ? a.k : a.length;  // top-k: the first k
  T* out = static_cast<T*>(a.values) + s * out_len;
  for (int64_t i = threadIdx.x; i < out_len; i += blockDim.x) {
    out[i] = row[ix[i]];
    a.indices[s * out_len + i] = a.in_indices ? a.in_indices[s * a.length + ix[i]] : ix[i];
  }
}

template <typename T>
__global__ void isin_kernel(IsinArgs a) {
  using O = ew::opmath_t<T>;
  const T* el = static_cast<const T*>(a.elements);
  const T* sorted = static_cast<const T*>(a.sorted);
  for (const int64_t i : grid_stride(a.n))
    a.out[i] = sorted_contains<O>(sorted, a.m, static_cast<O>(el[i])) != a.invert;
}

template <typename T>
__global__ void searchsorted_kernel(SearchArgs a) {
  using O = ew::opmath_t<T>;
  const T* values = static_cast<const T*>(a.values);
  const T* bd = static_cast<const T*>(a.boundaries);
  for (const int64_t i : grid_stride(a.n)) {
    const int64_t p = search_bound<O>(a, values, bd, i);
    if (a.out_int32) static_cast<int32_t*>(a.out)[i] = static_cast<int32_t>(p);
    else static_cast<int64_t*>(a.out)[i] = p;
  }
}

// A thread per slice (Note [Selection in short slices]).
template <typename T>
__global__ void rank_select_kernel(RankSelectArgs a) {
  using O = ew::opmath_t<T>;
  const T* in = static_cast<const T*>(a.in);
  for (const int64_t s : grid_stride(a.slices)) {
    const int64_t i = ::mytorch::rank_select<O>(in + s * a.length, a.length, a.what, a.k);
    static_cast<T*>(a.values)[s] = in[s * a.length + i];
    a.indices[s] = i;
  }
}

} // namespace

rt::Status rank_select(const RankSelectArgs& a, rt::Stream stream) {
  if (a.slices == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value)
      rank_select_kernel<T><<<grid_for(a.slices), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "rank_select: unsupported dtype");
  return check_launch("rank_select");
}

rt::Status searchsorted(const SearchArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same_v<T, bool>)
      searchsorted_kernel<T><<<grid_for(a.n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "searchsorted: unsupported dtype");
  return check_launch("searchsorted");
}

rt::Status isin(const IsinArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) isin_kernel<T><<<grid_for(a.n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "isin: unsupported dtype");
  return check_launch("isin");
}

namespace {
// Slices of up to kSharedSortMax elements: the bitonic kernel (a block per slice).
rt::Status bitonic_sort(const SortArgs& a, rt::Stream stream) {
  bool ok = false;
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      using O = ew::opmath_t<T>;
      int64_t padded = 1;
      while (padded < a.length) padded <<= 1;
      const size_t shm = static_cast<size_t>(padded) * (sizeof(O) + sizeof(int64_t));
      bitonic_kernel<T><<<static_cast<unsigned>(a.slices), kThreads, shm, native(stream)>>>(a, padded);
      ok = true;
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "sort: unsupported dtype");
  return check_launch("sort");
}

} // namespace

rt::Status sort(const SortArgs& a, rt::Stream stream) {
  const SortPlan plan = sort_plan(a);
  if (a.slices == 0 || a.length == 0 || a.k == 0) return rt::Status::Success;
  if ((plan.radix || plan.select) && a.scratch == nullptr) {
    return rt::report(rt::Status::InvalidValue, "sort: a long slice needs the workspace sort_plan sizes");
  }
  if (!plan.select) return plan.radix ? radix_sort(a, plan, stream) : bitonic_sort(a, stream);
  // top-k of long slices: select the k first pairs (in element order), then sort just those
  rt::Status st = radix_select(a, plan, stream);
  if (st != rt::Status::Success) return st;
  SortArgs b = a;
  b.in = static_cast<const char*>(a.scratch) + plan.sel_values;
  b.in_indices = reinterpret_cast<const int64_t*>(static_cast<const char*>(a.scratch) + plan.sel_indices);
  b.length = a.k;
  b.k = -1;
  return plan.radix ? radix_sort(b, plan, stream) : bitonic_sort(b, stream);
}

} // namespace mytorch::cuda
