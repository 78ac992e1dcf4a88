// Caching allocator for device memory, written against runtime.h so it serves both runtimes.
//
// Note [Caching allocator design]
// Same model as torch.cuda's allocator, so users' intuitions (and memory_stats keys) carry over:
//  - sizes round up to 512 bytes; requests of at most 1 MiB come from the small pool (2 MiB segments),
//    larger ones from the large pool (20 MiB segments below 10 MiB, else the size rounded up to 2 MiB);
//  - a free block that is larger than needed is split, and a freed block merges with free neighbours of
//    the same segment, so a segment whose blocks are all free is one block again and can be released;
//  - blocks are cached per stream: a block freed on stream S is reused only by allocations on S. A block
//    that was used on other streams (record_stream) goes back to the pool only after events recorded on
//    those streams at free time have completed;
//  - when the runtime refuses a segment, every cached segment is released and the request retried once;
//    if it fails again the allocator raises torch.OutOfMemoryError with its figures.
// One mutex per device guards that device's pools, blocks and statistics; a separate mutex guards the
// pointer-to-block map the deleter needs.
#include "csrc/core/DeviceAllocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "csrc/core/AllocatorConfig.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/once.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallBuffer = 2 << 20;
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kRoundLarge = 2 << 20;

struct BlockPool;

struct Block {
  c10::DeviceIndex device;
  rt::Stream stream;
  size_t size;
  size_t requested = 0;
  void* ptr;
  BlockPool* pool;
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
  std::unordered_set<rt::Stream> stream_uses;
  int pending_events = 0;
  uint64_t last_use = 0; // allocation counter when last freed: garbage collection frees oldest first
  Block(c10::DeviceIndex d, rt::Stream s, size_t sz, BlockPool* p, void* ptr_)
      : device(d), stream(s), size(sz), ptr(ptr_), pool(p) {}
  bool isSplit() const { return prev != nullptr || next != nullptr; }
};

struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return std::less<void*>()(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    return std::less<void*>()(a->ptr, b->ptr);
  }
};

struct PrivatePool;
struct BlockPool {
  explicit BlockPool(bool small, PrivatePool* owner_ = nullptr) : is_small(small), owner(owner_) {}
  std::set<Block*, BlockOrder> blocks;
  const bool is_small;
  PrivatePool* const owner;  // the graph pool it belongs to, or null for the device's shared pools
};

// A graph's private pool (Note [Graph memory pools] in Graph.cpp).
struct PrivatePool {
  PrivatePool() : small(true, this), large(false, this) {}
  BlockPool small, large;
  int graphs = 1;        // graphs using it (capturing or captured)
  size_t segments = 0;   // segments it holds
};

