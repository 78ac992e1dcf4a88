// The CUDA runtime API of the emulated build (Note [CUDA emulation]): kernels/runtime/cuda.cpp and the CUDA
// launchers run on it unchanged. Memory is the sim runtime's (capacity, device count and range checks:
// MYTORCH_SIM_DEVICES, MYTORCH_SIM_MEMORY); every stream is a worker thread, so work really is asynchronous.
//
// Note [Emulated error semantics]
// As the CUDA runtime documents them: a failing call returns its error and stores it as the calling host
// thread's last error (cudaErrorNotReady from a query included); cudaGetLastError returns and clears it,
// cudaPeekAtLastError only returns it. A fault inside a kernel is sticky: from then on every call returns it
// and it cannot be cleared (the context is lost). Launch-configuration errors are not sticky. cudaSetDevice
// creates the device's primary context (CUDA 12 and later); cudaGetDevice never does.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../runtime/backend.h"
#include "internal.h"

struct EmuStream {
  int device = 0;
  int priority = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  unsigned long long submitted = 0, done = 0;
  bool stopping = false;
  EmuGraph* capture = nullptr;  // while capturing: where its work goes instead of the queue
};

struct EmuGraph {
  std::vector<std::function<void()>> tasks;
  std::string invalid;  // what invalidated the capture
};

struct EmuEvent {
  int device = 0;
  bool timing = true;
  EmuStream* stream = nullptr;  // where it was last recorded
  unsigned long long seq = 0;   // completes when stream->done reaches seq
  std::chrono::steady_clock::time_point when{};
};

namespace mytorch::emu {
namespace {

using Clock = std::chrono::steady_clock;
namespace rtd = mytorch::rt::detail;

constexpr int kMaxDevices = 64;
constexpr size_t kDefaultSmem = 48 << 10;
constexpr size_t kOptinSmem = 232448;  // sm_90: 227 KiB per block after the opt-in
// The emulated device is an H100 (SXM) as far as the kernels can ask: one place for what they may see.
constexpr int kSms = 132, kMaxThreads = 1024, kWarp = 32, kMajor = 9, kMinor = 0, kL2Bytes = 50 << 20;

thread_local cudaError_t t_last = cudaSuccess;
thread_local std::string t_detail;        // what the memory checks said about the last refused call
thread_local int t_device = 0;

std::mutex g_mu;
std::atomic<int> g_sticky{cudaSuccess};
std::string g_sticky_what;
std::atomic<bool> g_context[kMaxDevices];
std::map<std::pair<int, const void*>, int> g_smem_optin;  // (device, kernel) -> bytes
EmuStream* g_default[kMaxDevices] = {};

rtd::Backend& mem() {
  static rtd::Backend* b = rtd::make_sim_backend();
  return *b;
}
int count() { return std::min(mem().device_count(), kMaxDevices); }

cudaError_t set(cudaError_t e) {
  if (e != cudaSuccess) t_last = e;
  return e;
}
cudaError_t sticky() { return static_cast<cudaError_t>(g_sticky.load()); }
void make_sticky(const Fault& f) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_sticky.load() != cudaSuccess) return;
  g_sticky_what = f.what;
  g_sticky.store(f.error);
  std::fprintf(stderr, "mytorch emu: kernel fault (%s): %s\n", cudaGetErrorName(f.error), f.what.c_str());
}
void touch_context(int d) {
  if (d >= 0 && d < kMaxDevices) g_context[d].store(true);
}

// Every API call but the error queries starts here: a lost context answers with its sticky error.
#define MT_EMU_ENTER()                                 \
  do {                                                 \
    if (sticky() != cudaSuccess) return set(sticky()); \
  } while (0)

// MYTORCH_EMU_STREAM_DELAY_US: every task waits this long before it runs, so that work still pending when the
// host looks (queries, reads without synchronisation, missing stream waits) is pending for certain.
int stream_delay_us() {
  static const int us = [] {
    const char* s = std::getenv("MYTORCH_EMU_STREAM_DELAY_US");
    return s ? std::atoi(s) : 0;
  }();
  return us;
}

