// The copy kernel's description of a copy made without TensorIterator (Note [Copy description without an iterator]).
#pragma once

#include <ATen/core/Tensor.h>

#include "mytorch/copy.h"

namespace mytorch {

// Note [Copy description without an iterator]
// A copy's description (the copy kernel's shape and two operands) made from the two layouts directly: the
// dimensions of `sizes` ordered by the destination's strides (fastest first; ties by the source's), size-1
// dimensions dropped, neighbours contiguous in both operands merged, the source's strides 0 where it broadcasts
// (its sizes right-aligned against `sizes`, as expand's). It is the description TensorIterator builds for a copy
// up to the order of equal strides, without the iterator's build (about a microsecond a copy), for the copies the
// glue makes all the time: copy_ on one device, and torch.cat's parts (each part a narrow and a copy_ before:
// cat of two 16-float tensors at 0.37x the CPU). False where the iterator must do it: a source that does not
// broadcast to `sizes`, more dimensions than the kernels take after merging, or a dtype the kernels do not have.
// The caller checks devices, the lazy conjugate and negative bits, and overlap.
bool copyDescription(CopyArgs& p, void* dst, at::IntArrayRef sizes, at::IntArrayRef dst_strides,
                     c10::ScalarType dst_type, const void* src, at::IntArrayRef src_sizes, at::IntArrayRef src_strides,
                     c10::ScalarType src_type);

} // namespace mytorch
