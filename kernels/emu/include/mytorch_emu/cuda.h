// The emulated CUDA build (MYTORCH_EMU=1): the CUDA kernel language and the part of the CUDA runtime API
// that mytorch uses, for compiling kernels/cuda/*.cu and kernels/runtime/cuda.cpp as host C++.
//
// Note [CUDA emulation]
// The .cu sources are compiled unchanged except for a mechanical, line-preserving rewrite
// (kernels/emu/rewrite_cu.py): `k<<<g, b, shm, s>>>(args)` becomes a call of emu::launcher, and
// `__shared__` declarations become per-block buffers of their exact size. Everything else is here:
//  - threads are fibers (kernels/emu/fiber.cpp: a hand-written context switch, no ucontext); a block's
//    fibers run on one host thread, blocks one after another on the worker thread of their stream;
//  - __syncthreads and the full-mask warp collectives (shuffles, mma.sync) are barriers between fibers;
//    a barrier reached by part of a block or warp is a kernel fault naming the block and thread;
//  - a block whose first thread finishes without reaching a barrier runs its other threads as plain calls
//    (the fast path for barrier-free kernels);
//  - the launch limits of an sm_90 device are enforced (block <= 1024 threads, grid.y/z <= 65535, dynamic
//    shared memory above 48 KiB only after cudaFuncSetAttribute for that kernel on that device, kernel
//    parameters <= 32,764 bytes at compile time, as nvcc does);
//  - errors follow the runtime's documented semantics: every failing call sets the calling thread's last
//    error, cudaGetLastError returns and clears it, and a fault inside a kernel is sticky: every later call
//    returns it (kernels/emu/runtime_api.cpp);
//  - misaligned loads and stores inside kernels are faults (cudaErrorMisalignedAddress), as on hardware:
//    the kernels are compiled with -fsanitize=alignment and the emulator handles the reports.
// Memory is the sim runtime's host memory; streams run asynchronously on worker threads.
#pragma once

#include <math.h>  // the float overloads of the math functions in the global namespace, as in device code

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---- the kernel language -----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict
#define __constant__ static
// Declarations the rewrite did not turn into per-block buffers still behave as shared memory: one copy per
// host thread, and a block runs on one host thread.
#define __shared__ static thread_local

#define MYTORCH_EMU_ACTIVE 1

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };
// The vector types, with CUDA's alignment: a vector load through a misaligned pointer is a fault.
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// ---- runtime API types ---------------------------------------------------------------------------------
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

struct EmuStream;
struct EmuEvent;
typedef EmuStream* cudaStream_t;
typedef EmuEvent* cudaEvent_t;
struct EmuGraph;
struct EmuGraphNode;
typedef EmuGraph* cudaGraph_t;
typedef EmuGraph* cudaGraphExec_t;  // an instantiated graph is a copy of the captured one
typedef EmuGraphNode* cudaGraphNode_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2 };
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  size_t sharedMemPerBlockOptin;
};
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1 };
#define cudaEnableDefault 0x0
#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2
#define cudaHostAllocDefault 0x0
#define cudaIpcMemLazyEnablePeerAccess 0x1
struct cudaIpcMemHandle_t { char reserved[64]; };

typedef int CUresult;
typedef int CUdevice;

// ---- runtime API (kernels/emu/runtime_api.cpp) -------------------------------------------------------------
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int d);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr);
cudaError_t cudaMalloc(void** ptr, size_t n);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaHostAlloc(void** ptr, size_t n, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr);
cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle, unsigned flags);
cudaError_t cudaIpcCloseMemHandle(void* ptr);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemcpyPeerAsync(void* dst, int dd, const void* src, int sd, size_t n, cudaStream_t s = nullptr);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t n, cudaStream_t s = nullptr);
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
// A host function in stream order (the emulated NCCL's calls run so, kernels/emu/nccl.cpp). As on CUDA it blocks
// the stream while it runs and must not call the runtime API.
typedef void (*cudaHostFn_t)(void* user_data);
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user_data);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b);
// Stream capture (Note [Graph capture]): work a capturing stream is given is recorded, not run; a launched graph
// enqueues the recording again. What cannot be captured (synchronisation, pageable copies, frees) fails with
// cudaErrorStreamCaptureUnsupported and invalidates the capture, whose end then fails.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned flags);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count);
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                          size_t dynamic_smem);
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status);
template <typename F>
cudaError_t cudaFuncSetAttribute(F* func, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}
template <typename F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* func, int block_size, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(func), block_size, smem);
}

namespace mytorch::emu {

// ---- the emulated thread ---------------------------------------------------------------------------------
// A cp.async this thread issued and no cp.async.wait_group has landed yet (cp_async16 below).
struct AsyncCopy {
  void* dst;
  uint4 data;
  unsigned group;
};
struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int linear;  // thread index within the block
  std::vector<AsyncCopy> async;  // issued, not yet landed
  unsigned async_groups = 0;     // cp.async.commit_group count
};
ThreadState& self();

