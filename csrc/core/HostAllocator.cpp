// Pinned host memory: power-of-two size classes, blocks cached after free. A block that an asynchronous
// copy used (record_event) is reused only after the events recorded on the copy's streams complete, so a
// non_blocking copy never reads memory that was handed to someone else.
#include "csrc/core/HostAllocator.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

constexpr size_t kMinHostBlock = 512;
constexpr int kClasses = 64;

struct HostBlock {
  void* ptr;
  size_t size;
  bool allocated = false;
  std::vector<rt::Event> events;
};

void deleteHostPtr(void* ctx);

class HostAllocatorImpl final : public MytorchHostAllocator {
 public:
  at::DataPtr allocate(size_t n) override {
    if (n == 0) return at::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    const size_t size = n <= kMinHostBlock ? kMinHostBlock : c10::llvm::PowerOf2Ceil(n);
    const int cls = c10::llvm::Log2_64(size);
    std::lock_guard<std::mutex> lock(mu_);
    processEvents();
    HostBlock* block = nullptr;
    if (!free_[cls].empty()) {
      block = free_[cls].back();
      free_[cls].pop_back();
    } else {
      void* ptr = nullptr;
      auto t0 = std::chrono::steady_clock::now();
      MT_RT_CHECK(rt::host_malloc(size, &ptr));
      stats_.host_alloc_time.increase(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
      block = new HostBlock{ptr, size};
      blocks_[reinterpret_cast<uintptr_t>(ptr)] = block;
      stats_.num_host_alloc += 1;
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(size);
      if (cls < static_cast<int>(stats_.bucket_allocation.size())) stats_.bucket_allocation[cls] += 1;
    }
    block->allocated = true;
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(size);
    return at::DataPtr(block->ptr, block, &deleteHostPtr, c10::Device(c10::DeviceType::CPU));
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

  void release(HostBlock* block) {
    std::lock_guard<std::mutex> lock(mu_);
    block->allocated = false;
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(block->size);
    if (block->events.empty()) free_[c10::llvm::Log2_64(block->size)].push_back(block);
    else pending_.push_back(block);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    HostBlock* block = findLocked(ptr);
    if (block == nullptr) return false;
    rt::Event ev = nullptr;
    MT_RT_CHECK(rt::event_create(stream.device_index(), false, &ev));
    MT_RT_CHECK(rt::event_record(stream.device_index(), ev, nativeHandle(stream)));
    block->events.push_back(ev);
    return true;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    processEvents();
    for (auto& list : free_) {
      for (HostBlock* b : list) {
        auto t0 = std::chrono::steady_clock::now();
        MT_RT_CHECK(rt::host_free(b->ptr));
        stats_.host_free_time.increase(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
        stats_.num_host_free += 1;
        stats_.allocations.decrease(1);
        stats_.allocated_bytes.decrease(b->size);
        blocks_.erase(reinterpret_cast<uintptr_t>(b->ptr));
        delete b;
      }
      list.clear();
    }
  }
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations, &stats_.allocated_bytes})
      s->reset_accumulated();
    stats_.host_alloc_time.reset_accumulated();
    stats_.host_free_time.reset_accumulated();
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations, &stats_.allocated_bytes})
      s->reset_peak();
    stats_.host_alloc_time.reset_peak();
    stats_.host_free_time.reset_peak();
  }
  bool isPinned(const void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    return findLocked(ptr) != nullptr;
  }

 private:
  HostBlock* findLocked(const void* ptr) {
    auto addr = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(addr);
    if (it == blocks_.begin()) return nullptr;
    --it;
    HostBlock* b = it->second;
    return addr < it->first + b->size ? b : nullptr;
  }

  void processEvents() {
    for (size_t i = 0; i < pending_.size();) {
      HostBlock* b = pending_[i];
      bool done = true;
      for (rt::Event ev : b->events) {
        rt::Status s = rt::event_query(ev);
        if (s == rt::Status::NotReady) {
          done = false;
          break;
        }
        MT_RT_CHECK(s);
      }
      if (!done) {
        ++i;
        continue;
      }
      for (rt::Event ev : b->events) (void)rt::event_destroy(ev);
      b->events.clear();
      free_[c10::llvm::Log2_64(b->size)].push_back(b);
      pending_[i] = pending_.back();
      pending_.pop_back();
    }
  }

  std::mutex mu_;
  std::map<uintptr_t, HostBlock*> blocks_;
  std::vector<HostBlock*> free_[kClasses];
  std::vector<HostBlock*> pending_;
  at::HostStats stats_;
};

HostAllocatorImpl& instance() {
  static HostAllocatorImpl* a = new HostAllocatorImpl();
  return *a;
}

void deleteHostPtr(void* ctx) { instance().release(static_cast<HostBlock*>(ctx)); }

} // namespace

MytorchHostAllocator* hostAllocator() { return &instance(); }

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &instance());

} // namespace mytorch