void worker(EmuStream* s) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lk(s->mu);
      s->cv.wait(lk, [&] { return !s->queue.empty() || s->stopping; });
      if (s->queue.empty()) return;  // stopping and drained
      task = std::move(s->queue.front());
      s->queue.pop_front();
    }
    if (stream_delay_us() > 0) std::this_thread::sleep_for(std::chrono::microseconds(stream_delay_us()));
    if (sticky() == cudaSuccess) task();  // a lost context runs nothing more
    {
      std::lock_guard<std::mutex> lk(s->mu);
      ++s->done;
    }
    s->cv.notify_all();
  }
}

EmuStream* new_stream(int device, int priority) {
  auto* s = new EmuStream();  // never freed: events may still name it
  s->device = device;
  s->priority = priority;
  std::thread(worker, s).detach();
  return s;
}

EmuStream* resolve(cudaStream_t s) {
  if (s != nullptr) return s;
  std::lock_guard<std::mutex> g(g_mu);
  EmuStream*& d = g_default[t_device];
  if (d == nullptr) d = new_stream(t_device, 0);
  return d;
}

std::atomic<int> g_captures{0};  // streams capturing

unsigned long long enqueue(EmuStream* s, std::function<void()> task) {
  unsigned long long seq;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->capture) {  // recorded, not run (Note [Graph capture])
      s->capture->tasks.push_back(std::move(task));
      return s->submitted;
    }
    s->queue.push_back(std::move(task));
    seq = ++s->submitted;
  }
  s->cv.notify_all();
  return seq;
}

void wait_for(EmuStream* s, unsigned long long seq) {
  std::unique_lock<std::mutex> lk(s->mu);
  s->cv.wait(lk, [&] { return s->done >= seq; });
}

void drain(EmuStream* s) {
  unsigned long long seq;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    seq = s->submitted;
  }
  wait_for(s, seq);
}

std::vector<EmuStream*>& all_streams() {
  static std::vector<EmuStream*> v;
  return v;
}

// A call a capture cannot hold: on stream s (or, with s null, any capturing stream: CUDA's global mode) it fails
// and invalidates the capture.
cudaError_t refuse_in_capture(EmuStream* s, const char* what) {
  if (g_captures.load() == 0) return cudaSuccess;
  bool hit = false;
  std::lock_guard<std::mutex> g(g_mu);
  std::vector<EmuStream*> streams = all_streams();
  for (EmuStream* x : streams) {
    if (s != nullptr && x != s) continue;
    std::lock_guard<std::mutex> lk(x->mu);
    if (x->capture == nullptr) continue;
    if (x->capture->invalid.empty()) x->capture->invalid = what;
    hit = true;
  }
  if (hit) t_detail = std::string(what) + " is not permitted while a stream is capturing";
  return hit ? set(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

cudaError_t check_device(int d) { return d < 0 || d >= count() ? set(cudaErrorInvalidDevice) : cudaSuccess; }

// -1 pinned host memory, >= 0 device memory, -2 neither (pageable host memory)
int owner(const void* p) {
  int d = -2;
  if (mem().pointer_device(p, &d) != rt::Status::Success) return -2;
  return d;
}

cudaError_t from_status(rt::Status s) {
  if (s != rt::Status::Success) t_detail = rt::last_error();  // the sim memory's own words (double free, ...)
  switch (s) {
    case rt::Status::Success: return cudaSuccess;
    case rt::Status::OutOfMemory: return cudaErrorMemoryAllocation;
    case rt::Status::InvalidDevice: return cudaErrorInvalidDevice;
    default: return cudaErrorInvalidValue;
  }
}

CUresult primary_ctx_state(CUdevice d, unsigned* flags, int* active) {
  if (d < 0 || d >= count()) return 101;  // CUDA_ERROR_INVALID_DEVICE
  if (flags) *flags = 0;
  *active = g_context[d].load() ? 1 : 0;
  return 0;
}

}  // namespace

cudaError_t submit(cudaStream_t stream, std::function<void()> task) {
  if (sticky() != cudaSuccess) return set(sticky());
  EmuStream* s = resolve(stream);
  if (s->device != t_device) return set(cudaErrorInvalidResourceHandle);
  touch_context(t_device);
  enqueue(s, std::move(task));
  return cudaSuccess;
}
int current_device() { return t_device; }
int device_of_range(const void* p, size_t bytes) {
  const int o = owner(p);
  return o >= 0 && (bytes == 0 || owner(static_cast<const char*>(p) + bytes - 1) == o) ? o : -1;
}

bool primary_context_active(int device) { return device >= 0 && device < kMaxDevices && g_context[device].load(); }

const char* sticky_fault() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_sticky.load() == cudaSuccess ? "" : g_sticky_what.c_str();
}

