// Runtime selection (MYTORCH_RUNTIME=auto|cuda|sim), fork detection, per-thread error text, and the
// forwarding of runtime.h to the chosen backend.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backend.h"
#include "mytorch/once.h"

#if MYTORCH_EMU
namespace mytorch::emu {
bool primary_context_active(int device); // kernels/emu/runtime_api.cpp
namespace trace {
bool set_file(const char* path); // kernels/emu/trace.cpp
}
} // namespace mytorch::emu
#endif

namespace mytorch::rt {
namespace detail {

namespace {
thread_local std::string t_last_error;
Once g_init_once;  // Note [Once, cheaply]
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};
Backend* g_backend = nullptr; // never destroyed: tensors may be freed during interpreter teardown
Status g_init_status = Status::Success;
std::string g_init_error;

void on_fork_child() {
  if (g_initialized.load()) g_bad_fork.store(true);
}

void refuse(std::string message) {
  g_init_status = Status::Unavailable;
  g_init_error = std::move(message);
}

#if MYTORCH_WITH_CUDA
// The cuda backend: on a GPU, or over the emulated runtime in the MYTORCH_EMU build.
void start_cuda(const char* failure) {
  g_backend = make_cuda_backend();
  if (g_backend == nullptr) refuse(std::string(failure) + t_last_error);
}
#endif

void do_init() {
  pthread_atfork(nullptr, nullptr, &on_fork_child);
  const char* env = std::getenv("MYTORCH_RUNTIME");
  std::string want = env ? env : "auto";
  if (want.empty()) want = "auto";
  if (want != "auto" && want != "cuda" && want != "sim" && want != "emu") {
    g_init_status = Status::InvalidValue;
    g_init_error = "MYTORCH_RUNTIME must be one of auto, cuda, sim, emu, but got '" + want + "'";
    return;
  }
#if MYTORCH_EMU
  if (want == "cuda")
    return refuse(
        "MYTORCH_RUNTIME=cuda but this is the emulated CUDA build of mytorch (MYTORCH_EMU): use "
        "MYTORCH_RUNTIME=emu, or a build made with the CUDA toolkit for a GPU");
  if (want != "sim") return start_cuda("the emulated cuda runtime cannot start: ");  // auto or emu
#else
  if (want == "emu")
    return refuse(
        "MYTORCH_RUNTIME=emu but this build of mytorch is not the emulated CUDA build "
        "(build it with MYTORCH_EMU=1: bash scripts/emu.sh)");
#if MYTORCH_WITH_CUDA
  if (want == "cuda" || (want == "auto" && cuda_device_count() > 0))
    return start_cuda("MYTORCH_RUNTIME=cuda but the cuda runtime cannot start: ");
#else
  if (want == "cuda")
    return refuse(
        "MYTORCH_RUNTIME=cuda but this build of mytorch has no CUDA support "
        "(rebuild with the CUDA toolkit present and MYTORCH_CUDA unset or 1)");
#endif
#endif
  g_backend = make_sim_backend();
}
} // namespace

Status fail(Status s, std::string message) {
  t_last_error = std::move(message);
  return s;
}

// Returns the backend, or nullptr with the error recorded.
static Backend* backend_or_fail(Status* st) {
  g_init_once(do_init);
  if (!g_initialized.load(std::memory_order_relaxed)) g_initialized.store(true);  // no fence on every launch
  if (g_bad_fork.load()) {
    *st = fail(Status::Forked,
               "cannot re-initialize mytorch in a forked subprocess: the parent process had already "
               "initialised the device. To use mytorch with multiprocessing, use the 'spawn' start method");
    return nullptr;
  }
  if (g_backend == nullptr) {
    *st = fail(g_init_status, g_init_error);
    return nullptr;
  }
  return g_backend;
}

} // namespace detail

using detail::backend_or_fail;

#define MT_FORWARD(call)                     \
  Status st = Status::Success;               \
  detail::Backend* b = backend_or_fail(&st); \
  if (b == nullptr) return st;               \
  return b->call;

