// The simulated runtime: device memory is host memory owned by the simulator, work submitted to a stream
// runs at submission (so every stream is trivially in order, and device-wide order is submission order).
//
// Note [What the simulator checks]
// A GPU punishes some mistakes that plain host memory forgives; the simulator turns the ones it can see
// cheaply into errors instead of silent success:
//  - a free of a pointer it never handed out, and a second free of one it did (InvalidPointer);
//  - a copy or memset whose device range is not inside one live allocation (use after free, overrun);
//  - a device pointer passed where a host pointer belongs (a host read of device memory);
//  - allocations beyond the configured capacity (MYTORCH_SIM_MEMORY) fail with OutOfMemory.
//
// Note [Sharing sim memory between processes]
// CUDA lets another process map an allocation (cudaIpcGetMemHandle / cudaIpcOpenMemHandle), which is how
// torch.multiprocessing shares CUDA tensors. Sim device memory is private anonymous memory (page-mapped, so
// that it can be moved): the first export of an allocation copies it into a memory file (memfd) and maps the
// file over the same addresses, so every pointer into it stays valid. The handle carries the exporter's pid,
// the file's descriptor number and inode; the importer opens /proc/<pid>/fd/<fd> (the exporter must be alive,
// as with CUDA), checks the inode, and maps it shared. Writes on either side are seen by the other. The move
// is not atomic with respect to a kernel writing the allocation at that moment from another host thread (sim
// work runs at submission, so nothing is in flight on a stream): export before handing work to other threads.
// An imported mapping is a live device allocation of the importer (copies and kernels may use it) that only
// ipc_close_mem_handle releases.
// Configuration: MYTORCH_SIM_DEVICES (default 1), MYTORCH_SIM_MEMORY per device (default 8GiB;
// accepts a byte count or a number with K/M/G/T, optionally followed by B or iB; all binary units).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend.h"

namespace mytorch::rt::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kAlign = 256;           // what cudaMalloc guarantees
constexpr size_t kMmapThreshold = 1 << 16;
constexpr size_t kFreedHistory = 1 << 14; // remembered freed addresses, for double-free reports

struct SimStream {
  int device;
  int priority;
};

struct SimEvent {
  int device;
  bool timing;
  bool recorded = false;
  Clock::time_point when{};
};

struct Allocation {
  size_t size;
  size_t mapped;
  int device; // -1: pinned host memory
  int ipc_fd = -1;       // the memory file it lives in once exported
  uint64_t ipc_inode = 0;
  bool imported = false; // mapped from another process's export
};

struct SimIpcHandle {  // the bytes of an IpcMemHandle on sim
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t inode;
  uint64_t size;
};
static_assert(sizeof(SimIpcHandle) <= sizeof(IpcMemHandle::bytes), "SimIpcHandle does not fit");
constexpr char kIpcMagic[8] = {'m', 't', 's', 'i', 'm', 'i', 'p', 'c'};

thread_local int t_current_device = 0;

size_t parse_bytes(const char* text, size_t fallback, std::string* error) {
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || value < 0) {
    *error = std::string("MYTORCH_SIM_MEMORY must be a byte count such as 8GiB or 512MB, but got '") + text + "'";
    return fallback;
  }
  std::string unit(end);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit[0] == 'K') scale = 1024.0;
  else if (unit[0] == 'M') scale = 1024.0 * 1024;
  else if (unit[0] == 'G') scale = 1024.0 * 1024 * 1024;
  else if (unit[0] == 'T') scale = 1024.0 * 1024 * 1024 * 1024;
  else {
    *error = std::string("MYTORCH_SIM_MEMORY has an unknown unit in '") + text + "' (use K, M, G or T)";
    return fallback;
  }
  if (unit.size() > 1 && unit.substr(1) != "B" && unit.substr(1) != "IB") {
    *error = std::string("MYTORCH_SIM_MEMORY has an unknown unit in '") + text + "' (use K, M, G or T)";
    return fallback;
  }
  return static_cast<size_t>(value * scale);
}

class SimBackend final : public Backend {
 public:
  SimBackend() {
    const char* n = std::getenv("MYTORCH_SIM_DEVICES");
    num_devices_ = 1;
    if (n && *n) {
      char* end = nullptr;
      long v = std::strtol(n, &end, 10);
      if (end != n && *end == '\0' && v >= 1 && v <= 64) num_devices_ = static_cast<int>(v);
      else config_error_ = std::string("MYTORCH_SIM_DEVICES must be an integer from 1 to 64, but got '") + n + "'";
    }
    capacity_ = parse_bytes(std::getenv("MYTORCH_SIM_MEMORY"), size_t(8) << 30, &config_error_);
    used_.assign(static_cast<size_t>(num_devices_), 0);
  }

