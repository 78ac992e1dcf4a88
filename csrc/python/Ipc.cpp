// Sharing mytorch tensors between processes: what torch.multiprocessing's reductions call for a mytorch tensor
// (python/mytorch/backend/ipc.py), the counterpart of Storage._share_cuda_ / _new_shared_cuda.
//
// Note [Sharing mytorch tensors between processes]
// As with CUDA IPC, a tensor is sent as a handle to the runtime allocation (the allocator's segment) that
// holds its storage, plus the storage's offset and size in it; the receiver maps the allocation once per
// process (rt::ipc_open_mem_handle, cached by handle) and builds a storage over it that it cannot resize. Both
// processes then read and write the same device memory.
//
// The sender must not reuse the memory while a receiver holds it. As torch.cuda does (CudaIPCSentData and its
// reference-count file), every send takes a counter in a shared memory file of the sender's and keeps a
// reference to the storage; the receiver's storage decrements the counter when it dies, and the sender drops
// its reference once the counter is 0, at the next send or at torch.mytorch.ipc_collect(). The receiver gets
// the data as of the send: the sender synchronizes its current stream first (CUDA sends an event to wait on
// instead). A tensor received from another process cannot be sent on (clone it); a storage the caching
// allocator does not own cannot be sent.
#include <sys/mman.h>
#include <unistd.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

namespace py = pybind11;

using Counter = std::atomic<int64_t>;
static_assert(sizeof(Counter) == sizeof(int64_t) && Counter::is_always_lock_free,
              "counters must be plain shared words");
constexpr size_t kSlots = size_t(1) << 16;  // tensors in flight from one process

c10::Device deviceOf(int index) {
  return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
}

