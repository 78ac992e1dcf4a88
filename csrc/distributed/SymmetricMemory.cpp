// Note [Symmetric memory on mytorch]
// torch.distributed's symmetric memory (torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp) for the mytorch
// device, on every runtime through the device API's IPC (rt::ipc_*: CUDA IPC on a GPU, the sim's shared memory
// files on sim and the emulated build, Note [Sharing sim memory between processes]):
//  - alloc: one block of the caching allocator (so it counts in torch.mytorch.memory_stats), the buffer rounded
//    up to 16 bytes followed by the signal pad (torch's configurable pad size), the pad zeroed;
//  - rendezvous (collective over the group's store, cached per (allocation, group)): every rank exports the
//    allocator segment its block lies in, publishes {handle, offset, pad offset, size, pid, host, global rank},
//    opens every peer's segment, and waits until all ranks have opened theirs before returning (the sim's export
//    is reopened through the exporter's /proc/<pid>/fd, so the exporter must be alive until then). Ranks on
//    another host are refused: there is no direct access to their memory.
//  - the handle keeps the peers' buffer and pad pointers on the host and as device arrays (for the kernels), the
//    rank map, and closes the peers' mappings when it dies;
//  - barrier / put_signal / wait_signal are the symm_signal kernel on the current stream (the sim twin on
//    sim). timeout_ms 0 means the group store's timeout (torch's CUDA kernels would wait forever; a peer that
//    died must not hang the caller), and the kernels of the symm_mem ops use the same. A timeout is a device-side
//    error: raised at once on sim, at the next synchronisation on a device (Note [Device-side errors]).
// Multicast is reported absent. The group comes from torch's group info (set_group_info) when set, else from
// the process group of that name when it is a mytorch one (torch 2.13 no longer asks for enable_symm_mem_for_group).
#include "csrc/distributed/SymmetricMemory.h"

#include <unistd.h>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "csrc/core/TorchVersion.h"
#include "csrc/distributed/ProcessGroupMytorch.hpp"
#include "mytorch/runtime.h"