void launch_kernel(const void* func, const LaunchSite& site, dim3 grid, dim3 block, size_t shm, cudaStream_t stream,
                   std::shared_ptr<void> closure, ThreadBody body) {
  if (sticky() != cudaSuccess) {
    set(sticky());
    return;
  }
  const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  const unsigned max_block = static_cast<unsigned>(kMaxThreads);
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > max_block || block.y > max_block || block.z > 64 ||
      threads > max_block || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 ||
      grid.z > 65535) {
    set(cudaErrorInvalidConfiguration);
    return;
  }
  const int dev = t_device;
  if (shm > kDefaultSmem) {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_smem_optin.find({dev, func});
    if (it == g_smem_optin.end() || static_cast<size_t>(it->second) < shm) {
      set(cudaErrorInvalidValue);  // more than 48 KiB without cudaFuncSetAttribute for this kernel on this device
      return;
    }
  }
  EmuStream* s = resolve(stream);
  if (s->device != dev) {
    set(cudaErrorInvalidResourceHandle);  // a stream of another device than the current one
    return;
  }
  touch_context(dev);
  auto rec = std::make_shared<LaunchRec>();
  rec->func = func;
  rec->site = site;
  rec->grid = grid;
  rec->block = block;
  rec->shm = shm;
  rec->closure = std::move(closure);
  rec->body = body;
  enqueue(s, [rec] {
    Fault f = run_grid(*rec);
    if (f.error != cudaSuccess) make_sticky(f);
  });
}

}  // namespace mytorch::emu

using namespace mytorch::emu;  // NOLINT: the C API below implements the runtime's global functions
using mytorch::emu::kDefaultSmem;
using mytorch::emu::kOptinSmem;

cudaError_t cudaGetLastError() {
  cudaError_t e = t_last;
  t_last = cudaSuccess;
  if (sticky() != cudaSuccess) return sticky();
  return e;
}
cudaError_t cudaPeekAtLastError() { return sticky() != cudaSuccess ? sticky() : t_last; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    default: return "cudaErrorUnknown";
  }
}

namespace {
const char* plain_error_string(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return "unknown error";
  }
}
}  // namespace

const char* cudaGetErrorString(cudaError_t e) {
  // A sticky error's text carries what the emulator saw (block, thread, launch site); a refused call's text
  // what the memory checks said. The real runtime's text comes first.
  if (e != cudaSuccess && e == sticky()) return sticky_fault();
  if (e != cudaSuccess && !t_detail.empty()) {
    thread_local std::string text;
    text = std::string(plain_error_string(e)) + " (emu: " + t_detail + ")";
    t_detail.clear();
    return text.c_str();
  }
  return plain_error_string(e);
}