Counter* mapCounters(int fd) {
  void* p = mmap(nullptr, kSlots * sizeof(Counter), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  TORCH_CHECK(p != MAP_FAILED, "mytorch IPC: cannot map the reference counts: ", std::strerror(errno));
  return static_cast<Counter*>(p);
}

// The sending side: the counter file and the storages kept alive for receivers.
class Sender {
 public:
  // (handle, offset of the storage in the allocation, pid, counter file fd and inode, slot)
  py::tuple share(const at::Tensor& t) {
    const c10::Storage& storage = t.storage();
    const int device = t.device().index();
    TORCH_CHECK(storage.data_ptr().get_deleter() == deviceAllocator()->raw_deleter(),
                "mytorch IPC: only tensors whose memory mytorch's allocator owns can be shared with another process; "
                "this one's storage came from elsewhere (a tensor received from another process cannot be sent on: "
                "clone() it first)");
    void* data = storage.mutable_data();
    auto [base, size] = deviceAllocator()->segmentOf(data, static_cast<c10::DeviceIndex>(device));
    TORCH_CHECK(base != nullptr, "mytorch IPC: the tensor's memory is not in an allocation of mytorch:", device);
    // Synchronize first: the sim and emulated runtimes move an allocation into a memory file at its first export
    // (Note [Sharing sim memory between processes]), and a kernel still writing it then loses its writes.
    MT_RT_CHECK(rt::stream_synchronize(device, nativeHandle(currentStream(static_cast<c10::DeviceIndex>(device)))));
    rt::IpcMemHandle handle{};
    MT_RT_CHECK(rt::ipc_get_mem_handle(device, base, &handle));
    std::lock_guard<std::mutex> lock(mu_);
    collectLocked();
    if (counters_ == nullptr) {
      MT_RT_CHECK(rt::shared_file_create("mytorch-ipc-refcounts", kSlots * sizeof(Counter), &fd_, &inode_));
      counters_ = mapCounters(fd_);
      for (size_t i = kSlots; i > 0; --i) free_.push_back(i - 1);
    }
    TORCH_CHECK(!free_.empty(), "mytorch IPC: ", kSlots, " tensors sent and not yet released by their receivers");
    const size_t slot = free_.back();
    free_.pop_back();
    counters_[slot].store(1, std::memory_order_release);
    sent_.emplace_back(slot, storage);
    const int64_t offset = static_cast<char*>(data) - static_cast<char*>(base);
    return py::make_tuple(py::bytes(reinterpret_cast<const char*>(handle.bytes), sizeof(handle.bytes)), offset,
                          static_cast<int64_t>(getpid()), fd_, inode_, slot);
  }

  // A handle opened in the process that sent it: the storage itself (the send's reference is released).
  c10::Storage takeOwn(size_t slot) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [s, storage] : sent_) {
      if (s == slot) {
        counters_[slot].fetch_sub(1, std::memory_order_acq_rel);
        return storage;
      }
    }
    TORCH_CHECK(false, "mytorch IPC: this process has no tensor in flight under that handle (was it received twice?)");
  }

  size_t collect() {
    std::lock_guard<std::mutex> lock(mu_);
    collectLocked();
    return sent_.size();
  }

 private:
  void collectLocked() {
    for (auto it = sent_.begin(); it != sent_.end();) {
      if (counters_[it->first].load(std::memory_order_acquire) <= 0) {
        free_.push_back(it->first);
        it = sent_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::mutex mu_;
  int fd_ = -1;
  uint64_t inode_ = 0;
  Counter* counters_ = nullptr;
  std::vector<size_t> free_;
  std::vector<std::pair<size_t, c10::Storage>> sent_;
};

Sender& sender() {
  static Sender* s = new Sender();  // leaked: storages it keeps may outlive static destruction order
  return *s;
}

// The receiving side: one mapping per sender allocation, one counter file per sender.
struct Received {
  std::string key;
  int device;
  Counter* counter;
};

class Receiver {
 public:
  at::Tensor open(const std::string& handle_bytes, int device, int64_t offset, int64_t nbytes, int64_t pid, int fd,
                  uint64_t inode, size_t slot) {
    TORCH_CHECK(handle_bytes.size() == sizeof(rt::IpcMemHandle::bytes), "mytorch IPC: malformed memory handle");
    TORCH_CHECK(slot < kSlots, "mytorch IPC: malformed reference slot ", slot);
    c10::DeviceGuard guard(deviceOf(device));
    if (pid == static_cast<int64_t>(getpid())) return asTensor(sender().takeOwn(slot), device);
    std::lock_guard<std::mutex> lock(mu_);
    Counter* counter = countersOf(static_cast<int>(pid), fd, inode);
    const std::string key = std::to_string(device) + ":" + handle_bytes;
    auto it = maps_.find(key);
    if (it == maps_.end()) {
      rt::IpcMemHandle handle{};
      std::memcpy(handle.bytes, handle_bytes.data(), sizeof(handle.bytes));
      void* base = nullptr;
      MT_RT_CHECK(rt::ipc_open_mem_handle(device, handle, &base));
      it = maps_.emplace(key, std::make_pair(base, int64_t(0))).first;
    }
    it->second.second += 1;
    auto* ctx = new Received{key, device, counter + slot};
    c10::DataPtr ptr(static_cast<char*>(it->second.first) + offset, ctx, &release, deviceOf(device));
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes), std::move(ptr),
                         /*allocator=*/nullptr, /*resizable=*/false);
    return asTensor(storage, device);
  }

  static void release(void* p) {
    auto* r = static_cast<Received*>(p);
    r->counter->fetch_sub(1, std::memory_order_acq_rel);
    Receiver& self = receiver();
    std::lock_guard<std::mutex> lock(self.mu_);
    auto it = self.maps_.find(r->key);
    if (it != self.maps_.end() && --it->second.second == 0) {
      (void)rt::ipc_close_mem_handle(r->device, it->second.first);  // at exit the runtime may be gone already
      self.maps_.erase(it);
    }
    delete r;
  }

  static Receiver& receiver() {
    static Receiver* r = new Receiver();  // leaked: storages may die during static destruction
    return *r;
  }

 private:
  static at::Tensor asTensor(const c10::Storage& storage, int device) {
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(deviceOf(device)));
    t.set_(storage);
    return t;
  }

  Counter* countersOf(int pid, int fd, uint64_t inode) {
    const auto key = std::make_tuple(pid, fd, inode);
    auto it = files_.find(key);
    if (it != files_.end()) return it->second;
    int local = -1;
    size_t size = 0;
    MT_RT_CHECK(rt::shared_file_open(pid, fd, inode, &local, &size));
    if (size < kSlots * sizeof(Counter)) {
      close(local);
      TORCH_CHECK(false, "mytorch IPC: the sender's reference counts are not a mytorch file");
    }
    Counter* counters = mapCounters(local);
    close(local);
    files_.emplace(key, counters);
    return counters;
  }

  std::mutex mu_;
  std::map<std::string, std::pair<void*, int64_t>> maps_;  // device:handle -> (mapping, storages over it)
  std::map<std::tuple<int, int, uint64_t>, Counter*> files_;
};

} // namespace

void addIpcBindings(py::module& m) {
  m.def(
      "_ipc_share", [](const at::Tensor& t) { return sender().share(t); },
      "The handle of a mytorch tensor's storage for another process (Note [Sharing mytorch tensors between "
      "processes])");
  m.def(
      "_ipc_open",
      [](py::bytes handle, int device, int64_t offset, int64_t nbytes, int64_t pid, int fd, uint64_t inode,
         size_t slot) {
        return Receiver::receiver().open(std::string(handle), device, offset, nbytes, pid, fd, inode, slot);
      },
      "A uint8 tensor over the storage a handle from _ipc_share names");
  m.def(
      "_ipc_collect", [] { return sender().collect(); },
      "Releases the storages every receiver has let go of; returns how many are still held");
}

} // namespace mytorch
