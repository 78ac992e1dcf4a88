// See OpTrace.h. A global RecordFunction callback (needs inputs) records operators whose arguments
// include a mytorch tensor or the mytorch device. It costs boxing every op's inputs while it is on, so it
// is only on while something (the alignment suite) asks for it.
#include "csrc/core/OpTrace.h"

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <mutex>
#include <optional>

namespace mytorch {
namespace {

std::mutex g_mu;
std::map<std::string, int64_t> g_calls;
std::optional<at::CallbackHandle> g_handle;

bool onDevice(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
  if (v.isDevice()) return v.toDevice().type() == c10::DeviceType::PrivateUse1;
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) return true;
    }
  }
  return false;
}

std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
  auto op = fn.operator_name();
  if (!op.has_value()) return nullptr;
  for (const c10::IValue& v : fn.inputs()) {
    if (onDevice(v)) {
      std::string name = op->overload_name.empty() ? op->name : op->name + "." + op->overload_name;
      std::lock_guard<std::mutex> lock(g_mu);
      g_calls[name] += 1;
      break;
    }
  }
  return nullptr;
}

} // namespace

void startOpTrace() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls.clear();
  if (!g_handle) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&onEnter).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
}

std::map<std::string, int64_t> stopOpTrace() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_handle) {
    at::removeCallback(*g_handle);
    g_handle.reset();
  }
  return std::move(g_calls);
}

} // namespace mytorch
