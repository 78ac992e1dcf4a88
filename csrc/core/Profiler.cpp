// Profiler stubs for PrivateUse1: device events around each profiled op (timed by the runtime's events),
// so the profiler reports mytorch device time per op.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

struct MytorchProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex d = currentDeviceIndex();
    if (device) *device = d;
    rt::Event ev = nullptr;
    MT_RT_CHECK(rt::event_create(d, true, &ev));
    *event = std::shared_ptr<void>(ev, [](void* e) { (void)rt::event_destroy(e); });
    if (cpu_ns) *cpu_ns = c10::getTime();
    MT_RT_CHECK(rt::event_record(d, ev, nativeHandle(currentStream(d))));
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    MT_RT_CHECK(rt::event_synchronize(b->get()));
    float ms = 0;
    MT_RT_CHECK(rt::event_elapsed_ms(a->get(), b->get(), &ms));
    return ms * 1000.0f; // the profiler wants microseconds
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex prev = currentDeviceIndex();
    for (int d = 0; d < rt::device_count(); ++d) {
      MT_RT_CHECK(rt::set_device(d));
      op(d);
    }
    MT_RT_CHECK(rt::set_device(prev));
  }
  void synchronize() const override { MT_RT_CHECK(rt::device_synchronize(currentDeviceIndex())); }
};

const bool kRegistered = [] {
  static MytorchProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

} // namespace
} // namespace mytorch
