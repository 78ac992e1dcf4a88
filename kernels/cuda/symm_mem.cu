// CUDA symmetric-memory family (Note [Symmetric memory kernels]): signal-pad synchronisation with system-scope
// compare-and-swap on the peers' pads (mapped by CUDA IPC), one- and two-shot all-reduce and reduce-scatter
// reading the peers' buffers directly, and the all-to-alls pulling each segment from the peer that holds it.
// Block b of every kernel synchronises with block b of every peer on channel b; grid sizes depend only on what
// every rank agrees on (sizes, world), so the blocks pair up.
#include <chrono>

#include "common.cuh"
#include "mytorch/symm_mem.h"

namespace mytorch::cuda {
namespace {

constexpr int kSymmThreads = 512;   // the all-to-all's blocks (one thread per split when planning)
constexpr int kReduceThreads = 256;  // the reductions' (512 leaves the float64 one 128 registers: it spilled)

__device__ inline uint64_t now_ns() {
#if defined(MYTORCH_EMU_ACTIVE)
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
#else
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

__device__ inline uint32_t cas_system(uint32_t* p, uint32_t expected, uint32_t desired) {
#if defined(MYTORCH_EMU_ACTIVE)
  return atomicCAS(p, expected, desired);
#else
  return atomicCAS_system(p, expected, desired);
#endif
}

__device__ inline void fence_system() {
#if defined(MYTORCH_EMU_ACTIVE)
  __threadfence();
#else
  __threadfence_system();
#endif
}

// *slot from `from` to `to`, or false once the timeout passes.
__device__ inline bool swap_when(uint32_t* slot, uint32_t from, uint32_t to, const SymmSync& s) {
  const uint64_t start = now_ns();
  const uint64_t limit = s.timeout_ms * 1000000ull;
  for (uint32_t i = 0;; ++i) {
    if (cas_system(slot, from, to) == from) return true;
    if (limit > 0 && (i & 255) == 255 && now_ns() - start > limit) return false;
  }
}

__device__ inline uint32_t* slot_of(const SymmSync& s, int owner, int channel, int src) {
  return s.pads[owner] + static_cast<int64_t>(channel) * s.world + src;
}

__device__ inline void put(const SymmSync& s, int dst, int channel) {
  fence_system();  // release: this thread's (and, after __syncthreads, the block's) writes before the signal
  if (!swap_when(slot_of(s, dst, channel, s.rank), 0u, 1u, s)) symm::timed_out(s, channel, dst);
}

__device__ inline void wait(const SymmSync& s, int src, int channel) {
  if (!swap_when(slot_of(s, s.rank, channel, src), 1u, 0u, s)) symm::timed_out(s, channel, src);
  fence_system();  // acquire: the peer's writes before its signal are visible after this
}

// Block-level barrier with the same block of every peer: thread p < world signals peer p and waits for it.
__device__ inline void block_barrier(const SymmSync& s, int channel) {
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < s.world) {
    put(s, threadIdx.x, channel);
    wait(s, threadIdx.x, channel);
  }
  __syncthreads();
}

__global__ void symm_signal_kernel(SymmSignalArgs a) {
  switch (a.op) {
    case SymmSignalOp::Barrier: block_barrier(a.sync, a.channel); break;
    case SymmSignalOp::Put:
      if (threadIdx.x == 0) put(a.sync, a.peer, a.channel);
      break;
    case SymmSignalOp::Wait:
      if (threadIdx.x == 0) wait(a.sync, a.peer, a.channel);
      break;
  }
}

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ inline T reduced(const SymmReduceArgs& a, int64_t at) {
  Acc<T> sum = 0;
  for (int r = 0; r < a.sync.world; ++r) sum += static_cast<Acc<T>>(static_cast<const T*>(a.bufs[r])[a.offset + at]);
  return static_cast<T>(sum);
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads) symm_reduce_kernel(SymmReduceArgs a) {
  const SymmSync& s = a.sync;
  const int channel = blockIdx.x;
  T* mine = static_cast<T*>(a.bufs[s.rank]) + a.offset;
  T* out = static_cast<T*>(a.out);
  if (a.mode == SymmReduceMode::OneShot) {
    if (a.local_in != nullptr)
      for (const int64_t i : grid_stride(a.numel)) mine[i] = static_cast<const T*>(a.local_in)[i];
    block_barrier(s, channel);
    for (const int64_t i : grid_stride(a.numel)) out[i] = reduced<T>(a, i);
    block_barrier(s, channel);
    return;
  }
  if (a.mode == SymmReduceMode::ReduceScatter) {
    const int64_t per = a.numel / s.world;
    const int64_t nl = a.last_dim > 0 ? a.last_dim / s.world : 0;
    block_barrier(s, channel);
    for (const int64_t i : grid_stride(per))
      out[i] = reduced<T>(a, nl > 0 ? (i / nl) * a.last_dim + nl * s.rank + i % nl : per * s.rank + i);
    block_barrier(s, channel);
    return;
  }
  const int64_t c = symm::chunk(a.numel, s.world), start = c * s.rank;
  block_barrier(s, channel);
  for (const int64_t i : grid_stride(std::min(c, a.numel - start))) {
    const T v = reduced<T>(a, start + i);
    if (a.mode == SymmReduceMode::TwoShot) {
      for (int k = 0; k < s.world; ++k) static_cast<T*>(a.bufs[(s.rank + k) % s.world])[a.offset + start + i] = v;
    } else {
      mine[start + i] = v;
    }
  }
  block_barrier(s, channel);
  if (a.mode == SymmReduceMode::TwoShot) return;
  for (const int64_t i : grid_stride(c)) {
    for (int k = 0; k < s.world; ++k) {
      const int r = (s.rank + k) % s.world;
      if (c * r + i < a.numel) out[c * r + i] = static_cast<const T*>(a.bufs[r])[a.offset + c * r + i];
    }
  }
  block_barrier(s, channel);
}

// Copies n bytes with the widest accesses the addresses and size allow.
__device__ inline void copy_bytes(char* dst, const char* src, int64_t n) {
  const uintptr_t bits =
      reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | static_cast<uintptr_t>(n);
  if ((bits & 15) == 0) {
    for (int64_t i = threadIdx.x; i < n / 16; i += blockDim.x)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  } else if ((bits & 3) == 0) {
    for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x)
      reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<const uint32_t*>(src)[i];
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

__global__ void __launch_bounds__(kSymmThreads) symm_all_to_all_kernel(SymmAllToAllArgs a) {
  __shared__ int64_t split[kSymmMaxSplits], source[kSymmMaxSplits], dest[kSymmMaxSplits];
  const int n = a.sync.world * a.experts;
  block_barrier(a.sync, blockIdx.x);  // the peers' splits and rows are written
  for (int j = threadIdx.x; j < n; j += blockDim.x) symm::plan_segment(a, j, &split[j], &source[j]);
  __syncthreads();
  if (threadIdx.x == 0) symm::plan_destinations(a, split, dest);
  __syncthreads();
  for (const int64_t j : block_stride(n)) {
    int peer = 0, index = 0;
    symm::source_of(a.mode, static_cast<int>(j), a.sync.rank, a.sync.world, a.experts, &peer, &index);
    if (!symm::segment_ok(a, split[j], source[j], dest[j])) continue;
    copy_bytes(static_cast<char*>(a.out) + dest[j] * a.row_bytes, symm::input_of(a, peer) + source[j] * a.row_bytes,
               split[j] * a.row_bytes);
  }
  if (blockIdx.x == 0) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      a.out_splits_offsets[j] = split[j];
      a.out_splits_offsets[n + j] = dest[j];
    }
  }
  block_barrier(a.sync, blockIdx.x);  // every peer has pulled its rows from this rank's input
}

// Blocks of a reduction: enough for the elements one rank touches, at most kSymmReduceMaxBlocks, at most one
// per channel of the pad.
unsigned reduce_blocks(const SymmReduceArgs& a) {
  const int64_t per_rank = a.mode == SymmReduceMode::OneShot ? a.numel : symm::chunk(a.numel, a.sync.world);
  int64_t b = (per_rank + kReduceThreads - 1) / kReduceThreads;
  b = std::min<int64_t>(std::min<int64_t>(b, kSymmReduceMaxBlocks), a.sync.channels);
  return static_cast<unsigned>(std::max<int64_t>(b, 1));
}

}  // namespace

