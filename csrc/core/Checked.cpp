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

void checkWritten(const Scan& s, at::Tensor* const* written, const bool* deferred, size_t nwritten) {
  for (size_t w = 0; w < nwritten; ++w) {
    const at::Tensor& out = *written[w];
    if (!out.defined()) continue;
    if (!deferred[w]) at::assert_no_internal_overlap(out);
    for (const auto& in : s.inputs) {
      if (!in->is_same(out)) at::assert_no_partial_overlap(out, *in);
    }
  }
}

void checkOutDevices(const Scan& s, at::Tensor* const* written, size_t first, size_t n) {
  if (!s.ours.has_value()) return;
  for (size_t w = first; w < n; ++w) {
    const at::Tensor& out = *written[w];
    if (out.defined() && out.device() != *s.ours) deviceMismatch(s.op, *s.ours, out.device());
  }
}

void warnIfExpanded(const at::Tensor& self, int row) {
  if (!self.defined() || at::has_internal_overlap(self) != at::MemOverlap::Yes) return;
  const ExpandedSelfWarning& w = kExpandedSelfWarnings[row];
  TORCH_WARN("Use of ", w.shown, " on expanded tensors is deprecated. Please clone() the tensor before performing ",
             "this operation. This also applies to advanced indexing e.g. ", w.example);
}

// Note [Strided out=]
// ATen's rule for out= (its "out= notes"): an out= of the right size, whatever its strides, is written in place and
// keeps its sizes and strides; one of another size is resized (with a warning where the op's kernel resizes through
// resize_output). A non-contiguous out= is computed into a contiguous temporary of out's own sizes, as ATen's
// kernels compute into out.contiguous() (arange, linspace, logspace and range among them), so a kernel sees the
// sizes the user gave: where it keeps them (a factory whose out has the right number of elements), out keeps them;
// where it resizes the temporary, out takes the new sizes without a second warning (the kernel's resize of a
// temporary of out's sizes gave ATen's warning already). The values are then copied through out's strides. An out=
// whose elements share memory (an expanded tensor) takes the same path: the kernel's resize gives it a layout of its
// own, as ATen's resize does before its kernels check the output, and one the kernel keeps is refused then, with
// ATen's message, before anything is written into it.
at::Tensor stridedOutTemp(const at::Tensor& out, bool direct) {
  if (!out.defined() || out.numel() == 0) return at::Tensor();
  if ((direct || out.is_contiguous()) && at::has_internal_overlap(out) != at::MemOverlap::Yes) return at::Tensor();
  return at::empty(out.sizes(), out.options());
}

void resizeOutAs(const at::Tensor& out, const at::Tensor& result, bool warn) {
  if (out.sizes().equals(result.sizes())) return;
  if (warn) at::native::resize_output(out, result.sizes());
  else out.resize_(result.sizes());
  // a dense layout of the same elements fits the storage the resize made
  if (!out.strides().equals(result.strides()) && result.is_non_overlapping_and_dense())
    out.as_strided_(result.sizes(), result.strides());
}

void copyBack(at::Tensor& out, const at::Tensor& temp) {
  // resized as the kernel resized the temporary, without a second warning
  if (out.sizes().equals(temp.sizes())) at::assert_no_internal_overlap(out);
  else resizeOutAs(out, temp, /*warn=*/false);
  out.copy_(temp);
}

} // namespace mytorch::checked