Status init() {
  Status st = Status::Success;
  return backend_or_fail(&st) ? Status::Success : st;
}
bool initialized() { return detail::g_initialized.load(); }
bool in_bad_fork() { return detail::g_bad_fork.load(); }
Kind kind() {
  // Must not touch the thread's error text: callers format it right after asking for the kind.
  detail::g_init_once(detail::do_init);
  return detail::g_backend ? detail::g_backend->kind() : Kind::Sim;
}
const char* kind_name() {
  detail::g_init_once(detail::do_init);
  if (detail::g_backend == nullptr) return "unavailable";
  switch (detail::g_backend->kind()) {
    case Kind::Cuda: return "cuda";
    case Kind::Emu: return "emu";
    case Kind::Sim: return "sim";
  }
  return "sim";
}
bool built_with_cuda() { return MYTORCH_WITH_CUDA != 0; }
const EmuHooks* emu_hooks() {
#if MYTORCH_EMU
  static const EmuHooks hooks{&emu::primary_context_active, &emu::trace::set_file};
  return &hooks;
#else
  return nullptr;
#endif
}
Status report(Status s, const char* message) { return detail::fail(s, message); }
const char* last_error() { return detail::t_last_error.c_str(); }

const char* status_name(Status s) {
  switch (s) {
    case Status::Success: return "success";
    case Status::InvalidValue: return "invalid value";
    case Status::OutOfMemory: return "out of memory";
    case Status::InvalidDevice: return "invalid device";
    case Status::InvalidPointer: return "invalid pointer";
    case Status::NotReady: return "not ready";
    case Status::Unavailable: return "runtime unavailable";
    case Status::Forked: return "used after fork";
    case Status::Unknown: return "unknown error";
  }
  return "unknown error";
}

int device_count() noexcept {
  // Must not throw and must not create a context; a failed init reports zero devices.
  Status st = Status::Success;
  detail::Backend* b = nullptr;
  try {
    detail::g_init_once(detail::do_init);
    b = detail::g_backend;
  } catch (...) {
    return 0;
  }
  (void)st;
  return b ? b->device_count() : 0;
}

Status get_device(int* device) { MT_FORWARD(get_device(device)); }
Status set_device(int device) { MT_FORWARD(set_device(device)); }
Status maybe_set_device(int device) { MT_FORWARD(maybe_set_device(device)); }
Status get_device_properties(int device, DeviceProps* props) { MT_FORWARD(get_device_properties(device, props)); }
Status device_synchronize(int device) { MT_FORWARD(device_synchronize(device)); }
Status mem_get_info(int device, size_t* f, size_t* t) { MT_FORWARD(mem_get_info(device, f, t)); }
Status pointer_device(const void* ptr, int* device) { MT_FORWARD(pointer_device(ptr, device)); }
Status device_malloc(int device, size_t nbytes, void** ptr) { MT_FORWARD(device_malloc(device, nbytes, ptr)); }
Status device_free(int device, void* ptr) { MT_FORWARD(device_free(device, ptr)); }
Status host_malloc(size_t nbytes, void** ptr) { MT_FORWARD(host_malloc(nbytes, ptr)); }
Status host_free(void* ptr) { MT_FORWARD(host_free(ptr)); }
Status ipc_get_mem_handle(int device, void* base, IpcMemHandle* h) { MT_FORWARD(ipc_get_mem_handle(device, base, h)); }
Status ipc_open_mem_handle(int device, const IpcMemHandle& h, void** ptr) {
  MT_FORWARD(ipc_open_mem_handle(device, h, ptr));
}
Status ipc_close_mem_handle(int device, void* ptr) { MT_FORWARD(ipc_close_mem_handle(device, ptr)); }
Status shared_file_create(const char* name, size_t size, int* fd, uint64_t* inode) {
  *fd = memfd_create(name, MFD_CLOEXEC);
  if (*fd < 0) return detail::fail(Status::Unknown, std::string("memfd_create failed: ") + std::strerror(errno));
  struct stat st{};
  if (ftruncate(*fd, static_cast<off_t>(size)) != 0 || fstat(*fd, &st) != 0) {
    const int err = errno;
    close(*fd);
    *fd = -1;
    return detail::fail(Status::OutOfMemory, std::string("sizing a shared memory file failed: ") + std::strerror(err));
  }
  *inode = static_cast<uint64_t>(st.st_ino);
  return Status::Success;
}
bool process_exited(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char stat[512];
  const ssize_t n = read(fd, stat, sizeof(stat) - 1);
  close(fd);
  if (n <= 0) return true;
  stat[n] = '\0';
  const char* close_paren = std::strrchr(stat, ')');  // the command name may hold anything but ends there
  if (close_paren == nullptr || close_paren[1] == '\0' || close_paren[2] == '\0') return false;
  return close_paren[2] == 'Z' || close_paren[2] == 'X';
}

