// See Runtime.h.
#include "csrc/core/Runtime.h"

#include <ATen/ops/from_blob.h>

#include "mytorch/runtime.h"

namespace mytorch {

bool onSim() { return rt::kind() == rt::Kind::Sim; }

at::Tensor hostView(const at::Tensor& t) {
  if (!t.defined()) return t;
  TORCH_INTERNAL_ASSERT(rt::kind() != rt::Kind::Cuda, "hostView: device memory is host memory on sim and emu only");
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

} // namespace mytorch
