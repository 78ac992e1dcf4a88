// PrivateUse1 hooks: what ATen asks of a backend outside the dispatcher (generators, pinned memory,
// device of a pointer, storage resize, device count and current device for torch.accelerator).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Generator.h"
#include "csrc/core/HostAllocator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

struct MytorchHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return rt::device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override { return defaultGenerator(device); }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override { return newGenerator(device); }
  at::Device getDeviceFromPtr(void* data) const override {
    int d = 0;
    MT_RT_CHECK(rt::pointer_device(data, &d));
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(d));
  }
  bool isPinnedPtr(const void* data) const override { return hostAllocator()->isPinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return hostAllocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return rt::initialized(); }
  void init() const override { MT_RT_CHECK(rt::init()); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(rt::device_count()); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    checkDeviceIndex(device);
    MT_RT_CHECK(rt::set_device(device));
  }
  c10::DeviceIndex getCurrentDevice() const override { return currentDeviceIndex(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = currentDeviceIndex();
    if (device >= 0 && device != old) setCurrentDevice(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }

  // Grows or shrinks a storage in place: new memory on the storage's device, old bytes copied over.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    auto* impl = storage.unsafeGetStorageImpl();
    const size_t old = impl->nbytes();
    c10::DataPtr fresh;
    if (newsize > 0) {
      const c10::DeviceIndex d = storage.device().index();
      const c10::DeviceIndex prev = exchangeDevice(d);
      fresh = impl->allocator()->allocate(newsize);
      exchangeDevice(prev);
      const size_t n = std::min(old, newsize);
      if (n > 0) {
        MT_RT_CHECK(rt::memcpy_async(fresh.get(), impl->data_ptr().get(), n, rt::CopyKind::DeviceToDevice,
                                     nativeHandle(currentStream(d))));
      }
    } else {
      fresh = c10::DataPtr(nullptr, storage.device());
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

const bool kRegistered = [] {
  at::RegisterPrivateUse1HooksInterface(new MytorchHooks());
  return true;
}();

} // namespace
} // namespace mytorch
