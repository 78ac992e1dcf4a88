// Device primitives and launch helpers shared by every CUDA kernel family (and by the emulated build, which
// compiles the same code): grid sizing, warp and block reductions, launch checks. One copy of each.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "mytorch/launch.h"

namespace mytorch::cuda {

constexpr int kThreads = 256;

// ---- grid sizing ----------------------------------------------------------------------------------------------
// Kernels loop grid-stride over their work, so a launch caps its grid here (far below gridDim.x's 2^31 - 1).
constexpr int64_t kMaxGridBlocks = 65536;
// The device's limit on gridDim.y and gridDim.z.
constexpr int64_t kMaxGridYZ = 65535;

// Blocks for `units` units of work, `per_block` units a block (at least 1, at most kMaxGridBlocks).
inline unsigned grid_blocks(int64_t units, int64_t per_block = 1) {
  int64_t blocks = (units + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxGridBlocks) blocks = kMaxGridBlocks;
  return static_cast<unsigned>(blocks);
}
// Blocks of kThreads threads for n items, per_thread items a thread.
inline unsigned grid_for(int64_t n, int per_thread = 1) { return grid_blocks(n, int64_t(kThreads) * per_thread); }

// ---- grid-stride loops ----------------------------------------------------------------------------------------
// `for (const int64_t i : grid_stride(n))`: the items [0, n) a thread takes in a launch of any grid size, every
// (gridDim.x * blockDim.x)-th from its global index; `block_stride(n)` the same for whole blocks (every gridDim.x-th
// item from blockIdx.x), and `block_stride(n, per_block, first)` for blocks that take `per_block` items at a time,
// this thread's being `first` within them (a warp per row: per_block = the block's warps, first = its warp). The one
// spelling of the loop every kernel writes; the loop variable cannot be changed in the body.
struct StrideRange {
  int64_t first, stop, step;
  struct Iter {
    int64_t i, step;
    __device__ int64_t operator*() const { return i; }
    __device__ Iter& operator++() {
      i += step;
      return *this;
    }
    __device__ bool operator!=(const Iter& last) const { return i < last.i; }
  };
  __device__ Iter begin() const { return {first, step}; }
  __device__ Iter end() const { return {stop, step}; }
};
__device__ inline StrideRange grid_stride(int64_t n) {
  return {int64_t(blockIdx.x) * blockDim.x + threadIdx.x, n, int64_t(gridDim.x) * blockDim.x};
}
__device__ inline StrideRange block_stride(int64_t n, int64_t per_block = 1, int64_t first = 0) {
  return {int64_t(blockIdx.x) * per_block + first, n, int64_t(gridDim.x) * per_block};
}

// ---- warp and block reductions --------------------------------------------------------------------------------
struct SumOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
// Maximum with NaN propagating (a NaN operand wins), as ATen's reductions.
struct MaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return (b != b || b > a) ? b : a;
  }
};

// Butterfly reduction over groups of kWidth lanes (32: the warp; 4: the quad of lanes that share a row of an
// mma.sync fragment); every lane of a group gets the group's result.
template <int kWidth = 32, typename A, typename Op = SumOp>
__device__ inline A warp_reduce(A v, Op op = {}) {
#pragma unroll
  for (int off = kWidth / 2; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
template <typename A>
__device__ inline A warp_sum(A v) {
  return warp_reduce(v, SumOp{});
}

// Block-wide reduction of one value per thread; every thread gets the result. `smem` holds one value per warp
// (blockDim.x <= 1024). It starts with a barrier, so `smem` may be reused by the next call at once.
template <typename A, typename Op>
__device__ inline A block_reduce(A v, A* smem, Op op, A identity) {
  v = warp_reduce(v, op);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? smem[lane] : identity;
  return warp_reduce(v, op);
}

// Tree combine of one value per thread held in shared memory (parts[blockDim.x], blockDim.x a power of two):
// parts[0] ends with the block's total, combine(parts[i], parts[i + s]) in a fixed order (deterministic).
template <typename V, typename Combine>
__device__ inline void block_tree(V* parts, Combine combine) {
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) combine(parts[threadIdx.x], parts[threadIdx.x + s]);
    __syncthreads();
  }
}

// Block-wide exclusive prefix sum of one value per thread (blockDim.x a multiple of 32, <= 1024), in thread order;
// *total gets the block's sum. `smem` holds one value per warp; it starts with a barrier, so it may be reused at once.
template <typename A>
__device__ inline A block_exclusive_sum(A v, A* smem, A* total) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, warps = int(blockDim.x) >> 5;
  A incl = v;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const A o = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += o;
  }
  __syncthreads();
  if (lane == 31) smem[warp] = incl;
  __syncthreads();
  A before = 0, all = 0;
  for (int w = 0; w < warps; ++w) {
    if (w < warp) before += smem[w];
    all += smem[w];
  }
  *total = all;
  return before + incl - v;
}