Status shared_file_open(int pid, int fd, uint64_t inode, int* out_fd, size_t* size) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  *out_fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (*out_fd < 0) {
    return detail::fail(Status::InvalidValue, "cannot open the exporting process's shared memory (" + path + ": " +
                                                  std::strerror(errno) + "); it must still be running");
  }
  struct stat st{};
  if (fstat(*out_fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != inode) {
    close(*out_fd);
    *out_fd = -1;
    return detail::fail(Status::InvalidValue,
                        "the exporting process no longer holds that shared memory (" + path + ")");
  }
  *size = static_cast<size_t>(st.st_size);
  return Status::Success;
}
Status memcpy_async(void* dst, const void* src, size_t n, CopyKind k, Stream s) {
  MT_FORWARD(memcpy_async(dst, src, n, k, s));
}
Status memcpy_peer_async(void* dst, int dd, const void* src, int sd, size_t n, Stream s) {
  MT_FORWARD(memcpy_peer_async(dst, dd, src, sd, n, s));
}
Status memset_async(void* dst, int value, size_t n, Stream s) { MT_FORWARD(memset_async(dst, value, n, s)); }
Status stream_create(int device, int priority, Stream* s) { MT_FORWARD(stream_create(device, priority, s)); }
Status stream_destroy(int device, Stream s) { MT_FORWARD(stream_destroy(device, s)); }
Status stream_synchronize(int device, Stream s) { MT_FORWARD(stream_synchronize(device, s)); }
Status stream_query(int device, Stream s) { MT_FORWARD(stream_query(device, s)); }
Status stream_wait_event(int device, Stream s, Event e) { MT_FORWARD(stream_wait_event(device, s, e)); }
Status event_create(int device, bool timing, Event* e) { MT_FORWARD(event_create(device, timing, e)); }
Status event_destroy(Event e) { MT_FORWARD(event_destroy(e)); }
Status event_record(int device, Event e, Stream s) { MT_FORWARD(event_record(device, e, s)); }
Status event_query(Event e) { MT_FORWARD(event_query(e)); }
Status event_synchronize(Event e) { MT_FORWARD(event_synchronize(e)); }
Status stream_begin_capture(int device, Stream s, CaptureMode mode) {
  MT_FORWARD(stream_begin_capture(device, s, mode));
}
Status stream_end_capture(int device, Stream s, Graph* g) { MT_FORWARD(stream_end_capture(device, s, g)); }
Status stream_is_capturing(int device, Stream s, bool* c) { MT_FORWARD(stream_is_capturing(device, s, c)); }
Status graph_launch(Graph g, Stream s) { MT_FORWARD(graph_launch(g, s)); }
Status graph_destroy(Graph g) { MT_FORWARD(graph_destroy(g)); }
Status graph_debug_dump(Graph g, const char* path) { MT_FORWARD(graph_debug_dump(g, path)); }
Status graph_node_count(Graph g, size_t* count) { MT_FORWARD(graph_node_count(g, count)); }
Status capture_refuse(Stream s, const char* what) {
  return kind() == Kind::Sim ? detail::sim_capture_refuse(s, what) : Status::Success;
}
Status graph_set_philox(Graph g, int slot, uint64_t seed, uint64_t base) {
  if (kind() != Kind::Sim)
    return detail::fail(Status::Unavailable, "random numbers in a captured graph are supported on sim only so far");
  return detail::sim_graph_set_philox(g, slot, seed, base);
}
Status event_elapsed_ms(Event a, Event b2, float* ms) {
  Status st = Status::Success;
  detail::Backend* b = backend_or_fail(&st);
  if (b == nullptr) return st;
  return b->event_elapsed_ms(a, b2, ms);
}

} // namespace mytorch::rt