cudaError_t cudaGetDeviceCount(int* n) {
  *n = count();
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  MT_EMU_ENTER();
  *d = t_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  MT_EMU_ENTER();
  if (cudaError_t e = check_device(d); e != cudaSuccess) return e;
  t_device = d;
  touch_context(d);
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  MT_EMU_ENTER();
  if (cudaError_t e = check_device(d); e != cudaSuccess) return e;
  size_t f = 0, t = 0;
  mem().mem_get_info(d, &f, &t);
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "mytorch emu device %d (sm_90)", d);
  p->totalGlobalMem = t;
  p->sharedMemPerBlock = kDefaultSmem;
  p->sharedMemPerBlockOptin = kOptinSmem;
  p->warpSize = kWarp;
  p->maxThreadsPerBlock = kMaxThreads;
  p->major = kMajor;
  p->minor = kMinor;
  p->multiProcessorCount = kSms;
  p->l2CacheSize = kL2Bytes;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int d) {
  MT_EMU_ENTER();
  if (cudaError_t e = check_device(d); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *v = kMaxThreads; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = static_cast<int>(kDefaultSmem); return cudaSuccess;
    case cudaDevAttrWarpSize: *v = kWarp; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *v = kSms; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = kMajor; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = kMinor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = static_cast<int>(kOptinSmem); return cudaSuccess;
  }
  return set(cudaErrorInvalidValue);
}
cudaError_t cudaDeviceSynchronize() {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaDeviceSynchronize") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  touch_context(t_device);
  std::vector<EmuStream*> mine;
  {
    std::lock_guard<std::mutex> g(g_mu);
    for (EmuStream* s : all_streams())
      if (s->device == t_device) mine.push_back(s);
    if (g_default[t_device]) mine.push_back(g_default[t_device]);
  }
  for (EmuStream* s : mine) drain(s);
  return set(sticky());
}
cudaError_t cudaMemGetInfo(size_t* f, size_t* t) {
  MT_EMU_ENTER();
  touch_context(t_device);
  return set(from_status(mem().mem_get_info(t_device, f, t)));
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  MT_EMU_ENTER();
  const int o = owner(ptr);
  attr->type = o >= 0 ? cudaMemoryTypeDevice : (o == -1 ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered);
  attr->device = o >= 0 ? o : -1;
  attr->devicePointer = o >= 0 ? const_cast<void*>(ptr) : nullptr;
  attr->hostPointer = o < 0 ? const_cast<void*>(ptr) : nullptr;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** ptr, size_t n) {
  MT_EMU_ENTER();
  touch_context(t_device);
  return set(from_status(mem().device_malloc(t_device, n, ptr)));
}
cudaError_t cudaFree(void* ptr) {
  MT_EMU_ENTER();
  if (ptr == nullptr) return cudaSuccess;
  if (refuse_in_capture(nullptr, "cudaFree") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  const int o = owner(ptr);
  if (o < 0) {  // not live device memory: the sim memory says whether it was freed before or never allocated
    const cudaError_t e = from_status(mem().device_free(t_device, ptr));
    return set(e == cudaSuccess ? cudaErrorInvalidValue : e);
  }
  // cudaFree synchronizes the device first; the memory is unmapped afterwards, so a late access faults.
  const int saved = t_device;
  t_device = o;
  cudaDeviceSynchronize();
  t_device = saved;
  return set(from_status(mem().device_free(o, ptr)));
}
// IPC over the sim memory's own export (Note [Sharing sim memory between processes]); CUDA takes the
// allocation's start, as here.
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr) {
  MT_EMU_ENTER();
  const int o = owner(ptr);
  if (o < 0) return set(cudaErrorInvalidValue);
  mytorch::rt::IpcMemHandle h{};
  const cudaError_t e = set(from_status(mem().ipc_get_mem_handle(o, ptr, &h)));
  if (e == cudaSuccess) std::memcpy(handle->reserved, h.bytes, sizeof(handle->reserved));
  return e;
}
cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle, unsigned) {
  MT_EMU_ENTER();
  touch_context(t_device);
  mytorch::rt::IpcMemHandle h{};
  std::memcpy(h.bytes, handle.reserved, sizeof(h.bytes));
  return set(from_status(mem().ipc_open_mem_handle(t_device, h, ptr)));
}
cudaError_t cudaIpcCloseMemHandle(void* ptr) {
  MT_EMU_ENTER();
  const int o = owner(ptr);
  if (o < 0) return set(cudaErrorInvalidValue);
  const int saved = t_device;
  t_device = o;
  cudaDeviceSynchronize();  // as cudaFree: nothing queued may touch the mapping after it goes
  t_device = saved;
  return set(from_status(mem().ipc_close_mem_handle(o, ptr)));
}
cudaError_t cudaHostAlloc(void** ptr, size_t n, unsigned) {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaHostAlloc") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  return set(from_status(mem().host_malloc(n, ptr)));
}
cudaError_t cudaFreeHost(void* ptr) {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaFreeHost") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  for (int d = 0; d < count(); ++d) {
    const int saved = t_device;
    t_device = d;
    cudaDeviceSynchronize();
    t_device = saved;
  }
  return set(from_status(mem().host_free(ptr)));
}

