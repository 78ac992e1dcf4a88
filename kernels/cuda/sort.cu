// CUDA sort family (Note [Sort engine]).
#include "common.cuh"
#include "mytorch/ops_math.h"
#include "mytorch/sort.h"

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
      v[i] = static_cast<O>(row[i]);
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
  T* out = static_cast<T*>(a.values) + s * a.length;
  for (int64_t i = threadIdx.x; i < a.length; i += blockDim.x) {
    out[i] = row[ix[i]];
    a.indices[s * a.length + i] = ix[i];
  }
}

// Long slices: bottom-up merge sort of indices per slice (one thread per slice).
template <typename T>
__global__ void merge_kernel(SortArgs a) {
  using O = ew::opmath_t<T>;
  for (int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; s < a.slices; s += int64_t(gridDim.x) * blockDim.x) {
    const T* row = static_cast<const T*>(a.in) + s * a.length;
    int64_t* src = static_cast<int64_t*>(a.scratch) + s * a.length * 2;
    int64_t* dst = src + a.length;
    for (int64_t i = 0; i < a.length; ++i) src[i] = i;
    for (int64_t w = 1; w < a.length; w <<= 1) {
      for (int64_t lo = 0; lo < a.length; lo += 2 * w) {
        int64_t mid = lo + w < a.length ? lo + w : a.length, hi = lo + 2 * w < a.length ? lo + 2 * w : a.length;
        int64_t i = lo, j = mid, k = lo;
        while (i < mid && j < hi) {
          dst[k++] =
              sort_before<O>(static_cast<O>(row[src[j]]), src[j], static_cast<O>(row[src[i]]), src[i], a.descending)
                  ? src[j++]
                  : src[i++];
        }
        while (i < mid) dst[k++] = src[i++];
        while (j < hi) dst[k++] = src[j++];
      }
      int64_t* t = src;
      src = dst;
      dst = t;
    }
    T* out = static_cast<T*>(a.values) + s * a.length;
    for (int64_t i = 0; i < a.length; ++i) {
      out[i] = row[src[i]];
      a.indices[s * a.length + i] = src[i];
    }
  }
}

template <typename T>
__global__ void isin_kernel(IsinArgs a) {
  using O = ew::opmath_t<T>;
  const T* el = static_cast<const T*>(a.elements);
  const T* sorted = static_cast<const T*>(a.sorted);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    a.out[i] = sorted_contains<O>(sorted, a.m, static_cast<O>(el[i])) != a.invert;
}

} // namespace

rt::Status isin(const IsinArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) isin_kernel<T><<<grid_for(a.n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "isin: unsupported dtype");
  return check_launch("isin");
}

rt::Status sort(const SortArgs& a, rt::Stream stream) {
  if (a.slices == 0 || a.length == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      using O = ew::opmath_t<T>;
      if (a.length <= kSharedSortMax) {
        int64_t padded = 1;
        while (padded < a.length) padded <<= 1;
        const size_t shm = static_cast<size_t>(padded) * (sizeof(O) + sizeof(int64_t));
        bitonic_kernel<T><<<static_cast<unsigned>(a.slices), kThreads, shm, native(stream)>>>(a, padded);
      } else {
        merge_kernel<T><<<grid_for(a.slices), kThreads, 0, native(stream)>>>(a);
      }
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "sort: unsupported dtype");
  return check_launch("sort");
}

} // namespace mytorch::cuda
