// Errors a kernel finds in its data (an index out of bounds, a class target out of range): recorded on the device
// instead of being copied to the host after every launch, so the ops that can meet them need no synchronisation
// (Note [Device-side errors] in csrc/core/DeviceErrors.h says when they are raised).
#pragma once

#include <cstdint>

#include "mytorch/macros.h"

namespace mytorch {

// One per device, in pinned host memory the device writes directly (mapped: no copy to read it). The first error
// since the last check wins: flag 0 -> 1 by compare-and-swap, then the details.
struct DeviceError {
  int32_t flag;
  int32_t code;   // which op and message (the glue's registry)
  int64_t value;  // the offending value
  int64_t dim;    // and what the glue passed to describe the bound
  int64_t size;
};

// What a launch passes its kernel: where to record, and what to record besides the value.
struct ErrorSite {
  DeviceError* slot = nullptr;
  int32_t code = 0;
  int64_t dim = -1;
  int64_t size = -1;
};

MT_HOST_DEVICE inline void record_error(const ErrorSite& e, int64_t value) {
  if (e.slot == nullptr) return;
#if defined(__CUDA_ARCH__)
  const bool first = atomicCAS(&e.slot->flag, 0, 1) == 0;
#else
  int32_t expected = 0;
  const bool first =
      __atomic_compare_exchange_n(&e.slot->flag, &expected, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#endif
  if (first) {
    e.slot->code = e.code;
    e.slot->value = value;
    e.slot->dim = e.dim;
    e.slot->size = e.size;
  }
}

} // namespace mytorch
