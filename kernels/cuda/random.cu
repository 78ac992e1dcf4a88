// CUDA random family: one thread per element, values from random_element (shared with the sim twin); dropout
// fused, a thread per Philox block of 4 elements (Note [Fused dropout]); randperm as buckets, the sort engine's
// stable sort of them and a thread per bucket's shuffle (Note [Random permutation]).
#include "common.cuh"
#include "mytorch/ops_math.h"
#include "mytorch/random.h"
#include "mytorch/randperm.h"

namespace mytorch::cuda {
namespace {
template <typename T>
__global__ void random_kernel(RandomArgs p) {
  T* out = static_cast<T*>(p.data);
  for (const int64_t i : grid_stride(p.numel)) {
    out[i] = random_element<T>(p, i);
  }
}

// kVec: every block's 4 elements load and store at once (the launcher checked the alignment of all three).
template <typename T, bool kVec>
__global__ void dropout_kernel(DropoutArgs p) {
  using O = ew::opmath_t<T>;
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const int64_t blocks = (p.numel + 3) / 4;
  for (const int64_t b : grid_stride(blocks)) {
    const int64_t i0 = 4 * b;
    O x[4] = {}, y[4];
    bool m[4];
    if (kVec && i0 + 4 <= p.numel) {
      const Vec<T, 4> v = load_vec<T, 4>(in + i0);
      for (int j = 0; j < 4; ++j) x[j] = static_cast<O>(v.v[j]);
      dropout_block<O>(p, b, x, y, m);
      Vec<T, 4> o;
      Vec<bool, 4> mk;
      for (int j = 0; j < 4; ++j) {
        o.v[j] = mt_cast<T, O>(y[j]);
        mk.v[j] = m[j];
      }
      store_vec<T, 4>(out + i0, o);
      store_vec<bool, 4>(p.mask + i0, mk);
    } else {
      const int n = p.numel - i0 < 4 ? int(p.numel - i0) : 4;
      for (int j = 0; j < n; ++j) x[j] = static_cast<O>(in[i0 + j]);
      dropout_block<O>(p, b, x, y, m);
      for (int j = 0; j < n; ++j) {
        out[i0 + j] = mt_cast<T, O>(y[j]);
        p.mask[i0 + j] = m[j];
      }
    }
  }
}
__global__ void perm_bucket_kernel(RandpermArgs a, int32_t* ids) {
  uint64_t seed = a.seed, offset = a.offset;
  philox_resolve(a.philox_dev, seed, offset);
  const uint64_t buckets = static_cast<uint64_t>(perm_buckets(a.n));
  for (const int64_t i : grid_stride(a.n)) {
    ids[i] = static_cast<int32_t>(perm_below(perm_word(seed, offset, i, PhiloxLane::PermBucket), buckets));
  }
}

// The first position of sorted[0, n) (ascending) not below b.
MT_HOST_DEVICE int64_t first_not_below(const int32_t* sorted, int64_t n, int64_t b) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < b) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

__global__ void perm_shuffle_kernel(RandpermArgs a, const int32_t* sorted) {
  uint64_t seed = a.seed, offset = a.offset;
  philox_resolve(a.philox_dev, seed, offset);
  for (const int64_t b : grid_stride(perm_buckets(a.n))) {
    const int64_t s = first_not_below(sorted, a.n, b), e = first_not_below(sorted, a.n, b + 1);
    perm_shuffle_run(a.out, s, e, [&](int64_t k) { return perm_word(seed, offset, s + k, PhiloxLane::PermSwap); });
  }
}
} // namespace

rt::Status randperm(const RandpermArgs& a, rt::Stream stream) {
  if (a.n <= 0) return rt::Status::Success;
  if (a.scratch == nullptr) return rt::report(rt::Status::InvalidValue, "randperm: no workspace was given");
  char* ws = static_cast<char*>(a.scratch);
  const size_t ids_bytes = sort_align(static_cast<size_t>(a.n) * 4);
  int32_t* ids = reinterpret_cast<int32_t*>(ws);
  int32_t* sorted = reinterpret_cast<int32_t*>(ws + ids_bytes);
  perm_bucket_kernel<<<grid_for(a.n), kThreads, 0, native(stream)>>>(a, ids);
  if (const rt::Status st = check_launch("randperm"); st != rt::Status::Success) return st;
  SortArgs s = randperm_sort_args(a.n);
  s.in = ids;
  s.values = sorted;
  s.indices = a.out;
  s.scratch = ws + 2 * ids_bytes;
  if (const rt::Status st = sort(s, stream); st != rt::Status::Success) return st;
  perm_shuffle_kernel<<<grid_for(perm_buckets(a.n)), kThreads, 0, native(stream)>>>(a, sorted);
  return check_launch("randperm");
}

rt::Status random(const RandomArgs& p, rt::Stream stream) {
  if (p.numel == 0) return rt::Status::Success;
  if (p.dtype == DType::ComplexFloat || p.dtype == DType::ComplexDouble) {
    return rt::report(rt::Status::InvalidValue, "random: complex outputs are not supported by the kernel");
  }
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      random_kernel<T><<<grid_for(p.numel), kThreads, 0, native(stream)>>>(p);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "random: unsupported element type");
  return check_launch("random");
}

rt::Status dropout(const DropoutArgs& p, rt::Stream stream) {
  if (p.numel == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto aligned = [](const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; };
    const bool vec = aligned(p.in, 4 * sizeof(T)) && aligned(p.out, 4 * sizeof(T)) && aligned(p.mask, 4);
    const unsigned grid = grid_for((p.numel + 3) / 4);
    if (vec) dropout_kernel<T, true><<<grid, kThreads, 0, native(stream)>>>(p);
    else dropout_kernel<T, false><<<grid, kThreads, 0, native(stream)>>>(p);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "dropout: not a floating dtype");
  return check_launch("dropout");
}

} // namespace mytorch::cuda