void syncthreads();
// Warp collectives: every lane of the warp deposits `bytes` from `in`, waits for the others, and gets back
// a pointer to the warp's deposits (32 slots of kSlotBytes); `leave` ends the collective.
constexpr int kSlotBytes = 64;
const unsigned char* warp_exchange(unsigned mask, const void* in, size_t bytes, const char* what);
void warp_leave();

unsigned char* dynamic_shared_base();
void* block_static_shared(const void* key, size_t bytes, size_t align);
template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(dynamic_shared_base());
}
// A `__shared__ T name[...]` declaration: one exact-size buffer per block, keyed by the declaration.
template <typename T, typename Key>
T& block_shared(Key) {
  static const char key = 0;
  return *static_cast<T*>(block_static_shared(&key, sizeof(T), alignof(T)));
}

// ---- launches --------------------------------------------------------------------------------------------
struct LaunchSite {
  const char* name;
  const char* file;
  int line;
};
using ThreadBody = void (*)(const void* closure);
// Validates the configuration (setting the calling thread's last error on failure) and enqueues the grid on
// the stream. `closure` (copied) holds the kernel and its arguments; `body` runs one thread of it.
void launch_kernel(const void* func, const LaunchSite& site, dim3 grid, dim3 block, size_t shm, cudaStream_t s,
                   std::shared_ptr<void> closure, ThreadBody body);

template <typename... P>
constexpr size_t param_bytes() {
  size_t n = 0;
  ((n = (n + alignof(P) - 1) / alignof(P) * alignof(P) + sizeof(P)), ...);
  return n;
}

template <typename... P>
struct Launcher {
  void (*kernel)(P...);
  LaunchSite site;
  dim3 grid, block;
  size_t shm;
  cudaStream_t stream;

  template <typename... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
    static_assert(
        param_bytes<std::decay_t<P>...>() <= 32764,
        "kernel parameters exceed the 32,764 bytes a launch can pass (nvcc: formal parameter space overflowed)");
    using Closure = std::tuple<void (*)(P...), std::decay_t<P>...>;
    auto closure = std::make_shared<Closure>(kernel, static_cast<std::decay_t<P>>(std::forward<A>(args))...);
    ThreadBody body = [](const void* c) {
      const Closure& cl = *static_cast<const Closure*>(c);
      std::apply([](auto fn, const auto&... a) { fn(a...); }, cl);
    };
    launch_kernel(reinterpret_cast<const void*>(kernel), site, grid, block, shm, stream, std::move(closure), body);
  }
};

template <typename... P>
Launcher<P...> launcher(void (*kernel)(P...), const char* name, const char* file, int line, dim3 grid, dim3 block,
                        size_t shm = 0, cudaStream_t stream = nullptr) {
  return Launcher<P...>{kernel, LaunchSite{name, file, line}, grid, block, shm, stream};
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} as a warp collective (kernels/emu/scheduler.cpp).
void mma_m16n8k16(float* c, const uint32_t* a, const uint32_t* b, bool bf16);

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 as a warp collective: `row` is the 16-byte row this lane's
// address names (lanes 8i..8i+7 the rows of matrix i), read by the caller in the kernel's own code so that the
// performance model counts it as the instruction's shared-memory access (a phase of 8 rows, as the hardware's).
void ldmatrix_x4(uint32_t* regs, const uint4& row, bool trans);

// cp.async.cg.shared.global (16 bytes, the first `bytes` copied and the rest zero-filled), cp.async.commit_group
// and cp.async.wait_group:
// the global read happens at the issue, the shared-memory write only at the wait that covers its group (the
// latest a GPU may land it), so a kernel that reads a stage before waiting for it reads stale data here too.
// Inline, in the kernel's translation unit: both accesses are instrumented (the model counts them).
// MYTORCH_EMU_CP_ASYNC=never lands nothing (the negative control: the batteries then fail).
bool cp_async_never_lands();
inline void cp_async16(void* dst, const void* src, int bytes) {
  uint4 v{0u, 0u, 0u, 0u};
  if (bytes == 16) {
    v = *static_cast<const uint4*>(src);
  } else {  // a partial chunk: its 16-bit elements, the rest zero
    uint16_t part[8] = {};
    for (int e = 0; e < bytes / 2; ++e) part[e] = static_cast<const uint16_t*>(src)[e];
    std::memcpy(&v, part, sizeof(v));
  }
  ThreadState& t = self();
  t.async.push_back(AsyncCopy{dst, v, t.async_groups});
}
inline void cp_async_commit() { self().async_groups++; }
inline void cp_async_wait(unsigned pending) {
  ThreadState& t = self();
  if (cp_async_never_lands()) return;
  size_t keep = 0;
  for (size_t i = 0; i < t.async.size(); ++i) {
    const AsyncCopy c = t.async[i];
    if (c.group + pending < t.async_groups) *static_cast<uint4*>(c.dst) = c.data;
    else t.async[keep++] = c;
  }
  t.async.resize(keep);
}

// The fault of the sticky error, if any (for messages and tests).
const char* sticky_fault();
// Test hooks (kernels/emu/runtime_api.cpp): whether a device's primary context exists, the mma fragment layout
// (a deliberately wrong one for the negative control), and the schedule-fuzzing seed.
bool primary_context_active(int device);

}  // namespace mytorch::emu

