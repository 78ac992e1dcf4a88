// The cuda runtime: runtime.h on top of the CUDA runtime API (linked statically, so a build with CUDA
// still imports and runs the sim runtime on machines without a driver). The MYTORCH_EMU build compiles this
// same file against the emulated runtime API (kernels/emu), where it is the `emu` runtime.
//
// Note [Clearing the last error]
// Every failing CUDA runtime call also stores its error as the thread's last error, which the next launch
// check (cudaGetLastError after a launch) would report as the launch's failure. So every call here whose
// error is handled or deliberately ignored clears it again: cudaErrorNotReady from queries included.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "backend.h"

namespace mytorch::rt::detail {
namespace {

Status from_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Success;
  Status s = Status::Unknown;
  switch (err) {
    case cudaErrorMemoryAllocation: s = Status::OutOfMemory; break;
    case cudaErrorInvalidDevice: s = Status::InvalidDevice; break;
    case cudaErrorInvalidValue: s = Status::InvalidValue; break;
    case cudaErrorInvalidDevicePointer: s = Status::InvalidPointer; break;
    case cudaErrorNotReady: s = Status::NotReady; break;
    default: break;
  }
  (void)cudaGetLastError();  // Note [Clearing the last error]; a sticky error stays regardless
  if (s == Status::NotReady) return s;
  return fail(s, std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

#define MT_CUDA(call) from_cuda((call), #call)

cudaMemcpyKind to_cuda(CopyKind k) {
  switch (k) {
    case CopyKind::HostToDevice: return cudaMemcpyHostToDevice;
    case CopyKind::DeviceToHost: return cudaMemcpyDeviceToHost;
    case CopyKind::DeviceToDevice: return cudaMemcpyDeviceToDevice;
    case CopyKind::HostToHost: return cudaMemcpyHostToHost;
  }
  return cudaMemcpyDefault;
}

inline cudaStream_t cs(Stream s) { return static_cast<cudaStream_t>(s); }
inline cudaEvent_t ce(Event e) { return static_cast<cudaEvent_t>(e); }

// Calls whose failure only loses an optimisation: the error is dropped and the thread's last error cleared.
void ignore_error(cudaError_t err) {
  if (err != cudaSuccess) (void)cudaGetLastError();
}

// Whether `device`'s primary context exists (the driver's cuDevicePrimaryCtxGetState, found through the
// runtime so that nothing links libcuda). Unknown counts as yes: then behave as cudaSetDevice always did.
bool has_primary_context(int device) {
  using StateFn = int (*)(int, unsigned*, int*);
  static StateFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<StateFn>(nullptr);
    }
    return reinterpret_cast<StateFn>(p);
  }();
  if (fn == nullptr) return true;
  unsigned flags = 0;
  int active = 1;
  if (fn(device, &flags, &active) != 0) return true;
  return active != 0;
}

// Makes `device` current unless that would create its context (torch.cuda's MaybeSetDevice): a thread that
// never used device 0 must not get a context there when a guard restores "device 0".
Status maybe_set(int device) {
  if (!has_primary_context(device)) return Status::Success;
  return MT_CUDA(cudaSetDevice(device));
}

// Runs `body` with `device` current, restoring the caller's device afterwards (where that creates nothing). A
// device outside [0, count) is refused before the driver sees it.
template <typename F>
Status on_device(int count, int device, F body) {
  if (device < 0 || device >= count) {
    return fail(Status::InvalidDevice, "device index " + std::to_string(device) + " is out of range: " +
                                           std::to_string(count) + " CUDA device(s) are visible");
  }
  int prev = 0;
  if (Status s = MT_CUDA(cudaGetDevice(&prev)); s != Status::Success) return s;
  if (prev != device) {
    if (Status s = MT_CUDA(cudaSetDevice(device)); s != Status::Success) return s;
  }
  Status s = body();
  if (prev != device) (void)maybe_set(prev);
  return s;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int n, Kind kind) : count_(n), kind_(kind) {}
  Kind kind() const override { return kind_; }
  int device_count() override { return count_; }
  Status get_device(int* d) override { return MT_CUDA(cudaGetDevice(d)); }
  Status set_device(int d) override {
    if (d < 0 || d >= count_) return bad_device(d);
    return MT_CUDA(cudaSetDevice(d));
  }
  Status maybe_set_device(int d) override {
    if (d < 0 || d >= count_) return bad_device(d);
    return maybe_set(d);
  }
  Status get_device_properties(int d, DeviceProps* p) override {
    if (d < 0 || d >= count_) return bad_device(d);
    cudaDeviceProp prop{};
    if (Status s = MT_CUDA(cudaGetDeviceProperties(&prop, d)); s != Status::Success) return s;
    std::memset(p, 0, sizeof(*p));
    std::strncpy(p->name, prop.name, sizeof(p->name) - 1);
    p->total_memory = prop.totalGlobalMem;
    p->major = prop.major;
    p->minor = prop.minor;
    p->multi_processor_count = prop.multiProcessorCount;
    p->warp_size = prop.warpSize;
    p->l2_cache_size = static_cast<size_t>(prop.l2CacheSize);
    return Status::Success;
  }
  Status device_synchronize(int d) override {
    return on_device(count_, d, [] { return MT_CUDA(cudaDeviceSynchronize()); });
  }
  Status mem_get_info(int d, size_t* f, size_t* t) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaMemGetInfo(f, t)); });
  }
  Status pointer_device(const void* ptr, int* d) override {
    cudaPointerAttributes attr{};
    if (Status s = MT_CUDA(cudaPointerGetAttributes(&attr, ptr)); s != Status::Success) return s;
    if (attr.type != cudaMemoryTypeDevice) return fail(Status::InvalidPointer, "not a device pointer");
    *d = attr.device;
    return Status::Success;
  }
  Status device_malloc(int d, size_t n, void** ptr) override {
    *ptr = nullptr;
    if (n == 0) return Status::Success;
    return on_device(count_, d, [&] { return MT_CUDA(cudaMalloc(ptr, n)); });
  }
  Status device_free(int d, void* ptr) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaFree(ptr)); });
  }
  Status ipc_get_mem_handle(int d, void* base, IpcMemHandle* h) override {
    static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(IpcMemHandle::bytes), "cudaIpcMemHandle_t does not fit");
    cudaIpcMemHandle_t ch{};
    Status s = on_device(count_, d, [&] { return MT_CUDA(cudaIpcGetMemHandle(&ch, base)); });
    if (s == Status::Success) {
      std::memset(h->bytes, 0, sizeof(h->bytes));
      std::memcpy(h->bytes, &ch, sizeof(ch));
    }
    return s;
  }
  Status ipc_open_mem_handle(int d, const IpcMemHandle& h, void** ptr) override {
    cudaIpcMemHandle_t ch{};
    std::memcpy(&ch, h.bytes, sizeof(ch));
    return on_device(count_, d, [&] { return MT_CUDA(cudaIpcOpenMemHandle(ptr, ch, cudaIpcMemLazyEnablePeerAccess)); });
  }
  Status ipc_close_mem_handle(int d, void* ptr) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaIpcCloseMemHandle(ptr)); });
  }
  Status host_malloc(size_t n, void** ptr) override {
    *ptr = nullptr;
    if (n == 0) return Status::Success;
    return MT_CUDA(cudaHostAlloc(ptr, n, cudaHostAllocDefault));
  }
  Status host_free(void* ptr) override { return MT_CUDA(cudaFreeHost(ptr)); }
  Status memcpy_async(void* dst, const void* src, size_t n, CopyKind k, Stream s) override {
    if (n == 0) return Status::Success;
    return MT_CUDA(cudaMemcpyAsync(dst, src, n, to_cuda(k), cs(s)));
  }
  Status memcpy_peer_async(void* dst, int dd, const void* src, int sd, size_t n, Stream s) override {
    if (n == 0) return Status::Success;
    // On the destination device: a null (default) stream handle means the *current* device's default stream,
    // and the caller's stream is the destination's. From another current device the copy went onto that
    // device's default stream, unordered with the destination's work and its synchronization.
    return on_device(count_, dd, [&] { return MT_CUDA(cudaMemcpyPeerAsync(dst, dd, src, sd, n, cs(s))); });
  }
  Status memset_async(void* dst, int v, size_t n, Stream s) override {
    if (n == 0) return Status::Success;
    return MT_CUDA(cudaMemsetAsync(dst, v, n, cs(s)));
  }
  Status stream_create(int d, int priority, Stream* s) override {
    return on_device(count_, d, [&] {
      cudaStream_t st = nullptr;
      int lo = 0, hi = 0;
      ignore_error(cudaDeviceGetStreamPriorityRange(&lo, &hi));
      int p = priority < hi ? hi : (priority > lo ? lo : priority);
      Status r = MT_CUDA(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, p));
      *s = st;
      return r;
    });
  }
  Status stream_destroy(int d, Stream s) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaStreamDestroy(cs(s))); });
  }
  Status stream_synchronize(int d, Stream s) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaStreamSynchronize(cs(s))); });
  }
  Status stream_query(int d, Stream s) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaStreamQuery(cs(s))); });
  }
  Status stream_wait_event(int d, Stream s, Event e) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaStreamWaitEvent(cs(s), ce(e), 0)); });
  }
  Status event_create(int d, bool timing, Event* e) override {
    return on_device(count_, d, [&] {
      cudaEvent_t ev = nullptr;
      Status r = MT_CUDA(cudaEventCreateWithFlags(&ev, timing ? cudaEventDefault : cudaEventDisableTiming));
      *e = ev;
      return r;
    });
  }
  Status event_destroy(Event e) override { return MT_CUDA(cudaEventDestroy(ce(e))); }
  Status event_record(int d, Event e, Stream s) override {
    return on_device(count_, d, [&] { return MT_CUDA(cudaEventRecord(ce(e), cs(s))); });
  }
  Status event_query(Event e) override { return MT_CUDA(cudaEventQuery(ce(e))); }
  Status event_synchronize(Event e) override { return MT_CUDA(cudaEventSynchronize(ce(e))); }
  Status event_elapsed_ms(Event a, Event b, float* ms) override {
    return MT_CUDA(cudaEventElapsedTime(ms, ce(a), ce(b)));
  }

  // Graph capture (Note [Graph capture]): CUDA's stream capture (the emulated runtime's on emu).
  struct CudaGraph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
  };
  Status stream_begin_capture(int d, Stream s, CaptureMode mode) override {
    const cudaStreamCaptureMode m = mode == CaptureMode::Relaxed       ? cudaStreamCaptureModeRelaxed
                                    : mode == CaptureMode::ThreadLocal ? cudaStreamCaptureModeThreadLocal
                                                                       : cudaStreamCaptureModeGlobal;
    return on_device(count_, d, [&] { return MT_CUDA(cudaStreamBeginCapture(cs(s), m)); });
  }
  Status stream_end_capture(int d, Stream s, Graph* g) override {
    *g = nullptr;
    return on_device(count_, d, [&] {
      auto* cg = new CudaGraph;
      Status r = MT_CUDA(cudaStreamEndCapture(cs(s), &cg->graph));
      if (r == Status::Success) r = MT_CUDA(cudaGraphInstantiateWithFlags(&cg->exec, cg->graph, 0));
      if (r != Status::Success) {
        if (cg->graph) (void)cudaGraphDestroy(cg->graph);
        delete cg;
        return r;
      }
      *g = cg;
      return r;
    });
  }
  Status stream_is_capturing(int d, Stream s, bool* capturing) override {
    return on_device(count_, d, [&] {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      Status r = MT_CUDA(cudaStreamIsCapturing(cs(s), &st));
      *capturing = st != cudaStreamCaptureStatusNone;
      return r;
    });
  }
  Status graph_launch(Graph g, Stream s) override {
    return MT_CUDA(cudaGraphLaunch(static_cast<CudaGraph*>(g)->exec, cs(s)));
  }
  Status graph_destroy(Graph g) override {
    auto* cg = static_cast<CudaGraph*>(g);
    Status r = Status::Success;
    if (cg->exec) r = MT_CUDA(cudaGraphExecDestroy(cg->exec));
    if (cg->graph) (void)cudaGraphDestroy(cg->graph);
    delete cg;
    return r;
  }
  Status graph_debug_dump(Graph g, const char* path) override {
    return MT_CUDA(cudaGraphDebugDotPrint(static_cast<CudaGraph*>(g)->graph, path, 0));
  }
  Status graph_node_count(Graph g, size_t* count) override {
    return MT_CUDA(cudaGraphGetNodes(static_cast<CudaGraph*>(g)->graph, nullptr, count));
  }

 private:
  Status bad_device(int d) const {
    return on_device(count_, d, [] { return Status::Success; });
  }
  int count_;
  Kind kind_;
};

} // namespace

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

Backend* make_cuda_backend() {
  int n = cuda_device_count();
  if (n <= 0) {
    fail(Status::Unavailable, "no CUDA device is visible (cudaGetDeviceCount reported none or failed)");
    return nullptr;
  }
  return new CudaBackend(n, MYTORCH_EMU ? Kind::Emu : Kind::Cuda);
}

} // namespace mytorch::rt::detail
