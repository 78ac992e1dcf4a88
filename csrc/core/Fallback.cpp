// The boxed CPU fallback (docs/architecture.md, "Op registration and fallback").
//
// Note [Fallback data movement]
// On sim, device memory is host memory, so device tensors are handed to the CPU kernel as CPU tensors
// that alias the same bytes (same storage offset and strides): in-place ops write straight into device
// memory and view ops return views of the same storage. On cuda, tensors are copied to the host (the
// whole storage for ops that return views, so the view's offsets mean the same thing) and mutated
// arguments are copied back; `out=` arguments get a fresh empty host tensor whose result is copied (and
// resized) into them. On sim an out= argument aliases too; if the kernel has to grow it, the resize moves
// it to host memory and the result is copied back. Results that are new tensors are copied to the device
// of the op's first mytorch argument. Either way the call counts as a fallback: "native" means our
// kernel ran.
//
// Note [Aliased arguments in the fallback]
// Arguments that share a device storage share one host storage too (on sim a host alias of it, on cuda one
// copy of it), so a CPU kernel sees the same aliasing as on the CPU. That matters for an out= that is also an
// input: whether to refuse it (kthvalue, masked_select) or compute it in place (asin) is each CPU kernel's own
// rule, and it can only apply that rule if it can tell. Such an out= goes in as itself, neither emptied nor
// replaced by a fresh tensor. A partial overlap of an out= and an input is refused before the call, with
// ATen's message, as the check path does.
#include "csrc/core/Fallback.h"

#include "csrc/core/Checked.h"
#include "csrc/core/Graph.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "mytorch/runtime.h"

