// Note [Device-side errors] (DeviceErrors.h).
#include "csrc/core/DeviceErrors.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/device_error.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

struct Code {
  const char* op;
  DeviceErrorFormat format;
  bool index_error;
};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::vector<Code>& codes() {  // the registry the kernels' `code` indexes (interned: a handful of entries)
  static std::vector<Code> c;
  return c;
}
std::vector<DeviceError*>& slots() {  // per device, allocated on first use, never freed
  static std::vector<DeviceError*> s;
  return s;
}

bool envOn(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
std::atomic<bool>& blocking() {
  static std::atomic<bool> b{envOn("MYTORCH_LAUNCH_BLOCKING") || envOn("CUDA_LAUNCH_BLOCKING")};
  return b;
}

DeviceError* slotFor(c10::DeviceIndex device, bool create) {
  std::lock_guard<std::mutex> lock(mu());
  auto& s = slots();
  if (device < 0) return nullptr;
  if (static_cast<size_t>(device) >= s.size()) {
    if (!create) return nullptr;
    s.resize(static_cast<size_t>(device) + 1, nullptr);
  }
  if (s[device] == nullptr && create) {
    void* p = nullptr;
    MT_RT_CHECK(rt::host_malloc(sizeof(DeviceError), &p));  // pinned: mapped into the device's address space
    std::memset(p, 0, sizeof(DeviceError));
    s[device] = static_cast<DeviceError*>(p);
  }
  return s[device];
}

int32_t codeFor(const char* op, DeviceErrorFormat format, bool index_error) {
  std::lock_guard<std::mutex> lock(mu());
  auto& c = codes();
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::strcmp(c[i].op, op) == 0 && c[i].format == format && c[i].index_error == index_error) {
      return static_cast<int32_t>(i);
    }
  }
  c.push_back({op, format, index_error});
  return static_cast<int32_t>(c.size() - 1);
}

[[noreturn]] void raise(const DeviceError& e, bool deferred) {
  Code code{"an op", DeviceErrorFormat::IndexOutOfBounds, true};
  {
    std::lock_guard<std::mutex> lock(mu());
    if (e.code >= 0 && static_cast<size_t>(e.code) < codes().size()) code = codes()[e.code];
  }
  std::string msg;
  switch (code.format) {
    case DeviceErrorFormat::IndexOutOfBounds:
      msg = "index " + std::to_string(e.value) + " is out of bounds for " +
            (e.dim >= 0 ? "dimension " + std::to_string(e.dim) + " with size " + std::to_string(e.size)
                        : std::string("the dimension it indexes"));
      break;
    case DeviceErrorFormat::TargetOutOfBounds: msg = "Target " + std::to_string(e.value) + " is out of bounds."; break;
    case DeviceErrorFormat::EmbeddingIndex:
      msg = "embedding_dense_backward: index " + std::to_string(e.value) + " is out of bounds for " +
            std::to_string(e.size) + " embeddings";
      break;
  }
  if (deferred) {
    msg += " (recorded on the device by " + std::string(code.op) +
           " and raised at this synchronisation; MYTORCH_LAUNCH_BLOCKING=1 raises it at the op)";
  }
  if (code.index_error) TORCH_CHECK_INDEX(false, msg);
  TORCH_CHECK(false, msg);
}

void raiseIfSet(DeviceError* slot, bool deferred) {
  if (slot == nullptr || __atomic_load_n(&slot->flag, __ATOMIC_ACQUIRE) == 0) return;
  const DeviceError e = *slot;
  __atomic_store_n(&slot->flag, 0, __ATOMIC_RELEASE);
  raise(e, deferred);
}

} // namespace

ErrorSite deviceErrorSite(const c10::Device& device, const char* op, DeviceErrorFormat format, bool index_error,
                          int64_t dim, int64_t size) {
  ErrorSite s;
  s.slot = slotFor(device.index(), true);
  s.code = codeFor(op, format, index_error);
  s.dim = dim;
  s.size = size;
  return s;
}

void afterErrorCheckedLaunch(const c10::Device& device) {
  if (!onSim() && !blocking().load(std::memory_order_relaxed)) return;  // the sim's synchronisation costs nothing
  MT_RT_CHECK(rt::stream_synchronize(device.index(), nativeHandle(currentStream(device.index()))));
  raiseIfSet(slotFor(device.index(), false), false);
}

void raiseDeviceError(c10::DeviceIndex device) { raiseIfSet(slotFor(device, false), true); }

void raiseDeviceErrors() {
  std::vector<DeviceError*> all;
  {
    std::lock_guard<std::mutex> lock(mu());
    all = slots();
  }
  for (DeviceError* s : all) raiseIfSet(s, true);
}

void setLaunchBlocking(bool on) { blocking().store(on); }
bool launchBlocking() { return blocking().load(); }

} // namespace mytorch