  Kind kind() const override { return Kind::Sim; }
  int device_count() override { return num_devices_; }

  Status get_device(int* device) override {
    *device = t_current_device;
    return Status::Success;
  }
  Status set_device(int device) override {
    if (Status s = check_device(device); s != Status::Success) return s;
    t_current_device = device;
    return Status::Success;
  }
  Status get_device_properties(int device, DeviceProps* p) override {
    if (Status s = check_device(device); s != Status::Success) return s;
    std::memset(p, 0, sizeof(*p));
    std::snprintf(p->name, sizeof(p->name), "mytorch sim device %d", device);
    p->total_memory = capacity_;
    p->major = 0;
    p->minor = 0;
    p->multi_processor_count = 1;
    p->warp_size = 32;
    p->l2_cache_size = 0;
    return Status::Success;
  }
  Status device_synchronize(int device) override {
    if (Status s = sim_capture_refuse_any("synchronizing the device"); s != Status::Success) return s;
    return check_device(device);
  }
  Status mem_get_info(int device, size_t* f, size_t* t) override {
    if (Status s = check_device(device); s != Status::Success) return s;
    std::lock_guard<std::mutex> g(mu_);
    *t = capacity_;
    *f = capacity_ - used_[static_cast<size_t>(device)];
    return Status::Success;
  }
  Status pointer_device(const void* ptr, int* device) override {
    std::lock_guard<std::mutex> g(mu_);
    const Allocation* a = find_locked(ptr, 1);
    if (a == nullptr) return fail(Status::InvalidPointer, "pointer is not inside any mytorch allocation");
    *device = a->device;
    return Status::Success;
  }

  Status device_malloc(int device, size_t nbytes, void** ptr) override {
    if (Status s = check_device(device); s != Status::Success) return s;
    if (!config_error_.empty()) return fail(Status::InvalidValue, config_error_);
    *ptr = nullptr;
    if (nbytes == 0) return Status::Success;
    std::lock_guard<std::mutex> g(mu_);
    size_t& used = used_[static_cast<size_t>(device)];
    if (nbytes > capacity_ - used) {
      return fail(Status::OutOfMemory, "sim device " + std::to_string(device) + " has " +
                                           std::to_string(capacity_ - used) + " bytes free of " +
                                           std::to_string(capacity_) + ", cannot allocate " + std::to_string(nbytes));
    }
    size_t mapped = 0;
    void* p = raw_alloc(nbytes, &mapped, /*page_mapped=*/true);
    if (p == nullptr) return fail(Status::OutOfMemory, "host memory backing the sim device is exhausted");
    used += nbytes;
    live_[reinterpret_cast<uintptr_t>(p)] = Allocation{nbytes, mapped, device};
    forget_freed_locked(p);
    *ptr = p;
    return Status::Success;
  }