namespace mytorch::dist {
namespace c10sm = c10d::symmetric_memory;
namespace {

constexpr size_t kBufferAlign = 16;

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

c10::DeviceIndex resolveDevice(int index) {
  if (index >= 0) return static_cast<c10::DeviceIndex>(index);
  int d = 0;
  MT_RT_CHECK(rt::get_device(&d));
  return static_cast<c10::DeviceIndex>(d);
}

// What a rank publishes at a rendezvous.
struct Published {
  rt::IpcMemHandle handle;
  int64_t offset;      // of the buffer in the exported segment
  int64_t pad_offset;  // of the signal pad from the buffer
  int64_t size;
  int32_t pid;
  int32_t global_rank;
  char host[128];
};

std::string hostIdentity() {
  char name[64] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(name) + "/" + boot;
}

int globalRank(int rank) {
  const char* r = std::getenv("RANK");
  if (r == nullptr || *r == '\0') return rank;
  char* end = nullptr;
  const long v = std::strtol(r, &end, 10);
  return end != r && *end == '\0' && v >= 0 ? static_cast<int>(v) : rank;
}

c10::DataPtr deviceArray(const void* host, size_t bytes, c10::DeviceIndex device) {
  c10::DataPtr p = deviceAllocator()->allocate(bytes);
  MT_RT_CHECK(rt::memcpy_async(p.get(), host, bytes, rt::CopyKind::HostToDevice, nativeHandle(currentStream(device))));
  MT_RT_CHECK(rt::stream_synchronize(device, nativeHandle(currentStream(device))));
  return p;
}

template <typename T>
std::vector<uint8_t> bytesOf(const T& v) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

// Exchanges this rank's record for every rank's (collective over store).
std::vector<Published> exchange(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                const std::string& key, const Published& mine) {
  store->set(key + "/" + std::to_string(rank), bytesOf(mine));
  std::vector<Published> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const std::vector<uint8_t> b = store->get(key + "/" + std::to_string(r));
    TORCH_CHECK(b.size() == sizeof(Published), "symmetric memory: rank ", r, " published a record of ", b.size(),
                " bytes at ", key, " (a different mytorch build?)");
    std::memcpy(&all[static_cast<size_t>(r)], b.data(), sizeof(Published));
  }
  return all;
}

void storeBarrier(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world, const std::string& key) {
  store->set(key + "/" + std::to_string(rank), std::vector<uint8_t>{1});
  for (int r = 0; r < world; ++r) (void)store->get(key + "/" + std::to_string(r));
}

// Rendezvous of the block at `ptr` (size bytes, then the pad): every rank's buffer and pad mapped here.
c10::intrusive_ptr<MytorchSymmetricMemory> rendezvousOver(void* ptr, size_t size, size_t pad_size,
                                                          c10::DeviceIndex device,
                                                          const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int world, const std::string& key) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  auto [base, seg] = deviceAllocator()->segmentOf(ptr, device);
  TORCH_CHECK(base != nullptr, "symmetric memory: ", ptr, " is not memory of mytorch:", static_cast<int>(device));
  // The sim and emulated runtimes move an allocation into a memory file at its first export: nothing may be
  // writing it then.
  MT_RT_CHECK(rt::stream_synchronize(device, nativeHandle(currentStream(device))));
  Published mine{};
  MT_RT_CHECK(rt::ipc_get_mem_handle(device, base, &mine.handle));
  mine.offset = static_cast<char*>(ptr) - static_cast<char*>(base);
  mine.pad_offset = static_cast<int64_t>(alignUp(size, kBufferAlign));
  mine.size = static_cast<int64_t>(size);
  mine.pid = static_cast<int32_t>(getpid());
  mine.global_rank = globalRank(rank);
  std::snprintf(mine.host, sizeof(mine.host), "%s", hostIdentity().c_str());
  TORCH_CHECK_VALUE(world <= kSymmMaxWorld, "symmetric memory on mytorch takes groups of up to ", kSymmMaxWorld,
                    " ranks, got ", world);
  const std::vector<Published> all = exchange(store, rank, world, key, mine);
  std::vector<MytorchSymmetricMemory::Peer> peers(static_cast<size_t>(world));
  std::exception_ptr failure;
  for (int r = 0; r < world && !failure; ++r) {
    const Published& p = all[static_cast<size_t>(r)];
    auto& peer = peers[static_cast<size_t>(r)];
    peer.pid = p.pid;
    peer.global_rank = p.global_rank;
    try {
      TORCH_CHECK(std::strncmp(p.host, mine.host, sizeof(p.host)) == 0, "symmetric memory on mytorch needs every ",
                  "rank of the group on one host: rank ", r, " runs on ", p.host, ", rank ", rank, " on ", mine.host);
      TORCH_CHECK(p.size == mine.size, "symmetric memory: rank ", r, " allocated ", p.size, " bytes but rank ", rank,
                  " allocated ", mine.size, " (every rank must allocate the same size)");
      if (r == rank) {
        peer.buffer = ptr;
      } else {
        MT_RT_CHECK(rt::ipc_open_mem_handle(device, p.handle, &peer.mapping));
        peer.buffer = static_cast<char*>(peer.mapping) + p.offset;
      }
      peer.pad = reinterpret_cast<uint32_t*>(static_cast<char*>(peer.buffer) + p.pad_offset);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // Every rank has opened every export before any returns (and may free its block).
  storeBarrier(store, rank, world, key + "/opened");
  if (failure) {
    for (auto& p : peers)
      if (p.mapping != nullptr) (void)rt::ipc_close_mem_handle(device, p.mapping);
    std::rethrow_exception(failure);
  }
  return c10::make_intrusive<MytorchSymmetricMemory>(
      std::move(peers), rank, size, pad_size, c10::Device(c10::DeviceType::PrivateUse1, device), store->getTimeout());
}

struct Block {
  c10::DataPtr data;
  size_t size;
  c10::DeviceIndex device;
  std::map<std::string, c10::intrusive_ptr<MytorchSymmetricMemory>> handles;  // by group
};

// Where a group's rank, size and store come from (see the Note).
c10sm::GroupInfo groupInfo(const std::string& name) {
  try {
    return c10sm::get_group_info(name);
  } catch (const c10::Error&) {}
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  try {
    pg = c10d::resolve_process_group(name);
  } catch (const c10::Error&) {
    TORCH_CHECK(false, "symmetric memory: no process group named '", name, "' (pass the group's group_name)");
  }
  auto backend = pg->getBackend(c10::DeviceType::PrivateUse1);
  auto* mine = dynamic_cast<ProcessGroupMytorch*>(backend.get());
  TORCH_CHECK(mine != nullptr, "symmetric memory on mytorch: group '", name, "' has no mytorch backend");
  return c10sm::GroupInfo{pg->getRank(), pg->getSize(),
                          c10::make_intrusive<c10d::PrefixStore>("mytorch_symm/", mine->store())};
}

class Allocator final : public c10sm::SymmetricMemoryAllocator {
 public:
  void* alloc(size_t size, int device_idx, const std::optional<std::string>&) override {
    const c10::DeviceIndex device = resolveDevice(device_idx);
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    const size_t pad = c10sm::get_signal_pad_size();
    c10::DataPtr data = deviceAllocator()->allocate(alignUp(size, kBufferAlign) + pad);
    char* p = static_cast<char*>(data.get());
    MT_RT_CHECK(rt::memset_async(p + alignUp(size, kBufferAlign), 0, pad, nativeHandle(currentStream(device))));
    std::lock_guard<std::mutex> g(mu_);
    blocks_.emplace(p, Block{std::move(data), size, device, {}});
    return p;
  }

  void free(void* ptr) override {
    Block dead;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = blocks_.find(ptr);
      if (it == blocks_.end()) return;
      dead = std::move(it->second);
      blocks_.erase(it);
    }
    // dead's handles and memory go here, outside the lock
  }

  size_t get_alloc_size(void* ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.find(ptr);
    TORCH_CHECK(it != blocks_.end(), "symmetric memory: ", ptr, " was not allocated by mytorch's allocator");
    return it->second.size;
  }

  c10::intrusive_ptr<c10sm::SymmetricMemory> rendezvous(void* ptr, const std::optional<std::string>& group) override {
    return rendezvousBlock(ptr, group.value_or("0"));
  }

  c10::intrusive_ptr<MytorchSymmetricMemory> rendezvousBlock(void* ptr, const std::string& group) {
    size_t size = 0;
    c10::DeviceIndex device = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = blocks_.find(ptr);
      TORCH_CHECK(it != blocks_.end(), "symmetric memory: the tensor's memory was not allocated with ",
                  "torch.distributed._symmetric_memory.empty (or empty_strided_p2p) on mytorch");
      auto h = it->second.handles.find(group);
      if (h != it->second.handles.end()) return h->second;
      size = it->second.size;
      device = it->second.device;
    }
    const c10sm::GroupInfo info = groupInfo(group);
    const std::string key = "rdzv/" + group + "/" + std::to_string(counter(group));
    auto handle =
        rendezvousOver(ptr, size, c10sm::get_signal_pad_size(), device, info.store, info.rank, info.world_size, key);
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.find(ptr);
    TORCH_CHECK(it != blocks_.end(), "symmetric memory: the tensor was freed during its rendezvous");
    it->second.handles[group] = handle;
    return handle;
  }

