// Turns runtime.h statuses into torch errors carrying the runtime's own message (docs/architecture.md, "Conventions").
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "mytorch/launch.h"

namespace mytorch {

[[noreturn]] inline void throwRuntimeError(rt::Status s, const char* what) {
  const std::string message = rt::last_error(); // copied first: the text lives in thread-local storage
  TORCH_CHECK(false, "mytorch ", rt::kind_name(), " runtime: ", rt::status_name(s), " in ", what, ": ", message);
}

} // namespace mytorch

#define MT_RT_CHECK(expr)                                              \
  do {                                                                 \
    ::mytorch::rt::Status mt_status_ = (expr);                         \
    if (mt_status_ != ::mytorch::rt::Status::Success) {                \
      ::mytorch::throwRuntimeError(mt_status_, #expr);                 \
    }                                                                  \
  } while (0)
