// The non-template half of the one check path (Checked.h, Note [One check path for native ops]).
#include "csrc/core/Checked.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

namespace mytorch::checked {

void deviceMismatch(std::string_view op, const c10::Device& a, const c10::Device& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a, " and ", b,
              "! (when checking arguments for ", op, ")");
}

void checkWritten(const Scan& s, at::Tensor* const* written, size_t nwritten) {
  for (size_t w = 0; w < nwritten; ++w) {
    const at::Tensor& out = *written[w];
    if (!out.defined()) continue;
    at::assert_no_internal_overlap(out);
    for (const at::Tensor& in : s.inputs) {
      if (!in.is_same(out)) at::assert_no_partial_overlap(out, in);
    }
  }
}

at::Tensor stridedOutTemp(const at::Tensor& out) {
  if (!out.defined() || out.numel() == 0 || out.is_contiguous()) return at::Tensor();
  return at::empty({0}, out.options());
}

void copyBack(at::Tensor& out, const at::Tensor& temp) {
  at::native::resize_output(out, temp.sizes());
  out.copy_(temp);
}

} // namespace mytorch::checked