size_t roundSize(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}
size_t segmentSize(size_t n) {
  if (n <= kSmallSize) return kSmallBuffer;
  if (n < kMinLargeAlloc) return kLargeBuffer;
  return (n + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::string formatBytes(size_t n) {
  char buf[64];
  if (n >= (size_t(1) << 30)) std::snprintf(buf, sizeof(buf), "%.2f GiB", double(n) / (1 << 30));
  else if (n >= (size_t(1) << 20)) std::snprintf(buf, sizeof(buf), "%.2f MiB", double(n) / (1 << 20));
  else std::snprintf(buf, sizeof(buf), "%zu bytes", n);
  return buf;
}

class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex d) : device_(d), small_(true), large_(false) {
    stats_.max_split_size =
        cfg_.max_split_size == std::numeric_limits<size_t>::max() ? -1 : static_cast<int64_t>(cfg_.max_split_size);
  }

  Block* malloc(size_t requested, rt::Stream stream) {
    std::unique_lock<std::mutex> lock(mu_);
    PrivatePool* graph = routedPool(stream);
    if (routes_.empty()) processEvents();  // an event query would end a capture (CUDA's allocator skips it too)
    const size_t size = roundSize(requested);
    BlockPool& pool =
        graph ? (size <= kSmallSize ? graph->small : graph->large) : (size <= kSmallSize ? small_ : large_);
    Block* block = takeFree(pool, stream, size);
    if (block == nullptr) {
      block = newSegment(pool, stream, size);
      if (block == nullptr && graph == nullptr) {  // no frees while capturing
        // Free what the cache holds and try once more before giving up.
        stats_.num_alloc_retries += 1;
        synchronizeEvents();
        releaseCached();
        block = newSegment(pool, stream, size);
      }
      if (block == nullptr) {
        stats_.num_ooms += 1;
        trace("oom", nullptr, size);
        size_t free_b = 0, total_b = 0;
        (void)rt::mem_get_info(device_, &free_b, &total_b);
        const std::string why = rt::last_error();
        const size_t allocated = stats_.allocated_bytes[0].current;
        const size_t reserved = stats_.reserved_bytes[0].current;
        lock.unlock();
        c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(size), allocated, reserved,
                                         c10::Device(c10::DeviceType::PrivateUse1, device_));
        TORCH_CHECK_WITH(OutOfMemoryError, false, "mytorch out of memory. Tried to allocate ", formatBytes(size),
                         " on device mytorch:", static_cast<int>(device_), " (", rt::kind_name(),
                         " runtime). Capacity ", formatBytes(limit(total_b)), "; ", formatBytes(allocated),
                         " allocated by tensors; ", formatBytes(reserved),
                         " reserved in total by the mytorch allocator; ", formatBytes(free_b),
                         " free on the device. Runtime said: ", why);
      }
    }
    if (shouldSplit(block, size)) {
      auto* rest = new Block(device_, stream, block->size - size, &pool, static_cast<char*>(block->ptr) + size);
      rest->prev = block;
      rest->next = block->next;
      if (rest->next) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      by_addr_[reinterpret_cast<uintptr_t>(rest->ptr)] = rest;
      insertFree(rest);
    }
    block->allocated = true;
    block->requested = requested;
    if (block->size >= cfg_.max_split_size) stats_.oversize_allocations.increase(1);
    trace("alloc", block, block->size);
    forEachStat(pool, [&](size_t t) {
      stats_.allocation[t].increase(1);
      stats_.allocated_bytes[t].increase(block->size);
      stats_.active[t].increase(1);
      stats_.active_bytes[t].increase(block->size);
      stats_.requested_bytes[t].increase(requested);
    });
    return block;
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mu_);
    block->allocated = false;
    block->last_use = ++use_counter_;
    if (block->size >= cfg_.max_split_size) stats_.oversize_allocations.decrease(1);
    trace("free_requested", block, block->size);
    forEachStat(*block->pool, [&](size_t t) {
      stats_.allocation[t].decrease(1);
      stats_.allocated_bytes[t].decrease(block->size);
      stats_.requested_bytes[t].decrease(block->requested);
    });
    if (!block->stream_uses.empty()) {
      // Other streams may still be using the memory: reuse waits for what they have queued so far.
      for (rt::Stream s : block->stream_uses) {
        rt::Event ev = nullptr;
        MT_RT_CHECK(rt::event_create(device_, false, &ev));
        MT_RT_CHECK(rt::event_record(device_, ev, s));
        pending_.emplace_back(ev, block);
        block->pending_events += 1;
      }
      block->stream_uses.clear();
      return;
    }
    freeBlock(block);
  }

  void recordStream(Block* block, rt::Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream != block->stream) block->stream_uses.insert(stream);
  }

  void emptyCache() {
    std::lock_guard<std::mutex> lock(mu_);
    synchronizeEvents();
    releaseCached();
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void resetAccumulated() {
    std::lock_guard<std::mutex> lock(mu_);
    forEachStat([](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }
  void resetPeak() {
    std::lock_guard<std::mutex> lock(mu_);
    forEachStat([](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
  }
  // The segment (one runtime allocation) holding ptr: {nullptr, 0} when none does.
  std::pair<void*, size_t> segmentOf(const void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    auto it = segments_.upper_bound(addr);
    if (it == segments_.begin()) return {nullptr, 0};
    --it;
    if (addr >= it->first + it->second) return {nullptr, 0};
    return {reinterpret_cast<void*>(it->first), it->second};
  }
  size_t cachedBlocks() {
    std::lock_guard<std::mutex> lock(mu_);
    return small_.blocks.size() + large_.blocks.size();
  }
  void setFraction(double f) {
    std::lock_guard<std::mutex> lock(mu_);
    fraction_ = f;
  }

  void beginAllocateToPool(c10::MempoolId_t id, rt::Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& p = pools_[id];
    if (p == nullptr) p = std::make_unique<PrivatePool>();
    else p->graphs += 1;
    routes_.emplace_back(stream, p.get());
  }
  void endAllocateToPool(c10::MempoolId_t id, rt::Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find(id);
    for (auto r = routes_.begin(); it != pools_.end() && r != routes_.end(); ++r) {
      if (r->first == stream && r->second == it->second.get()) {
        routes_.erase(r);
        return;
      }
    }
  }
  void releasePool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find(id);
    if (it == pools_.end()) return;
    PrivatePool* p = it->second.get();
    if (--p->graphs > 0) return;
    for (BlockPool* bp : {&p->small, &p->large}) {
      std::vector<Block*> whole;
      for (Block* b : bp->blocks)
        if (!b->isSplit()) whole.push_back(b);
      for (Block* b : whole) releaseSegment(b);
    }
    dropIfDone(it);
  }
  size_t privatePools() {
    std::lock_guard<std::mutex> lock(mu_);
    return pools_.size();
  }

  void recordHistory(bool enabled, size_t max_entries) {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = enabled;
    max_entries_ = max_entries;
    if (!enabled) trace_.clear();
  }

  void snapshot(MemorySnapshot* out) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [base, size] : segments_) {
      SegmentSnapshot seg{device_, base, size, 0, 0, 0, 0, false, {}};
      for (auto it = by_addr_.find(base); it != by_addr_.end() && it->first < base + size; ++it) {
        const Block* b = it->second;
        seg.stream = reinterpret_cast<int64_t>(b->stream);
        seg.small = b->pool->is_small;
        const char* state =
            b->allocated ? "active_allocated" : (b->pending_events > 0 ? "active_pending_free" : "inactive");
        if (b->allocated) {
          seg.allocated += b->size;
          seg.requested += b->requested;
        }
        if (b->allocated || b->pending_events > 0) seg.active += b->size;
        seg.blocks.push_back(BlockSnapshot{it->first, b->size, b->allocated ? b->requested : 0, state});
      }
      out->segments.push_back(std::move(seg));
    }
    out->traces.emplace_back(trace_.begin(), trace_.end());
  }

 private:
  // Every Stat the allocator keeps, for the resets.
  template <typename F>
  void forEachStat(F f) {
    for (auto* a :
         {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split, &stats_.allocated_bytes,
          &stats_.reserved_bytes, &stats_.active_bytes, &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
      for (auto& st : *a) f(st);
    }
    f(stats_.oversize_allocations);
    f(stats_.oversize_segments);
  }

  template <typename F>
  void forEachStat(const BlockPool& pool, F f) {
    f(static_cast<size_t>(StatType::AGGREGATE));
    f(static_cast<size_t>(pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL));
  }

  size_t limit(size_t total) const {
    return fraction_ >= 1.0 ? total : static_cast<size_t>(fraction_ * static_cast<double>(total));
  }

  bool shouldSplit(const Block* b, size_t size) const {
    if (!b->pool->is_small && b->size >= cfg_.max_split_size) return false; // oversize blocks stay whole
    const size_t rest = b->size - size;
    return b->pool->is_small ? rest >= kMinBlockSize : rest > kSmallSize;
  }

  // The graph pool of a capturing stream, else null. Caller holds mu_.
  PrivatePool* routedPool(rt::Stream stream) const {
    for (const auto& [s, pool] : routes_)
      if (s == stream) return pool;
    return nullptr;
  }
  // Forgets a pool no graph uses once it holds no segment. Caller holds mu_.
  void dropIfDone(std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>>::iterator it) {
    if (it->second->graphs <= 0 && it->second->segments == 0) pools_.erase(it);
  }

  Block* takeFree(BlockPool& pool, rt::Stream stream, size_t size) {
    Block key(device_, stream, size, &pool, nullptr);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    if (size < cfg_.max_split_size && b->size >= cfg_.max_split_size) return nullptr;
    if (size >= cfg_.max_split_size && b->size >= size + kLargeBuffer) return nullptr;
    eraseFree(b);
    return b;
  }

  Block* newSegment(BlockPool& pool, rt::Stream stream, size_t size) {
    const size_t seg = segmentSize(size);
    if (cfg_.gc_threshold > 0) collectGarbage(seg);
    if (fraction_ < 1.0) {
      size_t free_b = 0, total_b = 0;
      MT_RT_CHECK(rt::mem_get_info(device_, &free_b, &total_b));
      if (stats_.reserved_bytes[0].current + seg > limit(total_b)) {
        rt::report(rt::Status::OutOfMemory, "the per-process memory fraction limit is reached");
        return nullptr;
      }
    }
    void* ptr = nullptr;
    rt::Status s = rt::device_malloc(device_, seg, &ptr);
    if (s == rt::Status::OutOfMemory) return nullptr;
    MT_RT_CHECK(s);
    stats_.num_device_alloc += 1;
    forEachStat(pool, [&](size_t t) {
      stats_.segment[t].increase(1);
      stats_.reserved_bytes[t].increase(seg);
    });
    if (seg >= cfg_.max_split_size) stats_.oversize_segments.increase(1);
    auto* block = new Block(device_, stream, seg, &pool, ptr);
    if (pool.owner) pool.owner->segments += 1;
    by_addr_[reinterpret_cast<uintptr_t>(ptr)] = block;
    segments_[reinterpret_cast<uintptr_t>(ptr)] = seg;
    trace("segment_alloc", block, seg);
    return block;
  }

  void insertFree(Block* b) {
    b->pool->blocks.insert(b);
    if (b->isSplit()) {
      forEachStat(*b->pool, [&](size_t t) {
        stats_.inactive_split[t].increase(1);
        stats_.inactive_split_bytes[t].increase(b->size);
      });
    }
  }
  void eraseFree(Block* b) {
    b->pool->blocks.erase(b);
    if (b->isSplit()) {
      forEachStat(*b->pool, [&](size_t t) {
        stats_.inactive_split[t].decrease(1);
        stats_.inactive_split_bytes[t].decrease(b->size);
      });
    }
  }

  // Returns a block whose uses are over to its pool, merging it with free neighbours.
  void freeBlock(Block* block) {
    const size_t size = block->size;
    // On the emulated CUDA build a freed block is poisoned (all bytes 0xFF: NaN for floating types) in its
    // stream's order, so that work of another stream still reading it (a missing record_stream or stream
    // wait) gives a wrong result in a test instead of passing silently. The block's device is made current:
    // its stream handle may be the default stream, which means the current device's.
    if (rt::kind() == rt::Kind::Emu) {
      c10::DeviceGuard on(c10::Device(c10::DeviceType::PrivateUse1, block->device));
      MT_RT_CHECK(rt::memset_async(block->ptr, 0xFF, size, block->stream));
    }
    for (Block* other : {block->prev, block->next}) {
      if (other == nullptr || other->allocated || other->pending_events > 0) continue;
      eraseFree(other);
      by_addr_.erase(reinterpret_cast<uintptr_t>(other->ptr));
      if (other == block->prev) {
        by_addr_.erase(reinterpret_cast<uintptr_t>(block->ptr));
        by_addr_[reinterpret_cast<uintptr_t>(other->ptr)] = block;
        block->ptr = other->ptr;
        block->prev = other->prev;
        if (block->prev) block->prev->next = block;
      } else {
        block->next = other->next;
        if (block->next) block->next->prev = block;
      }
      block->size += other->size;
      delete other;
    }
    forEachStat(*block->pool, [&](size_t t) {
      stats_.active[t].decrease(1);
      stats_.active_bytes[t].decrease(size);
    });
    trace("free_completed", block, size);
    insertFree(block);
    PrivatePool* owner = block->pool->owner;
    if (owner != nullptr && owner->graphs <= 0 && !block->isSplit()) {  // the last use of a released graph pool
      releaseSegment(block);
      for (auto it = pools_.begin(); it != pools_.end(); ++it) {
        if (it->second.get() == owner) {
          dropIfDone(it);
          break;
        }
      }
    }
  }

  void processEvents() {
    while (!pending_.empty()) {
      auto [ev, block] = pending_.front();
      rt::Status s = rt::event_query(ev);
      if (s == rt::Status::NotReady) break;
      MT_RT_CHECK(s);
      (void)rt::event_destroy(ev);
      pending_.pop_front();
      if (--block->pending_events == 0) freeBlock(block);
    }
  }

  void synchronizeEvents() {
    if (!pending_.empty()) stats_.num_sync_all_streams += 1;
    for (auto& [ev, block] : pending_) {
      MT_RT_CHECK(rt::event_synchronize(ev));
      (void)rt::event_destroy(ev);
      if (--block->pending_events == 0) freeBlock(block);
    }
    pending_.clear();
  }

  // Releases every cached segment that is entirely free (a single unsplit block).
  void releaseCached() {
    for (BlockPool* pool : {&small_, &large_}) {
      std::vector<Block*> whole;
      for (Block* b : pool->blocks) {
        if (!b->isSplit()) whole.push_back(b);
      }
      for (Block* b : whole) releaseSegment(b);
    }
  }

  // Returns one wholly free segment (a single unsplit cached block) to the runtime.
  void releaseSegment(Block* b) {
    eraseFree(b);
    MT_RT_CHECK(rt::device_free(device_, b->ptr));
    stats_.num_device_free += 1;
    forEachStat(*b->pool, [&](size_t t) {
      stats_.segment[t].decrease(1);
      stats_.reserved_bytes[t].decrease(b->size);
    });
    if (b->size >= cfg_.max_split_size) stats_.oversize_segments.decrease(1);
    if (b->pool->owner) b->pool->owner->segments -= 1;
    trace("segment_free", b, b->size);
    by_addr_.erase(reinterpret_cast<uintptr_t>(b->ptr));
    segments_.erase(reinterpret_cast<uintptr_t>(b->ptr));
    delete b;
  }

  // Before growing past gc_threshold of the usable capacity, release wholly free cached segments, least
  // recently used first, until the new segment fits under the threshold.
  void collectGarbage(size_t incoming) {
    size_t free_b = 0, total_b = 0;
    MT_RT_CHECK(rt::mem_get_info(device_, &free_b, &total_b));
    const double target = cfg_.gc_threshold * static_cast<double>(limit(total_b));
    if (static_cast<double>(stats_.reserved_bytes[0].current + incoming) <= target) return;
    std::vector<Block*> candidates;
    for (BlockPool* pool : {&small_, &large_}) {
      for (Block* b : pool->blocks) {
        if (!b->isSplit()) candidates.push_back(b);
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const Block* a, const Block* b) { return a->last_use < b->last_use; });
    for (Block* b : candidates) {
      if (static_cast<double>(stats_.reserved_bytes[0].current + incoming) <= target) break;
      releaseSegment(b);
    }
  }

  void trace(const char* action, const Block* b, size_t size) {
    if (!recording_) return;
    const auto now =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    trace_.push_back(TraceEvent{action, b ? reinterpret_cast<uintptr_t>(b->ptr) : 0, size,
                                b ? reinterpret_cast<int64_t>(b->stream) : 0, now});
    while (trace_.size() > max_entries_) trace_.pop_front();
  }

  const c10::DeviceIndex device_;
  std::mutex mu_;
  BlockPool small_;
  BlockPool large_;
  std::deque<std::pair<rt::Event, Block*>> pending_;
  DeviceStats stats_;
  double fraction_ = 1.0;
  const AllocatorConfig cfg_ = allocatorConfig();
  uint64_t use_counter_ = 0;
  std::map<uintptr_t, Block*> by_addr_;   // every block, by address (segment snapshots)
  std::map<uintptr_t, size_t> segments_;  // segment base -> size
  bool recording_ = false;
  size_t max_entries_ = 0;
  std::deque<TraceEvent> trace_;
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> pools_;    // graph pools by id
  std::vector<std::pair<rt::Stream, PrivatePool*>> routes_;           // capturing streams and their pools
};

void deleteDevicePtr(void* ptr);

class Allocator final : public MytorchDeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = currentDeviceIndex();
    if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, device));
    const c10::Stream stream = currentStream(device);
    Block* block = cache(device).malloc(n, nativeHandle(stream));
    {
      std::lock_guard<std::mutex> lock(map_mu_);
      live_[block->ptr] = block;
    }
    return c10::DataPtr(block->ptr, block->ptr, &deleteDevicePtr, c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &deleteDevicePtr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    MT_RT_CHECK(rt::memcpy_async(dest, src, count, rt::CopyKind::DeviceToDevice, nativeHandle(currentStream())));
    MT_RT_CHECK(rt::stream_synchronize(currentDeviceIndex(), nativeHandle(currentStream())));
  }

  void release(void* ptr) {
    Block* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(map_mu_);
      auto it = live_.find(ptr);
      TORCH_INTERNAL_ASSERT(it != live_.end(), "mytorch allocator: free of a pointer it does not own");
      block = it->second;
      live_.erase(it);
    }
    cache(block->device).free(block);
  }

  bool initialized() override { return rt::initialized(); }
  void emptyCache(c10::MempoolId_t) override {
    for (int d = 0; d < rt::device_count(); ++d) {
      if (caches_ready_) cache(static_cast<c10::DeviceIndex>(d)).emptyCache();
    }
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get() == nullptr || ptr.get_deleter() != &deleteDevicePtr) return;
    Block* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(map_mu_);
      auto it = live_.find(ptr.get());
      if (it == live_.end()) return;
      block = it->second;
    }
    cache(block->device).recordStream(block, nativeHandle(stream));
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return cache(resolveDevice(device)).stats();
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { cache(resolveDevice(device)).resetAccumulated(); }
  void resetPeakStats(c10::DeviceIndex device) override { cache(resolveDevice(device)).resetPeak(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    size_t f = 0, t = 0;
    MT_RT_CHECK(rt::mem_get_info(resolveDevice(device), &f, &t));
    return {f, t};
  }
  size_t cachedBlockCount(c10::DeviceIndex device) override { return cache(resolveDevice(device)).cachedBlocks(); }
  std::pair<void*, size_t> segmentOf(const void* ptr, c10::DeviceIndex device) override {
    return cache(resolveDevice(device)).segmentOf(ptr);
  }
  void recordHistory(bool enabled, size_t max_entries) override {
    for (int d = 0; d < rt::device_count(); ++d)
      cache(static_cast<c10::DeviceIndex>(d)).recordHistory(enabled, max_entries);
  }
  MemorySnapshot snapshot() override {
    MemorySnapshot out;
    for (int d = 0; d < rt::device_count(); ++d) cache(static_cast<c10::DeviceIndex>(d)).snapshot(&out);
    return out;
  }
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, c10::Stream stream) override {
    cache(resolveDevice(device)).beginAllocateToPool(id, nativeHandle(stream));
  }
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, c10::Stream stream) override {
    cache(resolveDevice(device)).endAllocateToPool(id, nativeHandle(stream));
  }
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t id) override {
    cache(resolveDevice(device)).releasePool(id);
  }
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
    TORCH_CHECK(fraction > 0 && fraction <= 1, "memory fraction must be in (0, 1], but got ", fraction);
    cache(resolveDevice(device)).setFraction(fraction);
  }

 private:
  DeviceCache& cache(c10::DeviceIndex device) {
    caches_once_([this] {
      for (int d = 0; d < rt::device_count(); ++d)
        caches_.push_back(std::make_unique<DeviceCache>(static_cast<c10::DeviceIndex>(d)));
      caches_ready_ = true;
    });
    checkDeviceIndex(device);
    TORCH_CHECK(static_cast<size_t>(device) < caches_.size(), "mytorch: no allocator cache for device ",
                static_cast<int>(device), " (", caches_.size(), " device(s))");
    return *caches_[static_cast<size_t>(device)];
  }

  Once caches_once_;  // Note [Once, cheaply]
  std::atomic<bool> caches_ready_{false};
  std::vector<std::unique_ptr<DeviceCache>> caches_;
  std::mutex map_mu_;
  std::unordered_map<void*, Block*> live_;
};

Allocator& instance() {
  static Allocator* a = new Allocator(); // never destroyed: tensors may die during interpreter teardown
  return *a;
}

void deleteDevicePtr(void* ptr) { instance().release(ptr); }

} // namespace

MytorchDeviceAllocator* deviceAllocator() { return &instance(); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &instance());

} // namespace mytorch
