// Op table: aten::_assert_async (+ .msg, _functional_assert_async.msg, _make_dep_token), the asserts compiled graphs and
// torch._check on tensors emit (TorchTitan's MoE routing has one). As torch.cuda's: the element count is checked on
// the host, the value on the device (mytorch/assert.h) with no synchronisation, and a zero raises
// (Note [Device-side errors]: at once on the sim, at the next synchronisation on a GPU) with the CPU's message.
#include <ATen/core/Tensor.h>
#include <ATen/ops/any.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/Runtime.h"
#include "mytorch/assert.h"

namespace mytorch {
namespace {

using at::Tensor;

void assertOnDevice(const Tensor& self, const std::string& message) {
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() < 2, "Boolean value of Tensor with more than one value is ambiguous");
  c10::DeviceGuard guard(self.device());
  Tensor ok = self.is_complex() ? at::view_as_real(self).ne(0).any() : self.ne(0); // bool, on the device
  AssertArgs a;
  a.ok = ok.data_ptr<bool>();
  a.error = assertSite(self.device(), message);
  MT_RT_CHECK(kernels::assert_true(a, streamFor(ok)));
  afterErrorCheckedLaunch(self.device());
}

void assertAsync(const Tensor& self) {
  assertOnDevice(self, "Expected Tensor with single nonzero value, but got zero");
}

void assertAsyncMsg(const Tensor& self, c10::string_view msg) {
  assertOnDevice(self, msg.empty() ? std::string("Assertion is failed") : std::string(msg));
}

Tensor functionalAssertAsyncMsg(const Tensor& self, c10::string_view msg, const Tensor& dep_token) {
  assertAsyncMsg(self, msg);
  return dep_token.clone();
}

// The token functionalized asserts thread through a graph (an empty scalar, as the CPU's).
Tensor makeDepToken(std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                    std::optional<at::Device> device, std::optional<bool> pin_memory,
                    std::optional<at::MemoryFormat> memory_format) {
  return at::empty({}, at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory),
                   memory_format);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_assert_async", assertAsync);
  MT_IMPL(m, "_assert_async.msg", assertAsyncMsg);
  MT_IMPL(m, "_functional_assert_async.msg", functionalAssertAsyncMsg);
  MT_IMPL(m, "_make_dep_token", makeDepToken);
}

} // namespace mytorch