  Status device_free(int device, void* ptr) override {
    if (ptr == nullptr) return Status::Success;
    if (Status s = sim_capture_refuse_any("freeing device memory"); s != Status::Success) return s;
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end() || it->second.device < 0) return bad_free_locked(ptr, "device");
    if (it->second.imported) {
      return fail(Status::InvalidPointer, "pointer " + hex(ptr) +
                                              " was mapped from another process: release it "
                                              "with ipc_close_mem_handle, not device_free");
    }
    if (it->second.device != device) {
      return fail(Status::InvalidPointer, "pointer " + hex(ptr) + " belongs to sim device " +
                                              std::to_string(it->second.device) + ", not device " +
                                              std::to_string(device));
    }
    used_[static_cast<size_t>(device)] -= it->second.size;
    release_locked(it);
    return Status::Success;
  }

  Status ipc_get_mem_handle(int device, void* base, IpcMemHandle* handle) override {
    if (Status s = check_device(device); s != Status::Success) return s;
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(base));
    if (it == live_.end() || it->second.device != device) {
      return fail(Status::InvalidValue, "ipc_get_mem_handle: " + hex(base) +
                                            " is not the start of a device allocation "
                                            "of sim device " +
                                            std::to_string(device));
    }
    Allocation& a = it->second;
    if (a.imported)
      return fail(Status::InvalidValue, "ipc_get_mem_handle: " + hex(base) + " was itself mapped from another process");
    if (a.ipc_fd < 0) {
      int fd = -1;
      uint64_t inode = 0;
      if (Status s = shared_file_create("mytorch-sim-ipc", a.mapped, &fd, &inode); s != Status::Success) return s;
      bool ok = true;
      for (size_t done = 0; ok && done < a.mapped;) {
        ssize_t w = pwrite(fd, static_cast<char*>(base) + done, a.mapped - done, static_cast<off_t>(done));
        ok = w > 0;
        if (ok) done += static_cast<size_t>(w);
      }
      ok = ok && mmap(base, a.mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == base;
      if (!ok) {
        const int err = errno;
        close(fd);
        return fail(Status::Unknown, std::string("moving sim allocation ") + hex(base) +
                                         " to shared memory failed: " + std::strerror(err));
      }
      a.ipc_fd = fd;
      a.ipc_inode = inode;
    }
    SimIpcHandle h{};
    std::memcpy(h.magic, kIpcMagic, sizeof(kIpcMagic));
    h.pid = static_cast<int32_t>(getpid());
    h.fd = a.ipc_fd;
    h.inode = a.ipc_inode;
    h.size = a.size;
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, &h, sizeof(h));
    return Status::Success;
  }

  Status ipc_open_mem_handle(int device, const IpcMemHandle& handle, void** ptr) override {
    if (Status s = check_device(device); s != Status::Success) return s;
    *ptr = nullptr;
    SimIpcHandle h{};
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (std::memcmp(h.magic, kIpcMagic, sizeof(kIpcMagic)) != 0) {
      return fail(Status::InvalidValue, "ipc_open_mem_handle: not a sim memory handle");
    }
    int fd = -1;
    size_t mapped = 0;
    if (Status s = shared_file_open(h.pid, h.fd, h.inode, &fd, &mapped); s != Status::Success) return s;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
      return fail(Status::OutOfMemory, std::string("ipc_open_mem_handle: mmap failed: ") + std::strerror(errno));
    std::lock_guard<std::mutex> g(mu_);
    Allocation a{static_cast<size_t>(h.size), mapped, device};
    a.imported = true;
    live_[reinterpret_cast<uintptr_t>(p)] = a;
    forget_freed_locked(p);
    *ptr = p;
    return Status::Success;
  }

  Status ipc_close_mem_handle(int device, void* ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end() || !it->second.imported || it->second.device != device) {
      return fail(Status::InvalidValue, "ipc_close_mem_handle: " + hex(ptr) +
                                            " is not a mapping opened with "
                                            "ipc_open_mem_handle on sim device " +
                                            std::to_string(device));
    }
    release_locked(it);
    return Status::Success;
  }

  Status host_malloc(size_t nbytes, void** ptr) override {
    *ptr = nullptr;
    if (Status s = sim_capture_refuse_any("allocating pinned host memory"); s != Status::Success) return s;
    if (nbytes == 0) return Status::Success;
    std::lock_guard<std::mutex> g(mu_);
    size_t mapped = 0;
    void* p = raw_alloc(nbytes, &mapped);
    if (p == nullptr)
      return fail(Status::OutOfMemory, "cannot allocate " + std::to_string(nbytes) + " bytes of host memory");
    live_[reinterpret_cast<uintptr_t>(p)] = Allocation{nbytes, mapped, -1};
    forget_freed_locked(p);
    *ptr = p;
    return Status::Success;
  }

  Status host_free(void* ptr) override {
    if (ptr == nullptr) return Status::Success;
    if (Status s = sim_capture_refuse_any("freeing pinned host memory"); s != Status::Success) return s;
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end() || it->second.device >= 0) return bad_free_locked(ptr, "pinned host");
    release_locked(it);
    return Status::Success;
  }

  Status memcpy_async(void* dst, const void* src, size_t n, CopyKind kind, Stream stream) override {
    if (n == 0) return Status::Success;
    {
      std::lock_guard<std::mutex> g(mu_);
      bool dst_dev = kind == CopyKind::HostToDevice || kind == CopyKind::DeviceToDevice;
      bool src_dev = kind == CopyKind::DeviceToHost || kind == CopyKind::DeviceToDevice;
      if (Status s = check_side_locked(dst, n, dst_dev, "destination"); s != Status::Success) return s;
      if (Status s = check_side_locked(src, n, src_dev, "source"); s != Status::Success) return s;
      if (kind == CopyKind::HostToDevice && find_locked(src, n) == nullptr)
        if (Status s = sim_capture_refuse(stream, "a copy from pageable host memory (pin it: pin_memory())");
            s != Status::Success)
          return s;
    }
    if (kind == CopyKind::DeviceToHost)
      if (Status s = sim_capture_refuse(stream, "a copy of device memory to the host (a host read)");
          s != Status::Success)
        return s;
    if (kind != CopyKind::HostToHost && recording(stream)) return record_copy(stream, dst, src, n);
    std::memmove(dst, src, n);
    return Status::Success;
  }

  // A copy recorded into the capture (the ranges were checked at capture; the graph keeps the memory alive).
  static Status record_copy(Stream stream, void* dst, const void* src, size_t n) {
    return record(stream, "memcpy", [dst, src, n] {
      std::memmove(dst, src, n);
      return Status::Success;
    });
  }

  Status memcpy_peer_async(void* dst, int dd, const void* src, int sd, size_t n, Stream stream) override {
    if (Status s = check_device(dd); s != Status::Success) return s;
    if (Status s = check_device(sd); s != Status::Success) return s;
    if (n == 0) return Status::Success;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (Status s = check_side_locked(dst, n, true, "destination"); s != Status::Success) return s;
      if (Status s = check_side_locked(src, n, true, "source"); s != Status::Success) return s;
    }
    if (recording(stream)) return record_copy(stream, dst, src, n);
    std::memmove(dst, src, n);
    return Status::Success;
  }

  Status memset_async(void* dst, int value, size_t n, Stream stream) override {
    if (n == 0) return Status::Success;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (Status s = check_side_locked(dst, n, true, "destination"); s != Status::Success) return s;
    }
    if (recording(stream)) {
      return record(stream, "memset", [dst, value, n] {
        std::memset(dst, value, n);
        return Status::Success;
      });
    }
    std::memset(dst, value, n);
    return Status::Success;
  }

  Status stream_create(int device, int priority, Stream* s) override {
    if (Status st = check_device(device); st != Status::Success) return st;
    *s = new SimStream{device, priority};
    return Status::Success;
  }
  Status stream_destroy(int, Stream s) override {
    delete static_cast<SimStream*>(s);
    return Status::Success;
  }
  // Work runs at submission, so a stream is always idle by the time anyone can ask.
  Status stream_synchronize(int device, Stream) override {
    if (Status s = sim_capture_refuse_any("synchronizing a stream"); s != Status::Success) return s;
    return check_device(device);
  }
  Status stream_query(int device, Stream) override {
    if (Status s = sim_capture_refuse_any("querying a stream"); s != Status::Success) return s;
    return check_device(device);
  }
  Status stream_wait_event(int device, Stream, Event e) override {
    if (e == nullptr) return fail(Status::InvalidValue, "stream_wait_event: null event");
    return check_device(device);
  }
  Status event_create(int device, bool timing, Event* e) override {
    if (Status st = check_device(device); st != Status::Success) return st;
    *e = new SimEvent{device, timing};
    return Status::Success;
  }
  Status event_destroy(Event e) override {
    delete static_cast<SimEvent*>(e);
    return Status::Success;
  }
  Status event_record(int device, Event e, Stream s) override {
    auto* ev = static_cast<SimEvent*>(e);
    if (ev == nullptr) return fail(Status::InvalidValue, "event_record: null event");
    int stream_device = s ? static_cast<SimStream*>(s)->device : device;
    if (ev->device != stream_device) {
      return fail(Status::InvalidValue, "event on sim device " + std::to_string(ev->device) +
                                            " cannot be recorded on a stream of device " +
                                            std::to_string(stream_device));
    }
    if (recording(s)) {
      return record(s, "event_record", [ev] {
        ev->recorded = true;
        ev->when = Clock::now();
        return Status::Success;
      });
    }
    ev->recorded = true;
    ev->when = Clock::now();
    return Status::Success;
  }
  Status event_query(Event) override { return sim_capture_refuse_any("querying an event"); }
  Status event_synchronize(Event) override { return sim_capture_refuse_any("synchronizing an event"); }

  Status stream_begin_capture(int device, Stream s, CaptureMode mode) override {
    if (Status st = check_device(device); st != Status::Success) return st;
    return sim_begin_capture(device, s, mode);
  }
  Status stream_end_capture(int device, Stream s, Graph* g) override { return sim_end_capture(device, s, g); }
  Status stream_is_capturing(int device, Stream s, bool* capturing) override {
    *capturing = recording(s);
    return check_device(device);
  }
  Status graph_launch(Graph g, Stream) override { return sim_graph_launch(g); }
  Status graph_destroy(Graph g) override { return sim_graph_destroy(g); }
  Status graph_debug_dump(Graph g, const char* path) override { return sim_graph_debug_dump(g, path); }
  Status graph_node_count(Graph g, size_t* count) override { return sim_graph_node_count(g, count); }
  Status event_elapsed_ms(Event a, Event b, float* ms) override {
    auto* ea = static_cast<SimEvent*>(a);
    auto* eb = static_cast<SimEvent*>(b);
    if (ea == nullptr || eb == nullptr) return fail(Status::InvalidValue, "elapsed time needs two events");
    if (!ea->timing || !eb->timing) {
      return fail(Status::InvalidValue, "both events must be created with enable_timing=True to measure elapsed time");
    }
    if (!ea->recorded || !eb->recorded) {
      return fail(Status::InvalidValue, "both events must be recorded before measuring elapsed time");
    }
    *ms = std::chrono::duration<float, std::milli>(eb->when - ea->when).count();
    return Status::Success;
  }

 private:
  Status check_device(int device) const {
    if (device < 0 || device >= num_devices_) {
      return fail(Status::InvalidDevice, "device index " + std::to_string(device) +
                                             " is out of range: the sim runtime has " + std::to_string(num_devices_) +
                                             " device(s) (MYTORCH_SIM_DEVICES)");
    }
    return Status::Success;
  }

  static std::string hex(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", p);
    return buf;
  }

  static void* raw_alloc(size_t n, size_t* mapped, bool page_mapped = false) {
    if (page_mapped || n >= kMmapThreshold) {
      size_t len = (n + 4095) & ~size_t(4095);
      void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return nullptr;
      *mapped = len;
      return p;
    }
    *mapped = 0;
    return std::aligned_alloc(kAlign, (n + kAlign - 1) & ~(kAlign - 1));
  }

  void release_locked(std::map<uintptr_t, Allocation>::iterator it) {
    void* p = reinterpret_cast<void*>(it->first);
    if (it->second.mapped) munmap(p, it->second.mapped);
    else std::free(p);
    if (it->second.ipc_fd >= 0) close(it->second.ipc_fd);
    live_.erase(it);
    freed_.insert(p);
    freed_order_.push_back(p);
    if (freed_order_.size() > kFreedHistory) {
      freed_.erase(freed_order_.front());
      freed_order_.pop_front();
    }
  }

  void forget_freed_locked(void* p) {
    if (freed_.erase(p)) freed_order_.erase(std::find(freed_order_.begin(), freed_order_.end(), p));
  }

  Status bad_free_locked(void* ptr, const char* what) {
    if (freed_.count(ptr))
      return fail(Status::InvalidPointer, std::string("double free of ") + what + " pointer " + hex(ptr));
    return fail(Status::InvalidPointer, std::string("free of unknown ") + what + " pointer " + hex(ptr) +
                                            " (it was not returned by this runtime's allocator)");
  }

  const Allocation* find_locked(const void* ptr, size_t n) const {
    auto addr = reinterpret_cast<uintptr_t>(ptr);
    auto it = live_.upper_bound(addr);
    if (it == live_.begin()) return nullptr;
    --it;
    if (addr + n > it->first + it->second.size) return nullptr;
    return &it->second;
  }

  Status check_side_locked(const void* p, size_t n, bool device_side, const char* which) const {
    const Allocation* a = find_locked(p, n);
    if (device_side) {
      if (a == nullptr || a->device < 0) {
        return fail(Status::InvalidPointer,
                    std::string("copy ") + which + " [" + hex(p) + ", +" + std::to_string(n) +
                        ") is not inside a live device allocation (use after free or out of bounds)");
      }
    } else if (a != nullptr && a->device >= 0) {
      return fail(Status::InvalidPointer,
                  std::string("copy ") + which + " " + hex(p) + " is device memory but was passed as host memory");
    }
    return Status::Success;
  }

  int num_devices_ = 1;
  size_t capacity_ = 0;
  std::string config_error_;
  std::mutex mu_;
  std::vector<size_t> used_;
  std::map<uintptr_t, Allocation> live_;
  std::unordered_set<void*> freed_;
  std::deque<void*> freed_order_;
};

} // namespace

Backend* make_sim_backend() { return new SimBackend(); }

} // namespace mytorch::rt::detail