namespace mytorch {
namespace {

std::atomic<int> g_mode{static_cast<int>(FallbackMode::Warn)};
std::mutex g_stats_mu;
std::map<std::string, FallbackCounter> g_stats;
FallbackCounter g_totals;
std::set<std::string> g_warned;

bool isDeviceTensor(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

struct Moved {
  int64_t to_cpu = 0;
  int64_t to_device = 0;
};

// One host storage per device storage within a call (Note [Aliased arguments in the fallback]).
using HostStorages = std::unordered_map<const c10::StorageImpl*, c10::Storage>;

at::Tensor viewOnHost(const at::Tensor& t, const c10::Storage& host) {
  auto out = at::empty({0}, t.options().device(at::kCPU));
  out.set_(host, t.storage_offset(), t.sizes(), t.strides());
  out._set_conj(t.is_conj());
  out._set_neg(t.is_neg());
  return out;
}

// A CPU tensor over the same bytes as device tensor `t` (sim only): same storage offset, sizes, strides.
at::Tensor aliasOnHost(const at::Tensor& t, HostStorages* storages) {
  const c10::Storage& storage = t.storage();
  auto it = storages->find(storage.unsafeGetStorageImpl());
  if (it == storages->end()) {
    auto* keep = new c10::Storage(storage);
    void* base = storage.data_ptr().get();
    c10::DataPtr ptr(
        base, keep, [](void* ctx) { delete static_cast<c10::Storage*>(ctx); }, c10::Device(c10::DeviceType::CPU));
    // Resizable with the CPU allocator: a kernel that must grow an out= argument moves it to fresh host
    // memory instead of failing, and writeBack notices the move.
    c10::Storage host(c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(ptr), c10::GetCPUAllocator(), true);
    it = storages->emplace(storage.unsafeGetStorageImpl(), std::move(host)).first;
  }
  return viewOnHost(t, it->second);
}

// A CPU copy of the device tensor's whole storage, viewed like `t` (cuda: keeps view offsets meaningful).
at::Tensor storageCopyOnHost(const at::Tensor& t, HostStorages* storages, Moved* moved) {
  auto it = storages->find(t.storage().unsafeGetStorageImpl());
  if (it == storages->end()) {
    const size_t n = t.storage().nbytes();
    auto bytes = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
    auto dev_bytes = at::empty({0}, t.options().dtype(at::kByte));
    dev_bytes.set_(t.storage(), 0, {static_cast<int64_t>(n)}, {1});
    bytes.copy_(dev_bytes);
    moved->to_cpu += static_cast<int64_t>(n);
    it = storages->emplace(t.storage().unsafeGetStorageImpl(), bytes.storage()).first;
  }
  return viewOnHost(t, it->second);
}

struct ArgPlan {
  bool is_out = false;   // an out= argument: host result copied and resized into it
  bool shared = false; // shares memory with an out= that is also an input (Note [Aliased arguments in the fallback])
  bool write = false; // mutated in place
  bool needs_storage = false;
};

at::Tensor toHost(const at::Tensor& t, const ArgPlan& plan, bool sim, HostStorages* storages, Moved* moved) {
  if (!isDeviceTensor(t)) return t;
  if (sim) {
    at::Tensor alias = aliasOnHost(t, storages);
    if (!plan.is_out || plan.shared) return alias;
    // A contiguous out= alias goes in as it is: the CPU kernel keeps or resizes it as it would the user's out= (with
    // its own warning, or none), and it stays in device memory when the bytes suffice. A non-contiguous out= goes
    // in as a fresh contiguous host tensor of its sizes and is copied through its strides afterwards (Note [Strided
    // out=] in Checked.cpp): some CPU kernels write an out= as if it were contiguous, over the view's gaps.
    if (t.is_contiguous()) return alias;
    return t.numel() > 0 ? at::empty(t.sizes(), t.options().device(at::kCPU)) : alias;
  }
  if (plan.shared) return storageCopyOnHost(t, storages, moved);
  // An out= goes in as a fresh contiguous host tensor of its sizes, as a non-contiguous one does on sim: the kernel
  // keeps or resizes it, and writeBack copies it through the device tensor's strides. A host copy with the
  // device's strides would meet the kernels that write an out= as if it were contiguous (narrow_copy).
  if (plan.is_out) return at::empty(t.sizes(), t.options().device(at::kCPU));
  if (plan.needs_storage || plan.write) return storageCopyOnHost(t, storages, moved);
  moved->to_cpu += static_cast<int64_t>(t.numel()) * t.element_size();
  return t.to(at::kCPU);
}

// Makes the device tensor hold a mutated or out= argument's host result, unless it already does.
void writeBack(const at::Tensor& device, const at::Tensor& host, const ArgPlan& plan, bool sim, Moved* moved) {
  if (!isDeviceTensor(device)) return;
  if (sim && host.storage().data_ptr().get() == device.storage().data_ptr().get()) {
    // Still the zero-copy alias; only the metadata may have changed (a resize that did not grow).
    if (!host.sizes().equals(device.sizes()) || !host.strides().equals(device.strides()) ||
        host.storage_offset() != device.storage_offset()) {
      at::Tensor d = device;
      d.set_(device.storage(), host.storage_offset(), host.sizes(), host.strides());
    }
    // A kernel may also flip the view bits of its out= (linalg_lu_solve with left=False leaves a conjugate
    // view): the bytes are shared, so the bits must travel too or the values read back conjugated.
    at::Tensor d = device;
    if (d.is_conj() != host.is_conj()) d._set_conj(host.is_conj());
    if (d.is_neg() != host.is_neg()) d._set_neg(host.is_neg());
    return;
  }
  if (!sim && !plan.is_out && !plan.write) return;
  checked::resizeOutAs(device, host, /*warn=*/false);  // the host kernel's own resize warned, or it resizes silently
  device.copy_(host);
  moved->to_device += static_cast<int64_t>(host.numel()) * host.element_size();
}

// The device and out= overlap rules of the one check path (Note [One check path for native ops] in
// csrc/core/Checked.h) for operators that take the fallback: every tensor on one device, unless native_functions.yaml says the operator
// checks its own (TensorIterator ops, which take CPU scalars); an out= is always on the device. ATen would
// otherwise run the CPU kernel on a CPU out= or on another device's tensors without a word.
void checkDevices(const std::string& name, const std::vector<c10::Argument>& args, const torch::jit::Stack& stack,
                  size_t base) {
  const std::string_view op =
      std::string_view(name).substr(name.rfind("::") == std::string::npos ? 0 : name.rfind("::") + 2);
  const bool strict = !checked::inList(op);
  std::optional<c10::Device> device;
  for (size_t i = 0; i < args.size(); ++i) { // the mytorch device the call is for
    const c10::IValue& iv = stack[base + i];
    if (iv.isTensor() && isDeviceTensor(iv.toTensor())) {
      device = iv.toTensor().device();
      break;
    }
  }
  if (!device) return;
  auto check = [&](const at::Tensor& t, bool out) {
    if (!t.defined() || t.device() == *device) return;
    if (!strict && !out && t.device().is_cpu()) return;
    checked::deviceMismatch(op, *device, t.device());
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& iv = stack[base + i];
    const bool out = args[i].is_out();
    if (iv.isTensor()) {
      check(iv.toTensor(), out);
      // Some CPU kernels write an out= as if it were contiguous (narrow_copy): one whose elements share memory
      // would take them past its allocation, into whatever the device keeps next to it.
      if (out && iv.toTensor().defined()) at::assert_no_internal_overlap(iv.toTensor());
    } else if (iv.isTensorList()) {
      for (const at::Tensor& t : iv.toTensorList()) check(t, out);
    } else if (iv.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        if (t.has_value()) check(*t, out);
      }
    }
  }
}

// The storages of the out= arguments that fully overlap one of the call's inputs; a partial overlap is refused
// with ATen's message, which the CPU kernel could not give for arguments on separate host storages.
std::set<const c10::StorageImpl*> outsOverInputs(const std::vector<c10::Argument>& args, const torch::jit::Stack& stack,
                                                 size_t base) {
  std::set<const c10::StorageImpl*> shared;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& out = stack[base + i];
    if (!args[i].is_out() || !out.isTensor() || !isDeviceTensor(out.toTensor())) continue;
    for (size_t j = 0; j < args.size(); ++j) {
      const c10::IValue& iv = stack[base + j];
      if (args[j].is_out() || !iv.isTensor() || !isDeviceTensor(iv.toTensor())) continue;
      at::assert_no_partial_overlap(out.toTensor(), iv.toTensor());
      if (at::get_overlap_status(out.toTensor(), iv.toTensor()) == at::MemOverlapStatus::Full) {
        shared.insert(out.toTensor().storage().unsafeGetStorageImpl());
      }
    }
  }
  return shared;
}

} // namespace

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::string name =
      schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name();
  beginFallback(name);
  RECORD_FUNCTION("mytorch::fallback::" + name, std::vector<c10::IValue>());

  const bool sim = rt::kind() == rt::Kind::Sim;
  const auto& args = schema.arguments();
  const size_t num_args = args.size();
  const size_t base = stack->size() - num_args;
  bool returns_view = false;
  for (const auto& r : schema.returns()) returns_view = returns_view || (r.alias_info() && !r.alias_info()->isWrite());

  checkDevices(name, args, *stack, base);
  // before any argument is replaced by its host alias: which out= are also inputs
  const std::set<const c10::StorageImpl*> shared = outsOverInputs(args, *stack, base);
  Moved moved;
  HostStorages storages;
  std::optional<c10::Device> target;
  std::vector<c10::IValue> originals(num_args);
  std::vector<ArgPlan> plans(num_args);
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& iv = (*stack)[base + i];
    ArgPlan& plan = plans[i];
    plan.is_out = args[i].is_out();
    plan.shared = iv.isTensor() && isDeviceTensor(iv.toTensor()) &&
                  shared.count(iv.toTensor().storage().unsafeGetStorageImpl()) > 0;
    plan.write = args[i].alias_info() && args[i].alias_info()->isWrite();
    plan.needs_storage = returns_view && args[i].alias_info() != nullptr;
    auto note = [&](const at::Tensor& t) {
      if (isDeviceTensor(t) && !target) target = t.device();
    };
    if (iv.isTensor()) {
      const at::Tensor t = iv.toTensor();
      note(t);
      originals[i] = iv;
      iv = toHost(t, plan, sim, &storages, &moved);
    } else if (iv.isTensorList()) {
      originals[i] = iv;
      c10::List<at::Tensor> host;
      for (const at::Tensor& t : iv.toTensorList()) {
        note(t);
        host.push_back(toHost(t, plan, sim, &storages, &moved));
      }
      iv = host;
    } else if (iv.isOptionalTensorList()) {
      originals[i] = iv;
      c10::List<std::optional<at::Tensor>> host;
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        if (t.has_value()) note(*t);
        host.push_back(t.has_value() ? std::optional<at::Tensor>(toHost(*t, plan, sim, &storages, &moved))
                                     : std::nullopt);
      }
      iv = host;
    } else if (iv.isDevice() && iv.toDevice().type() == c10::DeviceType::PrivateUse1) {
      if (!target) target = iv.toDevice();
      iv = c10::Device(at::kCPU);
    } else if (iv.isGenerator() && iv.toGenerator().device().type() == c10::DeviceType::PrivateUse1) {
      TORCH_CHECK(false, "mytorch: operator '", name, "' has no native mytorch kernel and its CPU fallback cannot ",
                  "draw from a mytorch generator; pass no generator or a CPU one");
    }
  }
  std::vector<c10::IValue> host_args(stack->begin() + static_cast<std::ptrdiff_t>(base), stack->end());

  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (const c10::NotImplementedError& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "mytorch: operator '", name, "' has no native mytorch kernel, and the CPU ",
                                "fallback has no CPU kernel for it either:\n", e.what_without_backtrace());
  }

  // Mutated and out= arguments: make the device tensors hold the results.
  for (size_t i = 0; i < num_args; ++i) {
    if (!(plans[i].write || plans[i].is_out) || originals[i].isNone()) continue;
    if (originals[i].isTensor()) {
      writeBack(originals[i].toTensor(), host_args[i].toTensor(), plans[i], sim, &moved);
    } else if (originals[i].isTensorList()) {
      auto dev = originals[i].toTensorList();
      auto host = host_args[i].toTensorList();
      for (size_t k = 0; k < dev.size(); ++k) writeBack(dev.get(k), host.get(k), plans[i], sim, &moved);
    }
  }

  // Results: an alias of an argument becomes that argument (or a view of it); anything else is copied over.
  const auto& rets = schema.returns();
  const size_t rbase = stack->size() - rets.size();
  auto aliasedArg = [&](const c10::AliasInfo* info) -> std::optional<size_t> {
    if (info == nullptr) return std::nullopt;
    for (size_t i = 0; i < num_args; ++i) {
      const auto* a = args[i].alias_info();
      if (a && a->beforeSets() == info->beforeSets()) return i;
    }
    return std::nullopt;
  };
  auto toDevice = [&](const at::Tensor& h) -> at::Tensor {
    if (!h.defined() || !target) return h;
    moved.to_device += static_cast<int64_t>(h.numel()) * h.element_size();
    return h.to(*target);
  };
  auto mapOne = [&](const at::Tensor& h, const c10::IValue& orig, bool is_write) -> at::Tensor {
    if (!orig.isTensor() || !isDeviceTensor(orig.toTensor())) return toDevice(h);
    const at::Tensor& d = orig.toTensor();
    if (is_write) return d;
    return d.as_strided(h.sizes(), h.strides(), h.storage_offset()); // a view of the argument's storage
  };
  for (size_t j = 0; j < rets.size(); ++j) {
    c10::IValue& rv = (*stack)[rbase + j];
    auto idx = aliasedArg(rets[j].alias_info());
    const bool is_write = rets[j].alias_info() && rets[j].alias_info()->isWrite();
    if (rv.isTensor()) {
      rv = idx ? mapOne(rv.toTensor(), originals[*idx], is_write) : toDevice(rv.toTensor());
    } else if (rv.isTensorList()) {
      auto host = rv.toTensorList();
      c10::List<at::Tensor> out;
      if (idx && originals[*idx].isTensorList() && is_write) {
        out = originals[*idx].toTensorList();
      } else if (idx && originals[*idx].isTensor()) {
        for (const at::Tensor& h : host) out.push_back(mapOne(h, originals[*idx], false));
      } else {
        for (const at::Tensor& h : host) out.push_back(toDevice(h));
      }
      rv = out;
    }
  }

  countFallback(name, moved.to_cpu, moved.to_device);
}

