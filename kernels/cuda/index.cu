// CUDA index family (Note [Index engine]): one thread per iteration element; scatters combine through a
// compare-and-swap loop on the aligned word holding the element, so every dtype accumulates atomically.
#include <algorithm>

#include "common.cuh"
#include "mytorch/index.h"
#include "mytorch/ops_math.h"

namespace mytorch::cuda {
namespace {

__device__ inline void report_bad(const IndexArgs& a, int64_t v) { record_error(a.error, v); }

template <int ES>
__global__ void gather_kernel(IndexArgs a) {
  const char* src = static_cast<const char*>(a.target);
  char* out = static_cast<char*>(a.other);
  for (const int64_t o : grid_stride(a.numel)) {
    int64_t t = 0, u = 0, bad = 0;
    if (!index_offsets(a, o, &t, &u, &bad)) {
      report_bad(a, bad);
      continue;
    }
    store_vec<unsigned char, ES>(out + u * ES, load_vec<unsigned char, ES>(src + t * ES));
  }
}

template <typename T>
__device__ inline T apply_op(T old, T v, ScatterOp op) {
  using O = ew::opmath_t<T>;
  switch (op) {
    case ScatterOp::Add: return static_cast<T>(static_cast<O>(old) + static_cast<O>(v));
    case ScatterOp::Mul: return static_cast<T>(static_cast<O>(old) * static_cast<O>(v));
    case ScatterOp::Max:
      return static_cast<T>(ew::apply<EwOp::Maximum, T>(static_cast<O>(old), static_cast<O>(v), O(0), EwParams{}));
    case ScatterOp::Min:
      return static_cast<T>(ew::apply<EwOp::Minimum, T>(static_cast<O>(old), static_cast<O>(v), O(0), EwParams{}));
    default: return v;
  }
}

// Combines v into *addr atomically, whatever sizeof(T): the hardware's own atomic add for float, double, int32
// and int64 (one red.global per element), else CAS on the 4- or 8-byte word that holds it.
template <typename T>
__device__ inline void atomic_combine(T* addr, T v, ScatterOp op) {
  if (op == ScatterOp::Assign) {
    *addr = v;
    return;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>) {
    if (op == ScatterOp::Add) {
      atomicAdd(addr, v);
      return;
    }
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (op == ScatterOp::Add) {  // two's complement: the unsigned add is the signed one
      atomicAdd(reinterpret_cast<unsigned long long*>(addr), static_cast<unsigned long long>(v));
      return;
    }
  }
  if constexpr (sizeof(T) == 8) {
    auto* word = reinterpret_cast<unsigned long long*>(addr);
    unsigned long long old = *word, assumed;
    do {
      assumed = old;
      T cur;
      memcpy(&cur, &assumed, 8);
      T next = apply_op<T>(cur, v, op);
      unsigned long long bits;
      memcpy(&bits, &next, 8);
      old = atomicCAS(word, assumed, bits);
    } while (assumed != old);
  } else {
    const uintptr_t p = reinterpret_cast<uintptr_t>(addr);
    auto* word = reinterpret_cast<unsigned int*>(p & ~uintptr_t(3));
    const unsigned shift = static_cast<unsigned>((p & 3) * 8);
    const unsigned mask = sizeof(T) == 4 ? 0xffffffffu : (((1u << (sizeof(T) * 8)) - 1u) << shift);
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      unsigned int part = sizeof(T) == 4 ? assumed : (assumed & mask) >> shift;
      T cur;
      memcpy(&cur, &part, sizeof(T));
      T next = apply_op<T>(cur, v, op);
      unsigned int nbits = 0;
      memcpy(&nbits, &next, sizeof(T));
      const unsigned int updated = sizeof(T) == 4 ? nbits : ((assumed & ~mask) | ((nbits << shift) & mask));
      old = atomicCAS(word, assumed, updated);
    } while (assumed != old);
  }
}

template <typename T>
__global__ void scatter_kernel(IndexArgs a) {
  T* dst = static_cast<T*>(a.target);
  const T* src = static_cast<const T*>(a.other);
  const T scalar = *reinterpret_cast<const T*>(a.scalar);
  for (const int64_t o : grid_stride(a.numel)) {
    int64_t t = 0, u = 0, bad = 0;
    if (!index_offsets(a, o, &t, &u, &bad)) {
      report_bad(a, bad);
      continue;
    }
    atomic_combine<T>(dst + t, a.src_is_scalar ? scalar : mt_load(src + u), a.op);
  }
}

} // namespace