rt::Status symm_signal(const SymmSignalArgs& a, rt::Stream stream) {
  if (a.channel < 0 || a.channel >= a.sync.channels)
    return rt::report(rt::Status::InvalidValue, "symm_signal: channel outside the signal pad");
  symm_signal_kernel<<<1, (a.sync.world + 31) / 32 * 32, 0, native(stream)>>>(a);
  return check_launch("symm_signal");
}

rt::Status symm_reduce(const SymmReduceArgs& a, rt::Stream stream) {
  if (a.numel == 0) return rt::Status::Success;
  const unsigned grid = reduce_blocks(a);
  const bool ok = dispatch_floating(
      a.dtype, [&](auto tag) { symm_reduce_kernel<decltype(tag)><<<grid, kReduceThreads, 0, native(stream)>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "symm_reduce: expected a floating dtype");
  return check_launch("symm_reduce");
}

rt::Status symm_all_to_all(const SymmAllToAllArgs& a, rt::Stream stream) {
  const int n = a.sync.world * a.experts;
  if (n > kSymmMaxSplits) return rt::report(rt::Status::InvalidValue, "symm_all_to_all: too many splits");
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(std::min(n, 64), a.sync.channels));
  symm_all_to_all_kernel<<<grid, kSymmThreads, 0, native(stream)>>>(a);
  return check_launch("symm_all_to_all");
}

}  // namespace mytorch::cuda