  bool has_multicast_support(int) override { return false; }
  c10::DeviceType supported_device_type() override { return c10::DeviceType::PrivateUse1; }
  std::string name() override { return "MYTORCH"; }
#if MYTORCH_TORCH_AT_LEAST(2, 12)
  bool has_allocation(void* ptr) override { return owns(ptr); }
#endif
  bool owns(void* ptr) {
    std::lock_guard<std::mutex> g(mu_);
    return blocks_.count(ptr) > 0;
  }

 private:
  int64_t counter(const std::string& group) {
    std::lock_guard<std::mutex> g(mu_);
    return counters_[group]++;
  }

  std::mutex mu_;
  std::map<void*, Block> blocks_;
  std::map<std::string, int64_t> counters_;
};

c10::intrusive_ptr<Allocator>& allocator() {
  static auto* a = new c10::intrusive_ptr<Allocator>(c10::make_intrusive<Allocator>());  // outlives every tensor
  return *a;
}

} // namespace

MytorchSymmetricMemory::MytorchSymmetricMemory(std::vector<Peer> peers, int rank, size_t size, size_t pad_size,
                                               c10::Device device, std::chrono::milliseconds timeout)
    : peers_(std::move(peers)), rank_(rank), size_(size), pad_size_(pad_size), device_(device), timeout_(timeout) {
  std::vector<void*> buffers = get_buffer_ptrs(), pads = get_signal_pad_ptrs();
  for (const auto& p : peers_) {
    pids_.push_back(p.pid);
    global_ranks_.push_back(p.global_rank);
  }
  c10::DeviceGuard guard(device_);
  buffers_dev_ = deviceArray(buffers.data(), buffers.size() * sizeof(void*), device_.index());
  pads_dev_ = deviceArray(pads.data(), pads.size() * sizeof(void*), device_.index());
  global_ranks_dev_ = deviceArray(global_ranks_.data(), global_ranks_.size() * sizeof(int), device_.index());
  error_ = deviceErrorSite(device_, "a symmetric-memory wait", DeviceErrorFormat::SignalTimeout, false);
}

