// Device-side assertions (aten::_assert_async): the glue computes the flag on the device (self != 0) and this
// kernel records an error when it is false (device_error.h), so nothing waits for the device; the error is raised
// as Note [Device-side errors] says (at once on the sim, at the next synchronisation on a GPU, as torch.cuda's).
#pragma once

#include "mytorch/device_error.h"
#include "mytorch/launch.h"

namespace mytorch {

struct AssertArgs {
  const bool* ok = nullptr;  // one flag on the device
  ErrorSite error;
};

MT_LAUNCHER(assert_true, (const AssertArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
