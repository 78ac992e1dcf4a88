// The caching device allocator of the mytorch device (a c10::DeviceAllocator registered for PrivateUse1).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <string>
#include <utility>
#include <vector>

namespace mytorch {

// Memory history (torch.cuda.memory._record_memory_history / _snapshot equivalents).
struct TraceEvent {
  std::string action; // alloc, free_requested, free_completed, segment_alloc, segment_free, oom
  uintptr_t addr;
  size_t size;
  int64_t stream;
  int64_t time_us;    // microseconds since the epoch
};
struct BlockSnapshot {
  uintptr_t addr;
  size_t size;
  size_t requested;
  std::string state;  // active_allocated, active_pending_free, inactive
};
struct SegmentSnapshot {
  int device;
  uintptr_t addr;
  size_t total;
  size_t allocated;
  size_t active;
  size_t requested;
  int64_t stream;
  bool small;
  std::vector<BlockSnapshot> blocks;
};
struct MemorySnapshot {
  std::vector<SegmentSnapshot> segments;
  std::vector<std::vector<TraceEvent>> traces; // one per device
};

class MytorchDeviceAllocator : public c10::DeviceAllocator {
 public:
  virtual size_t cachedBlockCount(c10::DeviceIndex device) = 0; // free blocks held in the pools (tests)
  // The runtime allocation (segment) a pointer of this allocator lies in, {nullptr, 0} if none: what an IPC
  // handle names (cudaIpcGetMemHandle takes an allocation's start).
  virtual std::pair<void*, size_t> segmentOf(const void* ptr, c10::DeviceIndex device) = 0;
  virtual void setMemoryFraction(double fraction, c10::DeviceIndex device) = 0;
  // Graph-private pools (Note [Graph memory pools], Graph.cpp): allocations on `device` for `stream` (from any
  // thread) come from pool `id` until endAllocateToPool; releasePool drops one graph's use of the pool, whose
  // memory goes back to the device once no graph uses it and its blocks are free.
  virtual void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, c10::Stream stream) = 0;
  virtual void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, c10::Stream stream) = 0;
  virtual void releasePool(c10::DeviceIndex device, c10::MempoolId_t id) = 0;
  virtual void recordHistory(bool enabled, size_t max_entries) = 0;
  virtual MemorySnapshot snapshot() = 0;
};

MytorchDeviceAllocator* deviceAllocator();

} // namespace mytorch