MytorchSymmetricMemory::~MytorchSymmetricMemory() {
  for (auto& p : peers_)
    if (p.mapping != nullptr) (void)rt::ipc_close_mem_handle(device_.index(), p.mapping);
}

std::vector<void*> MytorchSymmetricMemory::get_buffer_ptrs() {
  std::vector<void*> v;
  for (const auto& p : peers_) v.push_back(p.buffer);
  return v;
}

std::vector<void*> MytorchSymmetricMemory::get_signal_pad_ptrs() {
  std::vector<void*> v;
  for (const auto& p : peers_) v.push_back(p.pad);
  return v;
}

SymmSync MytorchSymmetricMemory::sync(size_t timeout_ms) {
  SymmSync s;
  s.pads = reinterpret_cast<uint32_t* const*>(pads_dev_.get());
  s.rank = rank_;
  s.world = get_world_size();
  s.channels = static_cast<int64_t>(pad_size_ / sizeof(uint32_t)) / s.world;
  s.timeout_ms = timeout_ms > 0 ? timeout_ms : static_cast<uint64_t>(timeout_.count());
  s.error = error_;
  s.pids = pids_.data();
  s.exited = &rt::process_exited;
  return s;
}

void MytorchSymmetricMemory::signal(SymmSignalOp op, int peer, int channel, size_t timeout_ms) {
  c10::DeviceGuard guard(device_);
  TORCH_CHECK_VALUE(peer >= 0 && peer < get_world_size(), "symmetric memory: rank ", peer,
                    " is not in the group (world size ", get_world_size(), ")");
  SymmSignalArgs a;
  a.sync = sync(timeout_ms);
  TORCH_CHECK_VALUE(channel >= 0 && channel < a.sync.channels, "symmetric memory: channel ", channel,
                    " is outside the signal pad (", a.sync.channels, " channels at world size ", get_world_size(),
                    "; set_signal_pad_size makes more)");
  a.op = op;
  a.channel = channel;
  a.peer = peer;
  MT_RT_CHECK(kernels::symm_signal(a, nativeHandle(currentStream(device_.index()))));
  afterErrorCheckedLaunch(device_);
}

void MytorchSymmetricMemory::barrier(int channel, size_t timeout_ms) {
  signal(SymmSignalOp::Barrier, rank_, channel, timeout_ms);
}
void MytorchSymmetricMemory::put_signal(int dst_rank, int channel, size_t timeout_ms) {
  signal(SymmSignalOp::Put, dst_rank, channel, timeout_ms);
}
void MytorchSymmetricMemory::wait_signal(int src_rank, int channel, size_t timeout_ms) {
  signal(SymmSignalOp::Wait, src_rank, channel, timeout_ms);
}

bool isSymmetricTensor(const at::Tensor& t) { return t.has_storage() && allocator()->owns(t.storage().mutable_data()); }

c10::intrusive_ptr<MytorchSymmetricMemory> symmetricMemoryOf(const at::Tensor& t, const std::string& group) {
  return allocator()->rendezvousBlock(t.storage().mutable_data(), group);
}

OwnedSymmetricMemory allocateSymmetric(size_t size, c10::Device device, const c10::intrusive_ptr<c10d::Store>& store,
                                       int rank, int world, const std::string& key) {
  c10::DeviceGuard guard(device);
  const size_t pad = c10sm::get_signal_pad_size();
  OwnedSymmetricMemory o;
  o.memory = deviceAllocator()->allocate(alignUp(size, kBufferAlign) + pad);
  char* p = static_cast<char*>(o.memory.get());
  MT_RT_CHECK(rt::memset_async(p + alignUp(size, kBufferAlign), 0, pad, nativeHandle(currentStream(device.index()))));
  o.handle = rendezvousOver(p, size, pad, device.index(), store, rank, world, key);
  return o;
}

bool sameHost(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world, const std::string& key) {
  const std::string mine = hostIdentity();
  store->set(key + "/" + std::to_string(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  bool same = true;
  for (int r = 0; r < world; ++r) {
    const auto b = store->get(key + "/" + std::to_string(r));
    same = same && std::string(b.begin(), b.end()) == mine;
  }
  return same;
}

void registerSymmetricMemoryAllocator() { c10sm::register_allocator(c10::DeviceType::PrivateUse1, allocator()); }

} // namespace mytorch::dist
