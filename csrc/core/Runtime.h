// The runtime as the glue sees it: runtime.h statuses turned into torch errors carrying the runtime's own message
// (docs/architecture.md, "Conventions"), and the facts of the simulated runtime (its device memory is host memory).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>

#include "mytorch/launch.h"

namespace mytorch {

[[noreturn]] inline void throwRuntimeError(rt::Status s, const char* what) {
  const std::string message = rt::last_error(); // copied first: the text lives in thread-local storage
  TORCH_CHECK(false, "mytorch ", rt::kind_name(), " runtime: ", rt::status_name(s), " in ", what, ": ", message);
}

// Whether kernels run on the simulated runtime, where device memory is host memory.
bool onSim();
// The device's streaming multiprocessors (cached per device), for the launch plans the glue sizes workspaces by.
int64_t multiProcessors(int device);
// A CPU tensor over the same bytes as device tensor `t` (sim and emu only; same sizes, strides and offset): how
// the sim glue hands GEMMs to ATen's CPU BLAS (docs/architecture.md, "Kernels") and the sim process group hands
// tensors to Gloo.
at::Tensor hostView(const at::Tensor& t);

} // namespace mytorch

#define MT_RT_CHECK(expr)                               \
  do {                                                  \
    ::mytorch::rt::Status mt_status_ = (expr);          \
    if (mt_status_ != ::mytorch::rt::Status::Success) { \
      ::mytorch::throwRuntimeError(mt_status_, #expr);  \
    }                                                   \
  } while (0)