#define threadIdx (::mytorch::emu::self().thread_idx)
#define blockIdx (::mytorch::emu::self().block_idx)
#define blockDim (::mytorch::emu::self().block_dim)
#define gridDim (::mytorch::emu::self().grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads() { ::mytorch::emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  char none = 0;
  ::mytorch::emu::warp_exchange(mask, &none, 1, "__syncwarp");
  ::mytorch::emu::warp_leave();
}

namespace mytorch::emu {
template <typename T>
T shuffle(unsigned mask, T v, int src_lane, const char* what) {
  static_assert(sizeof(T) <= kSlotBytes, "shuffle of a type wider than a slot");
  const unsigned char* slots = warp_exchange(mask, &v, sizeof(T), what);
  T out;
  std::memcpy(&out, slots + src_lane * kSlotBytes, sizeof(T));
  warp_leave();
  return out;
}
inline int lane_id() { return self().linear & 31; }
}  // namespace mytorch::emu

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = ::mytorch::emu::lane_id();
  int src = lane ^ lane_mask;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;  // outside the lane's segment: own value
  return ::mytorch::emu::shuffle(mask, v, src, "__shfl_xor_sync");
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  const int lane = ::mytorch::emu::lane_id();
  const int src = (lane & ~(width - 1)) + (src_lane & (width - 1));
  return ::mytorch::emu::shuffle(mask, v, src, "__shfl_sync");
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = ::mytorch::emu::lane_id();
  int src = lane + static_cast<int>(delta);
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return ::mytorch::emu::shuffle(mask, v, src, "__shfl_down_sync");
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = ::mytorch::emu::lane_id();
  int src = lane - static_cast<int>(delta);
  if (src < (lane & ~(width - 1))) src = lane;
  return ::mytorch::emu::shuffle(mask, v, src, "__shfl_up_sync");
}

// ---- atomics: real host atomics (blocks of different streams run on different host threads) ---------------
template <typename T>
T atomicCAS(T* addr, T compare, T val) {
  __atomic_compare_exchange_n(addr, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value either way
}
template <typename T, typename F>
T emu_atomic_update(T* addr, F f) {
  T old = __atomic_load_n(addr, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(addr, &old, f(old), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return old;
}
template <typename T>
T atomicAdd(T* addr, T v) {
  if constexpr (std::is_integral_v<T>) return __atomic_fetch_add(addr, v, __ATOMIC_SEQ_CST);
  else {
    using Bits = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned>;
    Bits* word = reinterpret_cast<Bits*>(addr);
    Bits old = emu_atomic_update(word, [&](Bits b) {
      T x;
      std::memcpy(&x, &b, sizeof(T));
      x += v;
      std::memcpy(&b, &x, sizeof(T));
      return b;
    });
    T r;
    std::memcpy(&r, &old, sizeof(T));
    return r;
  }
}
// sm_90's vector atomic (global memory): one 8-byte access for the performance model and the sanitizer
// (instruction_access, kernels/emu/trace.cpp), two scalar host atomics for the values.
namespace mytorch::emu {
void instruction_access(void* a, size_t n, bool store);
}
__attribute__((no_sanitize_address)) inline float emu_atomic_add_unseen(float* addr, float v) {
  unsigned* word = reinterpret_cast<unsigned*>(addr);
  unsigned old = __atomic_load_n(word, __ATOMIC_SEQ_CST), next;
  do {
    float x;
    std::memcpy(&x, &old, 4);
    x += v;
    std::memcpy(&next, &x, 4);
  } while (!__atomic_compare_exchange_n(word, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  float r;
  std::memcpy(&r, &old, 4);
  return r;
}
inline float2 atomicAdd(float2* addr, float2 v) {
  ::mytorch::emu::instruction_access(addr, 8, true);
  return float2{emu_atomic_add_unseen(&addr->x, v.x), emu_atomic_add_unseen(&addr->y, v.y)};
}
template <typename T>
T atomicMax(T* addr, T v) {
  return emu_atomic_update(addr, [&](T o) { return o < v ? v : o; });
}
template <typename T>
T atomicMin(T* addr, T v) {
  return emu_atomic_update(addr, [&](T o) { return v < o ? v : o; });
}
template <typename T>
T atomicExch(T* addr, T v) {
  return __atomic_exchange_n(addr, v, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicOr(T* addr, T v) {
  return __atomic_fetch_or(addr, v, __ATOMIC_SEQ_CST);
}
template <typename T>
T atomicAnd(T* addr, T v) {
  return __atomic_fetch_and(addr, v, __ATOMIC_SEQ_CST);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- device intrinsics ----------------------------------------------------------------------------------
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline unsigned __float_as_uint(float x) {
  unsigned i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __uint_as_float(unsigned i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline long long __double_as_longlong(double x) {
  long long i;
  std::memcpy(&i, &x, 8);
  return i;
}
inline double __longlong_as_double(long long i) {
  double x;
  std::memcpy(&x, &i, 8);
  return x;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}
