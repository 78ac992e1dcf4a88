// The caching device allocator of the mytorch device (a c10::DeviceAllocator registered for PrivateUse1).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <string>

namespace mytorch {

class MytorchDeviceAllocator : public c10::DeviceAllocator {
 public:
  virtual size_t cachedBlockCount(c10::DeviceIndex device) = 0; // free blocks held in the pools (tests)
  virtual void setMemoryFraction(double fraction, c10::DeviceIndex device) = 0;
};

MytorchDeviceAllocator* deviceAllocator();

} // namespace mytorch