void beginFallback(const std::string& name) {
  refuseDuringCapture(("the CPU fallback of '" + name + "' (a host round trip)").c_str());
  const auto mode = static_cast<FallbackMode>(g_mode.load());
  TORCH_CHECK_NOT_IMPLEMENTED(
      mode != FallbackMode::Error, "mytorch: operator '", name,
      "' has no native mytorch kernel, and MYTORCH_FALLBACK=error forbids running it on the CPU");
  if (mode == FallbackMode::Warn) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(g_stats_mu);
      first = g_warned.insert(name).second;
    }
    if (first) {
      TORCH_WARN("mytorch: operator '", name, "' has no native mytorch kernel; it runs on the CPU through the ",
                 "fallback (warned once per operator; MYTORCH_FALLBACK=silent hides this, =error forbids it)");
    }
  }
}

void countFallback(const std::string& name, int64_t bytes_to_cpu, int64_t bytes_to_device) {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  for (FallbackCounter* c : {&g_stats[name], &g_totals}) {
    c->calls += 1;
    c->bytes_to_cpu += bytes_to_cpu;
    c->bytes_to_device += bytes_to_device;
  }
}

void setFallbackMode(const std::string& mode) {
  if (mode == "warn") g_mode = static_cast<int>(FallbackMode::Warn);
  else if (mode == "silent") g_mode = static_cast<int>(FallbackMode::Silent);
  else if (mode == "error") g_mode = static_cast<int>(FallbackMode::Error);
  else TORCH_CHECK_VALUE(false, "MYTORCH_FALLBACK must be one of warn, silent, error, but got '", mode, "'");
}

std::string fallbackMode() {
  switch (static_cast<FallbackMode>(g_mode.load())) {
    case FallbackMode::Warn: return "warn";
    case FallbackMode::Silent: return "silent";
    case FallbackMode::Error: return "error";
  }
  return "warn";
}

std::map<std::string, FallbackCounter> fallbackStats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_stats;
}

FallbackCounter fallbackTotals() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_totals;
}

void resetFallbackStats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  g_stats.clear();
  g_totals = FallbackCounter{};
  g_warned.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>()); }

// Quantized tensors (qint8, quint8, qint32, quint4x2, quint2x4) are out of scope on mytorch (and deprecated in
// PyTorch 2.13): any operator reaching the QuantizedPrivateUse1 key says so, instead of the dispatcher's "could
// not run ... from the 'Quantizedmytorch' backend". torch.accelerator.get_device_capability leaves them out.
static void refuseQuantized(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "mytorch does not support quantized tensors: ", op.schema().operator_name(),
                              " was asked to make or use one on the device. Quantize on the CPU (tensor.cpu()) "
                              "or keep a float dtype on mytorch");
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseQuantized>());
}

} // namespace mytorch
