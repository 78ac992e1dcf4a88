// See Runtime.h.
#include "csrc/core/Runtime.h"

#include <array>
#include <atomic>

#include <ATen/ops/from_blob.h>

#include "mytorch/runtime.h"

namespace mytorch {

bool onSim() { return rt::kind() == rt::Kind::Sim; }

int64_t multiProcessors(int device) {
  static std::array<std::atomic<int64_t>, 64> cache{};
  const size_t d = static_cast<size_t>(device) % cache.size();
  int64_t n = cache[d].load(std::memory_order_relaxed);
  if (n == 0) {
    rt::DeviceProps p{};
    MT_RT_CHECK(rt::get_device_properties(device, &p));
    n = p.multi_processor_count > 0 ? p.multi_processor_count : 1;
    cache[d].store(n, std::memory_order_relaxed);
  }
  return n;
}

at::Tensor hostView(const at::Tensor& t) {
  if (!t.defined()) return t;
  TORCH_INTERNAL_ASSERT(rt::kind() != rt::Kind::Cuda, "hostView: device memory is host memory on sim and emu only");
  at::Tensor v = at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
  // the lazy conjugate and negative bits travel with the view (ops such as mm take conjugate views as they are)
  if (t.is_conj()) v._set_conj(true);
  if (t.is_neg()) v._set_neg(true);
  return v;
}

} // namespace mytorch
