// The PrivateUse1 device guard: current device, streams and events for c10's generic machinery
// (DeviceGuard, StreamGuard, torch.Stream, torch.Event, torch.accelerator).
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "csrc/core/DeviceErrors.h"
#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

struct MytorchGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, currentDeviceIndex()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "expected a mytorch device, but got ", d);
    if (d.index() < 0) return;
    checkDeviceIndex(d.index());
    MT_RT_CHECK(rt::set_device(d.index()));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    // Restoring a device must not create its context (torch.cuda uses MaybeSetDevice here too).
    if (d.index() >= 0) (void)rt::maybe_set_device(d.index());
  }
  c10::Stream getStream(c10::Device d) const override { return currentStream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return defaultStream(d.index()); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high) const override {
    return streamFromPool(d.index(), high);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return streamFromPool(d.index(), priority < 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = currentStream(s.device_index());
    setCurrentStream(s);
    return old;
  }
  void* getStreamNativeHandle(const c10::Stream s) const override { return nativeHandle(s); }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event) (void)rt::event_destroy(event);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event device index ",
                static_cast<int>(device_index), " does not match the stream's device ", stream.device());
    if (*event == nullptr) {
      MT_RT_CHECK(rt::event_create(stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT, event));
    }
    MT_RT_CHECK(rt::event_record(stream.device_index(), *event, nativeHandle(stream)));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    MT_RT_CHECK(rt::stream_wait_event(stream.device_index(), nativeHandle(stream), event));
  }
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    rt::Status s = rt::event_query(event);
    if (s == rt::Status::NotReady) return false;
    MT_RT_CHECK(s);
    return true;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(rt::device_count()); }
  // torch.accelerator.get_device_capability: the dtypes a tensor can be allocated in and converted between on
  // every runtime (empty, copy_, to). Quantized tensors are out of scope (QuantizedPrivateUse1 refuses them).
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability cap;  // every scalar type
    for (auto q :
         {c10::kIndex_QInt8, c10::kIndex_QUInt8, c10::kIndex_QInt32, c10::kIndex_QUInt4x2, c10::kIndex_QUInt2x4}) {
      cap.capability_data.capability_bits &= ~(1ULL << q);
    }
    return cap;
  }
  bool queryStream(const c10::Stream& stream) const override {
    rt::Status s = rt::stream_query(stream.device_index(), nativeHandle(stream));
    if (s == rt::Status::NotReady) return false;
    MT_RT_CHECK(s);
    return true;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    warnOrErrorOnSync();
    MT_RT_CHECK(rt::stream_synchronize(stream.device_index(), nativeHandle(stream)));
    raiseDeviceError(stream.device_index());  // synchronisation points (Note [Device-side errors])
  }
  void synchronizeEvent(void* event) const override {
    if (event) MT_RT_CHECK(rt::event_synchronize(event));
    raiseDeviceErrors();
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    MT_RT_CHECK(rt::device_synchronize(resolveDevice(device_index)));
    raiseDeviceError(resolveDevice(device_index));
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    deviceAllocator()->recordStream(data_ptr, stream);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "both events must be recorded before calling elapsed_time()");
    float ms = 0;
    MT_RT_CHECK(rt::event_elapsed_ms(start, end, &ms));
    return ms;
  }
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, MytorchGuardImpl);

} // namespace mytorch
