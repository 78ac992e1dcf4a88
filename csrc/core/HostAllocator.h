// The caching pinned host allocator of the mytorch device (at::HostAllocator for PrivateUse1).
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace mytorch {

class MytorchHostAllocator : public at::HostAllocator {
 public:
  virtual bool isPinned(const void* ptr) = 0; // inside a block this allocator handed out
};

MytorchHostAllocator* hostAllocator();

} // namespace mytorch
