// Streams of the mytorch device: c10::Stream ids mapped to runtime stream handles, a per-device pool,
// and the per-thread current stream (the torch.cuda model).
//
// Note [Stream ids]
// id 0 is the device's default stream (a null runtime handle); ids 1..kPoolSize are the normal-priority
// pool and kPoolSize+1..2*kPoolSize the high-priority pool, created on a device's first pool request
// and never destroyed (as in torch.cuda).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "mytorch/launch.h"

namespace mytorch {

constexpr int kStreamPoolSize = 32;

c10::DeviceIndex currentDeviceIndex();
void checkDeviceIndex(c10::DeviceIndex index);          // TORCH_CHECK with the valid range
c10::DeviceIndex resolveDevice(c10::DeviceIndex index); // -1 means the current device

rt::Stream nativeHandle(const c10::Stream& stream);
c10::Stream defaultStream(c10::DeviceIndex device = -1);
c10::Stream streamFromPool(c10::DeviceIndex device = -1, bool high_priority = false);
c10::Stream currentStream(c10::DeviceIndex device = -1);
void setCurrentStream(const c10::Stream& stream);

} // namespace mytorch
