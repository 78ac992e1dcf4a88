// Note [Device-side errors] (DeviceErrors.h).
#include "csrc/core/DeviceErrors.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
#include <mutex>
#include <string>

#include "csrc/core/Graph.h"
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

// Both registries are read on every error-checked launch and every synchronisation point: lock-free reads of
// append-only arrays, the mutex only to add an entry.
std::mutex& mu() {
  static std::mutex m;
  return m;
}
constexpr int kMaxCodes = 64;  // (op, format, exception type) triples: a handful in practice
Code g_codes[kMaxCodes];
std::atomic<int> g_ncodes{0};
constexpr int kMaxSlots = 128;  // every c10::DeviceIndex
std::atomic<DeviceError*> g_slots[kMaxSlots];  // per device, allocated on first use, never freed

bool envOn(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
std::atomic<bool>& blocking() {
  static std::atomic<bool> b{envOn("MYTORCH_LAUNCH_BLOCKING") || envOn("CUDA_LAUNCH_BLOCKING")};
  return b;
}

DeviceError* slotFor(c10::DeviceIndex device, bool create) {
  if (device < 0 || device >= kMaxSlots) return nullptr;
  DeviceError* slot = g_slots[device].load(std::memory_order_acquire);
  if (slot != nullptr || !create) return slot;
  std::lock_guard<std::mutex> lock(mu());
  slot = g_slots[device].load(std::memory_order_relaxed);
  if (slot == nullptr) {
    void* p = nullptr;
    MT_RT_CHECK(rt::host_malloc(sizeof(DeviceError), &p));  // pinned: mapped into the device's address space
    std::memset(p, 0, sizeof(DeviceError));
    slot = static_cast<DeviceError*>(p);
    g_slots[device].store(slot, std::memory_order_release);
  }
  return slot;
}

int32_t findCode(int n, const char* op, DeviceErrorFormat format, bool index_error) {
  for (int i = 0; i < n; ++i) {
    const Code& c = g_codes[i];
    if ((c.op == op || std::strcmp(c.op, op) == 0) && c.format == format && c.index_error == index_error) return i;
  }
  return -1;
}

int32_t codeFor(const char* op, DeviceErrorFormat format, bool index_error) {
  int32_t k = findCode(g_ncodes.load(std::memory_order_acquire), op, format, index_error);
  if (k >= 0) return k;
  std::lock_guard<std::mutex> lock(mu());
  const int n = g_ncodes.load(std::memory_order_relaxed);
  k = findCode(n, op, format, index_error);
  if (k >= 0) return k;
  TORCH_CHECK(n < kMaxCodes, "mytorch: more than ", kMaxCodes, " device-side error kinds");
  g_codes[n] = {op, format, index_error};
  g_ncodes.store(n + 1, std::memory_order_release);
  return n;
}

[[noreturn]] void raise(const DeviceError& e, bool deferred) {
  Code code{"an op", DeviceErrorFormat::IndexOutOfBounds, true};
  if (e.code >= 0 && e.code < g_ncodes.load(std::memory_order_acquire)) code = g_codes[e.code];
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
    case DeviceErrorFormat::SignalTimeout:
      msg = "symmetric memory: no signal from rank " + std::to_string(e.value) + " on channel " +
            std::to_string(e.dim) + " within " + std::to_string(e.size) +
            " ms (that rank exited, or did not make the matching call)";
      break;
    case DeviceErrorFormat::AssertFailed: msg = code.op; break;
  }
  if (deferred) {
    const std::string by = code.format == DeviceErrorFormat::AssertFailed ? "aten::_assert_async" : code.op;
    msg += " (recorded on the device by " + by +
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

ErrorSite assertSite(const c10::Device& device, const std::string& message) {
  static std::mutex mu;
  static auto* kept = new std::unordered_set<std::string>();  // the registry holds their pointers: never freed
  const char* op = "Expected Tensor with single nonzero value, but got zero";
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = kept->find(message);
    if (it == kept->end() && kept->size() < 32) it = kept->insert(message).first;
    if (it != kept->end()) op = it->c_str();
  }
  return deviceErrorSite(device, op, DeviceErrorFormat::AssertFailed, false);
}

void afterErrorCheckedLaunch(const c10::Device& device) {
  if (!onSim() && !blocking().load(std::memory_order_relaxed)) return;  // the sim's synchronisation costs nothing
  if (capturing()) return;  // the launch is recorded: the graph's replay checks the slot (Graph.cpp)
  MT_RT_CHECK(rt::stream_synchronize(device.index(), nativeHandle(currentStream(device.index()))));
  raiseIfSet(slotFor(device.index(), false), false);
}

void raiseDeviceError(c10::DeviceIndex device) { raiseIfSet(slotFor(device, false), true); }

void raiseDeviceErrors() {
  for (auto& s : g_slots) raiseIfSet(s.load(std::memory_order_acquire), true);
}

void setLaunchBlocking(bool on) { blocking().store(on); }
bool launchBlocking() { return blocking().load(); }

namespace {
std::atomic<int>& syncMode() {
  static std::atomic<int> mode{0};
  return mode;
}
} // namespace

void setSyncDebugMode(int mode) {
  TORCH_CHECK_VALUE(mode >= 0 && mode <= 2, "set_sync_debug_mode: expected 0 (default), 1 (warn) or 2 (error), got ",
                    mode);
  syncMode().store(mode);
}
int syncDebugMode() { return syncMode().load(); }
void warnOrErrorOnSync() {
  const int mode = syncMode().load(std::memory_order_relaxed);
  if (mode == 0) return;
  TORCH_CHECK(mode != 2, "called a synchronizing mytorch operation");
  TORCH_WARN("called a synchronizing mytorch operation");
}

} // namespace mytorch
