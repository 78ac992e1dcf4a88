// See Stream.h, Note [Stream ids].
#include "csrc/core/Stream.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

#include "csrc/core/Runtime.h"
#include "mytorch/once.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

struct DevicePool {
  Once created;  // Note [Once, cheaply]
  std::array<rt::Stream, 2 * kStreamPoolSize + 1> handles{};
  std::atomic<uint32_t> next_normal{0};
  std::atomic<uint32_t> next_high{0};
};

std::vector<std::unique_ptr<DevicePool>>& pools() {
  static std::vector<std::unique_ptr<DevicePool>> p = [] {
    std::vector<std::unique_ptr<DevicePool>> v;
    for (int i = 0; i < rt::device_count(); ++i) v.push_back(std::make_unique<DevicePool>());
    return v;
  }();
  return p;
}

DevicePool& poolOf(c10::DeviceIndex d) {
  auto& all = pools();
  TORCH_CHECK(d >= 0 && static_cast<size_t>(d) < all.size(), "mytorch: no stream pool for device ", static_cast<int>(d),
              " (", all.size(), " device(s))");
  DevicePool& pool = *all[static_cast<size_t>(d)];
  pool.created([&] {
    for (int i = 1; i <= 2 * kStreamPoolSize; ++i) {
      MT_RT_CHECK(rt::stream_create(d, i > kStreamPoolSize ? -1 : 0, &pool.handles[static_cast<size_t>(i)]));
    }
  });
  return pool;
}

thread_local std::vector<c10::StreamId> t_current;

} // namespace

c10::DeviceIndex currentDeviceIndex() {
  int d = 0;
  MT_RT_CHECK(rt::get_device(&d));
  return static_cast<c10::DeviceIndex>(d);
}

void checkDeviceIndex(c10::DeviceIndex index) {
  const int n = rt::device_count();
  // worded as the in-tree accelerators (XPU) word it, so that torch.accelerator's callers see one message
  TORCH_CHECK(index >= 0 && index < n, "The device index is out of range. It must be in [0, ", n, ") (mytorch's ",
              rt::kind_name(), " runtime has ", n, " device(s)), but got ", static_cast<int>(index));
}

c10::DeviceIndex resolveDevice(c10::DeviceIndex index) {
  if (index < 0) return currentDeviceIndex();
  checkDeviceIndex(index);
  return index;
}

rt::Stream nativeHandle(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "expected a mytorch stream, but got a stream of ",
              stream.device());
  const auto id = stream.id();
  if (id == 0) return nullptr;
  TORCH_CHECK(id > 0 && id <= 2 * kStreamPoolSize, "invalid mytorch stream id ", id);
  return poolOf(resolveDevice(stream.device_index())).handles[static_cast<size_t>(id)];
}

c10::Stream defaultStream(c10::DeviceIndex device) {
  device = resolveDevice(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), 0);
}

c10::Stream streamFromPool(c10::DeviceIndex device, bool high_priority) {
  device = resolveDevice(device);
  DevicePool& pool = poolOf(device);
  uint32_t k = (high_priority ? pool.next_high : pool.next_normal).fetch_add(1) % kStreamPoolSize;
  c10::StreamId id = 1 + static_cast<c10::StreamId>(k) + (high_priority ? kStreamPoolSize : 0);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

c10::Stream currentStream(c10::DeviceIndex device) {
  device = resolveDevice(device);
  if (static_cast<size_t>(device) >= t_current.size()) return defaultStream(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                     t_current[static_cast<size_t>(device)]);
}

void setCurrentStream(const c10::Stream& stream) {
  (void)nativeHandle(stream); // validates the id and device
  auto d = static_cast<size_t>(resolveDevice(stream.device_index()));
  if (t_current.size() <= d) t_current.resize(d + 1, 0);
  t_current[d] = stream.id();
}

} // namespace mytorch