rt::Status gather(const IndexArgs& a, rt::Stream stream) {
  if (a.numel == 0) return rt::Status::Success;
  const unsigned grid = grid_for(a.numel);
  cudaStream_t st = native(stream);
  switch (a.elem_size) {
    case 1: gather_kernel<1><<<grid, kThreads, 0, st>>>(a); break;
    case 2: gather_kernel<2><<<grid, kThreads, 0, st>>>(a); break;
    case 4: gather_kernel<4><<<grid, kThreads, 0, st>>>(a); break;
    case 8: gather_kernel<8><<<grid, kThreads, 0, st>>>(a); break;
    case 16: gather_kernel<16><<<grid, kThreads, 0, st>>>(a); break;
    default: return rt::report(rt::Status::InvalidValue, "gather: unsupported element size");
  }
  return check_launch("gather");
}

rt::Status scatter(const IndexArgs& a, rt::Stream stream) {
  if (a.numel == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) scatter_kernel<T><<<grid_for(a.numel), kThreads, 0, native(stream)>>>(a);
  });
  if (ok && (a.dtype == DType::ComplexFloat || a.dtype == DType::ComplexDouble))
    ok = false;  // Note [Complex index writes]
  if (!ok) return rt::report(rt::Status::InvalidValue, "scatter: unsupported dtype");
  return check_launch("scatter");
}

// Note [Nonzero by prefix sums]: a block of kThreads threads per input block of kNonzeroBlock elements.
namespace {

constexpr int kNzPerThread = int(kNonzeroBlock / kThreads); // consecutive elements a thread writes the rows of
static_assert(kNzPerThread <= 32, "a thread's non-zeros are kept in a 32-bit mask");

template <typename T>
__device__ inline bool nonzero_at(const T* x, int64_t i) {
  return mt_cast<bool, T>(mt_load(x + i));
}

template <typename T>
__global__ void nonzero_count_kernel(NonzeroArgs a, int64_t nb) {
  __shared__ int64_t smem[kThreads / 32];
  const T* x = static_cast<const T*>(a.in);
  for (const int64_t b : block_stride(nb)) {
    const int64_t end = std::min(a.n, (b + 1) * kNonzeroBlock);
    int64_t c = 0;
    for (int64_t i = b * kNonzeroBlock + threadIdx.x; i < end; i += blockDim.x) c += nonzero_at(x, i);
    c = block_reduce(c, smem, SumOp{}, int64_t(0));
    if (threadIdx.x == 0) a.counts[b] = c;
  }
}

// counts[0, nb) := their exclusive prefix sums and counts[nb] := the total, by one block, kThreads counts at a time.
__global__ void nonzero_offsets_kernel(NonzeroArgs a, int64_t nb) {
  __shared__ int64_t smem[kThreads / 32];
  int64_t carry = 0;
  for (int64_t b0 = 0; b0 < nb; b0 += blockDim.x) {
    const int64_t b = b0 + threadIdx.x;
    const int64_t c = b < nb ? a.counts[b] : 0;
    int64_t total = 0;
    const int64_t before = block_exclusive_sum(c, smem, &total);
    if (b < nb) a.counts[b] = carry + before;
    carry += total;
  }
  if (threadIdx.x == 0) a.counts[nb] = carry;
}

template <typename T>
__global__ void nonzero_write_kernel(NonzeroArgs a, int64_t nb) {
  __shared__ int64_t smem[kThreads / 32];
  const T* x = static_cast<const T*>(a.in);
  for (const int64_t b : block_stride(nb)) {
    const int64_t first = b * kNonzeroBlock + int64_t(threadIdx.x) * kNzPerThread;
    const int64_t last = std::min(a.n, first + kNzPerThread);
    unsigned mask = 0;
    int64_t c = 0;
    for (int64_t i = first; i < last; ++i)
      if (nonzero_at(x, i)) mask |= 1u << (i - first), ++c;
    int64_t total = 0;
    int64_t row = a.counts[b] + block_exclusive_sum(c, smem, &total);
    for (int k = 0; mask != 0; ++k, mask >>= 1) {
      if (!(mask & 1u)) continue;
      for (int64_t d = a.ndim - 1, rem = first + k; d >= 0; --d)
        a.out[d * a.counts[nb] + row] = rem % a.sizes[d], rem /= a.sizes[d];
      ++row;
    }
  }
}

} // namespace

rt::Status nonzero_count(const NonzeroArgs& a, rt::Stream stream) {
  const int64_t nb = nonzero_blocks(a.n);
  cudaStream_t st = native(stream);
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    if (nb > 0) nonzero_count_kernel<decltype(tag)><<<grid_blocks(nb), kThreads, 0, st>>>(a, nb);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "nonzero: unsupported dtype");
  nonzero_offsets_kernel<<<1, kThreads, 0, st>>>(a, nb);
  return check_launch("nonzero_count");
}

rt::Status nonzero_write(const NonzeroArgs& a, rt::Stream stream) {
  const int64_t nb = nonzero_blocks(a.n);
  if (nb == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    nonzero_write_kernel<decltype(tag)><<<grid_blocks(nb), kThreads, 0, native(stream)>>>(a, nb);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "nonzero: unsupported dtype");
  return check_launch("nonzero_write");
}

} // namespace mytorch::cuda