// Shared-memory slot of element i of an array that threads read in runs of consecutive elements: one padding slot
// every 32, so that neighbouring threads' runs fall in different banks. Host too: launchers size shared memory with
// it (nvcc compiles a host call of a __device__-only function into exit(1): scripts/ptxas_check.py looks for those).
__host__ __device__ constexpr int padded_slot(int i) { return i + i / 32; }

// N elements of T moved as one access of sizeof(T) * N bytes (so aligned to that): the vector loads and stores of
// the kernels (16 bytes where they can).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Vec loads and stores that stay one access in the emulated build too: there the host compiler splits a struct
// load whose elements are used one by one into scalar loads (and the performance model would count those), so they
// go through a GCC vector of the same size, one access (checked for alignment, as the GPU's).
template <typename T, int N>
__device__ inline Vec<T, N> load_vec(const void* p) {
#if defined(MYTORCH_EMU_ACTIVE)
  typedef char Whole __attribute__((vector_size(sizeof(T) * N)));
  const Whole w = *static_cast<const Whole*>(p);
  Vec<T, N> v;
  __builtin_memcpy(&v, &w, sizeof(v));
  return v;
#else
  return *static_cast<const Vec<T, N>*>(p);
#endif
}
template <typename T, int N>
__device__ inline void store_vec(void* p, const Vec<T, N>& v) {
#if defined(MYTORCH_EMU_ACTIVE)
  typedef char Whole __attribute__((vector_size(sizeof(T) * N)));
  Whole w;
  __builtin_memcpy(&w, &v, sizeof(v));
  *static_cast<Whole*>(p) = w;
#else
  *static_cast<Vec<T, N>*>(p) = v;
#endif
}

// p[0] += a and p[1] += b atomically in global memory (p 8-byte aligned): one vector atomic on sm_90 (half the
// instructions and requests of two scalar ones), two scalar atomics before.
__device__ inline void atomic_add2(float* p, float a, float b) {
#if defined(MYTORCH_EMU_ACTIVE) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

inline rt::Status check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return rt::Status::Success;
  std::string msg = std::string(what) + " launch failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  return rt::report(rt::Status::Unknown, msg.c_str());
}

// Beyond 48 KiB of dynamic shared memory a kernel must opt in (cudaFuncSetAttribute), on every device it runs
// on: function attributes are per device. Done once per (device, kernel); a failure is reported, not ignored.
inline rt::Status opt_in_shared_memory(const void* kernel, size_t bytes, const char* what) {
  static std::mutex mu;
  static std::set<std::pair<int, const void*>> done;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return check_launch(what);
  std::lock_guard<std::mutex> lock(mu);
  if (done.count({device, kernel})) return rt::Status::Success;
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    std::string msg = std::string(what) + ": cannot opt in to " + std::to_string(bytes) +
                      " bytes of dynamic shared memory on device " + std::to_string(device) + ": " +
                      cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    return rt::report(rt::Status::InvalidValue, msg.c_str());
  }
  done.insert({device, kernel});
  return rt::Status::Success;
}

// Attribute and occupancy queries whose failure only loses a tuning value: the thread's last error is cleared
// so that the next launch check does not report it (Note [Clearing the last error] in runtime/cuda.cpp).
inline void ignore_error(cudaError_t err) {
  if (err != cudaSuccess) (void)cudaGetLastError();
}

inline cudaStream_t native(rt::Stream s) { return static_cast<cudaStream_t>(s); }

// The current device's streaming multiprocessors, queried once per device (launch plans size grids and the
// glue's workspaces by it: both must see the same value for a device).
inline int device_sms() {
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached];
  int dev = 0;
  ignore_error(cudaGetDevice(&dev));
  const bool cacheable = dev >= 0 && dev < kCached;
  int v = cacheable ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (v > 0) return v;
  ignore_error(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
  if (v < 1) v = 1;
  if (cacheable) cache[dev].store(v, std::memory_order_relaxed);
  return v;
}

// Blocks for n work items of kThreads threads: enough to cover them, capped at what the device keeps resident
// at once for `kernel` (its occupancy; grid-stride loops cover the rest).
template <typename Kernel>
unsigned grid_resident(Kernel kernel, int64_t items) {
  static int per_sm = 0;  // per instantiation: the kernel's resident blocks per SM (the same on every device here)
  if (per_sm == 0) {
    int v = 1;
    ignore_error(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, kThreads, 0));
    per_sm = v > 0 ? v : 1;
  }
  const int64_t resident = int64_t(device_sms()) * per_sm;
  const unsigned blocks = grid_for(items);
  return blocks < resident ? blocks : static_cast<unsigned>(resident);
}

} // namespace mytorch::cuda