namespace {
// Copies involving pageable host memory behave as the runtime documents: device-to-pageable waits for the
// copy; pageable-to-device returns once the source is staged. Device and pinned memory copy asynchronously.
cudaError_t copy(void* dst, const void* src, size_t n, bool dst_dev, bool src_dev, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int od = owner(dst), os = owner(src);
  const int od_end = owner(static_cast<const char*>(dst) + n - 1),
            os_end = owner(static_cast<const char*>(src) + n - 1);
  if (dst_dev != (od >= 0) || src_dev != (os >= 0) || (dst_dev && od_end != od) || (src_dev && os_end != os))
    return set(cudaErrorInvalidValue);  // wrong direction, or a range outside one live allocation
  EmuStream* s = resolve(stream);
  touch_context(t_device);
  if ((!src_dev && os == -2) || (!dst_dev && od == -2)) {  // pageable memory is copied synchronously
    if (refuse_in_capture(s, "a copy to or from pageable host memory") != cudaSuccess)
      return cudaErrorStreamCaptureUnsupported;
  }
  if (!src_dev && os == -2) {  // pageable source: staged now
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
    enqueue(s, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  const unsigned long long seq = enqueue(s, [dst, src, n] { std::memmove(dst, src, n); });
  if (!dst_dev && od == -2) wait_for(s, seq);  // pageable destination: synchronous
  return set(sticky());
}
}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  MT_EMU_ENTER();
  const bool dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) return copy(dst, src, n, owner(dst) >= 0, owner(src) >= 0, s);
  return copy(dst, src, n, dd, sd, s);
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int dd, const void* src, int sd, size_t n, cudaStream_t s) {
  MT_EMU_ENTER();
  if (check_device(dd) != cudaSuccess || check_device(sd) != cudaSuccess) return set(cudaErrorInvalidDevice);
  if (n && (owner(dst) != dd || owner(src) != sd)) return set(cudaErrorInvalidValue);
  return copy(dst, src, n, true, true, s);
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t n, cudaStream_t stream) {
  MT_EMU_ENTER();
  if (n == 0) return cudaSuccess;
  const int o = owner(dst);
  if (o < 0 || owner(static_cast<char*>(dst) + n - 1) != o) return set(cudaErrorInvalidValue);
  enqueue(resolve(stream), [dst, value, n] { std::memset(dst, value, n); });
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  MT_EMU_ENTER();
  *least = 0;
  *greatest = -5;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int priority) {
  MT_EMU_ENTER();
  touch_context(t_device);
  *s = new_stream(t_device, std::max(-5, std::min(0, priority)));
  std::lock_guard<std::mutex> g(g_mu);
  all_streams().push_back(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  MT_EMU_ENTER();
  if (s == nullptr) return set(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> g(g_mu);
    auto& v = all_streams();
    v.erase(std::remove(v.begin(), v.end(), s), v.end());
  }
  {
    std::lock_guard<std::mutex> lk(s->mu);
    s->stopping = true;  // the worker drains what was submitted, then ends
  }
  s->cv.notify_all();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaStreamSynchronize") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  drain(resolve(s));
  return set(sticky());
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaStreamQuery") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  EmuStream* s = resolve(stream);
  std::lock_guard<std::mutex> lk(s->mu);
  return set(s->done >= s->submitted ? cudaSuccess : cudaErrorNotReady);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e, unsigned) {
  MT_EMU_ENTER();
  if (e == nullptr) return set(cudaErrorInvalidResourceHandle);
  EmuStream* s = resolve(stream);
  if (e->stream == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
  EmuStream* on = e->stream;
  const unsigned long long seq = e->seq;
  if (on != s) enqueue(s, [on, seq] { wait_for(on, seq); });
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  MT_EMU_ENTER();
  if (fn == nullptr) return set(cudaErrorInvalidValue);
  EmuStream* s = resolve(stream);
  if (s->device != t_device) return set(cudaErrorInvalidResourceHandle);  // as a kernel launch
  touch_context(t_device);
  enqueue(s, [fn, user_data] { fn(user_data); });
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  MT_EMU_ENTER();
  touch_context(t_device);
  *e = new EmuEvent();
  (*e)->device = t_device;
  (*e)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  MT_EMU_ENTER();
  if (e == nullptr) return set(cudaErrorInvalidResourceHandle);
  if (e->stream) wait_for(e->stream, e->seq);  // the recorded marker still refers to it
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  MT_EMU_ENTER();
  if (e == nullptr) return set(cudaErrorInvalidResourceHandle);
  EmuStream* s = resolve(stream);
  if (s->device != e->device) return set(cudaErrorInvalidResourceHandle);
  if (e->stream) wait_for(e->stream, e->seq);  // the previous record's marker writes into the event
  e->stream = s;
  e->seq = enqueue(s, [e] { e->when = Clock::now(); });
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaEventQuery") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  if (e == nullptr) return set(cudaErrorInvalidResourceHandle);
  if (e->stream == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lk(e->stream->mu);
  return set(e->stream->done >= e->seq ? cudaSuccess : cudaErrorNotReady);
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  MT_EMU_ENTER();
  if (refuse_in_capture(nullptr, "cudaEventSynchronize") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  if (e == nullptr) return set(cudaErrorInvalidResourceHandle);
  if (e->stream) wait_for(e->stream, e->seq);
  return set(sticky());
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  MT_EMU_ENTER();
  if (a == nullptr || b == nullptr || !a->timing || !b->timing || !a->stream || !b->stream)
    return set(cudaErrorInvalidResourceHandle);
  if (cudaEventQuery(a) != cudaSuccess || cudaEventQuery(b) != cudaSuccess) return set(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  MT_EMU_ENTER();
  if (stream == nullptr) return set(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
  std::lock_guard<std::mutex> lk(stream->mu);
  if (stream->capture) return set(cudaErrorIllegalState);
  stream->capture = new EmuGraph();
  g_captures.fetch_add(1);
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  MT_EMU_ENTER();
  *graph = nullptr;
  if (stream == nullptr) return set(cudaErrorIllegalState);
  std::unique_ptr<EmuGraph> g;
  {
    std::lock_guard<std::mutex> lk(stream->mu);
    if (!stream->capture) return set(cudaErrorIllegalState);
    g.reset(stream->capture);
    stream->capture = nullptr;
    g_captures.fetch_sub(1);
  }
  if (!g->invalid.empty()) {
    t_detail = "the capture was invalidated by " + g->invalid;
    return set(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g.release();
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  MT_EMU_ENTER();
  EmuStream* s = resolve(stream);
  std::lock_guard<std::mutex> lk(s->mu);
  *status = !s->capture
                ? cudaStreamCaptureStatusNone
                : (s->capture->invalid.empty() ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusInvalidated);
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  MT_EMU_ENTER();
  if (graph == nullptr) return set(cudaErrorInvalidValue);
  *exec = new EmuGraph(*graph);
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  MT_EMU_ENTER();
  if (exec == nullptr) return set(cudaErrorInvalidValue);
  if (sticky() != cudaSuccess) return set(sticky());
  EmuStream* s = resolve(stream);
  if (s->device != t_device) return set(cudaErrorInvalidResourceHandle);
  touch_context(t_device);
  for (const auto& task : exec->tasks) enqueue(s, task);  // each launch's closure holds its arguments
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  MT_EMU_ENTER();
  delete exec;  // queued replays hold their own copies of its tasks
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  MT_EMU_ENTER();
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned) {
  MT_EMU_ENTER();
  if (graph == nullptr) return set(cudaErrorInvalidValue);
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return set(cudaErrorInvalidValue);
  std::fprintf(f, "digraph mytorch_emu_graph {\n");
  for (size_t i = 0; i < graph->tasks.size(); ++i) {
    std::fprintf(f, "  n%zu;\n", i);
    if (i) std::fprintf(f, "  n%zu -> n%zu;\n", i - 1, i);
  }
  std::fprintf(f, "}\n");
  std::fclose(f);
  return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  MT_EMU_ENTER();
  if (graph == nullptr || count == nullptr || nodes != nullptr) return set(cudaErrorInvalidValue);
  *count = graph->tasks.size();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  MT_EMU_ENTER();
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || static_cast<size_t>(value) > kOptinSmem)
    return set(cudaErrorInvalidValue);
  touch_context(t_device);
  std::lock_guard<std::mutex> g(g_mu);
  g_smem_optin[{t_device, func}] = value;  // per device, as function attributes are
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int block_size, size_t smem) {
  MT_EMU_ENTER();
  if (block_size <= 0 || block_size > kMaxThreads) return set(cudaErrorInvalidValue);
  int by_threads = 2048 / block_size;
  int by_smem = smem ? static_cast<int>(kOptinSmem / smem) : 32;
  *blocks = std::max(0, std::min({by_threads, by_smem, 32}));
  return cudaSuccess;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  MT_EMU_ENTER();
  if (std::string(symbol) == "cuDevicePrimaryCtxGetState") {
    *fn = reinterpret_cast<void*>(&primary_ctx_state);
    if (status) *status = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  *fn = nullptr;
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
